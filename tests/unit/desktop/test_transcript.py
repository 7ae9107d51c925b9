"""Transcript: durable rows and live events as display items, and the notices a Qt model relies on."""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec
import pytest

from desktop.state.transcript import (
    PROGRESS_KEEP,
    PROGRESS_LINES,
    AssistantItem,
    Item,
    NoteItem,
    ToolItem,
    Transcript,
    UserItem,
    args_summary,
    items_from_messages,
)
from shared import protocol as p
from tests.unit.desktop.factories import (
    Events,
    Rows,
    ShadowListener,
    assistant,
    call,
    note,
    tool,
    user,
)

ItemT = TypeVar("ItemT", bound=Item)


def of(kind: type[ItemT], item: Item) -> ItemT:
    """The item, checked to be of this kind."""
    assert isinstance(item, kind), f"{item.key} is a {type(item).__name__}, not a {kind.__name__}"
    return item


def active(turn_id: str, admission_id: str, text: str = "") -> p.ActiveTurn:
    return p.ActiveTurn(turn_id=turn_id, admission_id=admission_id, text=text)


def full(item: Item) -> tuple[Any, ...]:
    """What a card or message shows, plus its identity in the list (key, turn)."""
    if isinstance(item, ToolItem):
        return ("tool", item.key, item.turn_id, item.call_id, item.name, item.arguments, item.summary,
                item.status, item.output, item.diff, item.duration_ms, item.spilled_path, item.expanded)
    if isinstance(item, AssistantItem):
        return ("assistant", item.key, item.turn_id, item.text, item.streaming)
    if isinstance(item, UserItem):
        return ("user", item.key, item.turn_id, item.text)
    assert isinstance(item, NoteItem)
    return ("note", item.key, item.turn_id, item.kind, item.text)


def cards(t: Transcript) -> list[ToolItem]:
    return [it for it in t.items if isinstance(it, ToolItem)]


def one_turn(rows: Rows, turn: str = "t1") -> list[p.Message]:
    """A turn with a prompt, a text + two calls, their results, and a final answer."""
    start = len(rows.rows)
    rows.user("List the files and show the diff", turn)
    rows.assistant("Let me look.", turn, [call("c1", command="ls -la\nsecond line"),
                                         call("c2", "patch", path="a.py", old="x", new="y")])
    rows.tool("c1", "a.py\nb.py", turn, meta={"duration_ms": 40})
    rows.tool("c2", "patched", turn, name="patch",
              meta={"diff": "--- a.py\n+++ a.py\n-x\n+y", "duration_ms": 7, "spilled_path": "/spill/c2.txt"})
    rows.assistant("Done: one file patched.", turn)
    return rows.rows[start:]


# --- items from durable rows ---------------------------------------------------------------


def test_items_fold_each_result_into_its_call_card() -> None:
    rows = Rows()
    one_turn(rows)
    rows.note("interrupted", "You interrupted the turn.", "t1")
    items = items_from_messages(rows.rows)

    assert [type(it).__name__ for it in items] == [
        "UserItem", "AssistantItem", "ToolItem", "ToolItem", "AssistantItem", "NoteItem"]
    u, a, c1, c2, final, n = (of(UserItem, items[0]), of(AssistantItem, items[1]), of(ToolItem, items[2]),
                              of(ToolItem, items[3]), of(AssistantItem, items[4]), of(NoteItem, items[5]))
    assert (u.key, u.turn_id, u.text) == ("m000001", "t1", "List the files and show the diff")
    assert (a.key, a.text, a.streaming) == ("m000002", "Let me look.", False)
    assert c1.key == "call:c1"
    assert c1.call_id == "c1"
    assert c1.name == "terminal"
    assert c1.arguments == {"command": "ls -la\nsecond line"}
    assert c1.summary == "ls -la", "the header shows the first line of the command"
    assert (c1.status, c1.output, c1.diff) == ("ok", "a.py\nb.py", "")
    assert (c1.duration_ms, c1.spilled_path) == (40, None)
    assert c2.name == "patch"
    assert c2.summary == "a.py"
    assert c2.diff.startswith("--- a.py")
    assert c2.duration_ms == 7
    assert c2.spilled_path == "/spill/c2.txt"
    assert final.text == "Done: one file patched."
    assert (n.kind, n.text) == ("interrupted", "You interrupted the turn.")
    assert len({it.key for it in items}) == len(items), "keys are unique"


def test_a_call_without_a_stored_result_stays_pending_and_tool_only_rows_add_no_text_item() -> None:
    rows = [
        user("m1", "go", "t1"),
        assistant("m2", "", "t1", [call("c1", command="sleep 100")]),
    ]
    items = items_from_messages(rows)
    assert [type(it) for it in items] == [UserItem, ToolItem]
    assert of(ToolItem, items[1]).status == "pending"
    assert of(ToolItem, items[1]).output == ""


def test_a_result_whose_call_is_on_an_older_page_gets_its_own_card() -> None:
    items = items_from_messages([
        tool("m7", "c9", "boom", "t1", status="error", name="read_file", meta={"duration_ms": 3}),
        assistant("m8", "It failed.", "t1"),
    ])
    card = items[0]
    assert isinstance(card, ToolItem)
    assert (card.key, card.call_id, card.name, card.status, card.output) == (
        "call:c9", "c9", "read_file", "error", "boom")
    assert card.arguments == {}
    assert card.duration_ms == 3


def test_result_rows_without_status_or_meta_read_as_ok() -> None:
    row = tool("m3", "c1", "out", "t1", status=None, meta=None)
    assert (row.status, row.meta) == (None, None)
    card = items_from_messages([assistant("m2", "", "t1", [call("c1", command="true")]), row])[0]
    assert isinstance(card, ToolItem)
    assert (card.status, card.diff, card.duration_ms, card.spilled_path) == ("ok", "", None, None)


def test_compacted_rows_are_still_shown() -> None:
    row = user("m1", "old prompt", "t0", compacted=True)
    items = items_from_messages([row, note("m2", "summary", "Summary of the start.", "t0")])
    assert [it.key for it in items] == ["m1", "m2"]
    assert isinstance(items[1], NoteItem)
    assert of(NoteItem, items[1]).kind == "summary"


@pytest.mark.parametrize(("name", "arguments", "expected"), [
    ("terminal", {"command": "make test\nmake lint", "timeout_s": 5}, "make test"),
    ("read_file", {"offset": 10, "path": "src/app.py"}, "src/app.py"),
    ("search_files", {"glob": "*.py", "pattern": "TODO"}, "TODO"),
    ("web", {"url": "https://example.org"}, "https://example.org"),
    ("custom", {"n": 3, "m": 4}, "n=3"),
    ("list_dir", {}, ""),
    ("terminal", {"command": "", "workdir": "/tmp"}, "command="),
])
def test_args_summary(name: str, arguments: dict[str, Any], expected: str) -> None:
    assert args_summary(name, arguments) == expected


def test_args_summary_is_one_short_line() -> None:
    assert args_summary("terminal", {"command": "x" * 500}) == "x" * 200
    assert len(args_summary("custom", {"blob": "y" * 500})) == 200


# --- load ------------------------------------------------------------------------------------


def test_load_inserts_the_page_and_records_paging_state() -> None:
    rows = Rows()
    one_turn(rows)
    t, rec = ShadowListener.attach()
    t.load(rows.rows, has_more=True)

    assert rec.ops == [("insert", 0, 5)]
    rec.check()
    assert t.has_more is True
    assert t.oldest_message_id == "m000001"
    assert t.fetched_messages == 5
    assert [full(it) for it in t.items] == [full(it) for it in items_from_messages(rows.rows)]


def test_load_of_an_empty_session() -> None:
    t, rec = ShadowListener.attach()
    t.load([], has_more=False)
    assert t.items == []
    assert rec.ops == []
    assert t.oldest_message_id is None
    assert t.has_more is False


def test_a_second_load_replaces_everything_and_forgets_the_stream() -> None:
    rows = Rows()
    one_turn(rows)
    t, rec = ShadowListener.attach()
    t.load(rows.rows[:2], has_more=False)
    ev = Events()
    t.apply(ev.delta("t2", "streaming..."))
    assert len(t.items) == 5  # user, text, two cards, the streaming message
    rec.clear()

    t.load(rows.rows, has_more=False)
    assert rec.ops == [("remove", 0, 5), ("insert", 0, 5)]
    rec.check()
    assert not any(isinstance(it, AssistantItem) and it.streaming for it in t.items)
    # a later delta starts a fresh item rather than writing into the one that was dropped
    t.apply(ev.delta("t2", "more"))
    assert isinstance(t.items[-1], AssistantItem)
    assert t.items[-1].text == "more"
    rec.check()


def test_load_with_an_active_turn_shows_what_was_streamed_and_marks_its_calls_running() -> None:
    rows = Rows()
    rows.user("old", "t0")
    rows.assistant("", "t0", [call("c0", command="true")])  # an old call never answered
    rows.user("now", "t1")
    rows.assistant("Checking.", "t1", [call("c1", command="pytest")])
    t, rec = ShadowListener.attach()
    t.load(rows.rows, has_more=False, active_turn=active("t1", "a1", "The tests are"))
    rec.check()
    c0, c1 = cards(t)
    assert c0.status == "pending", "only the running turn's calls are running"
    assert c1.status == "running"
    stream = t.items[-1]
    assert isinstance(stream, AssistantItem)
    assert (stream.turn_id, stream.text, stream.streaming) == ("t1", "The tests are", True)

    ev = Events(seq=10)
    t.apply(ev.delta("t1", " passing"))
    assert t.items[-1] is stream, "the same message goes on"
    assert stream.text == "The tests are passing"
    assert t.apply(ev.complete("t1", "a1", "The tests are passing.")) == "t1"
    assert stream.text == "The tests are passing."
    assert not stream.streaming
    rec.check()


def test_load_with_an_active_turn_that_streamed_nothing_yet() -> None:
    t, rec = ShadowListener.attach()
    t.load([user("m1", "hi", "t1")], has_more=False, active_turn=active("t1", "a1"))
    assert len(t.items) == 1
    t.apply(Events().delta("t1", "Hello"))
    assert isinstance(t.items[-1], AssistantItem)
    assert t.items[-1].streaming
    assert t.items[-1].text == "Hello"
    rec.check()


# --- prepend ----------------------------------------------------------------------------------


def test_prepend_adds_an_older_page_above_without_touching_the_rest() -> None:
    rows = Rows()
    one_turn(rows, "t1")
    one_turn(rows, "t2")
    older, newer = rows.rows[:5], rows.rows[5:]
    t, rec = ShadowListener.attach()
    t.load(newer, has_more=True)
    before = list(t.items)
    rec.clear()

    added = t.prepend(older, has_more=False)
    assert added == 5
    assert rec.ops == [("insert", 0, 5)]
    rec.check()
    assert all(a is b for a, b in zip(t.items[added:], before, strict=True))
    assert t.oldest_message_id == "m000001"
    assert t.has_more is False
    assert t.fetched_messages == 10
    assert [full(it) for it in t.items] == [full(it) for it in items_from_messages(rows.rows)]


def test_prepend_of_an_empty_page_changes_nothing_but_has_more() -> None:
    t, rec = ShadowListener.attach()
    t.load([user("m5", "hi")], has_more=True)
    rec.clear()
    assert t.prepend([], has_more=False) == 0
    assert rec.ops == []
    assert t.has_more is False
    assert t.oldest_message_id == "m5"


def test_prepend_joins_a_call_split_from_its_results_by_the_page_boundary() -> None:
    rows = Rows()
    one_turn(rows, "t1")  # m1 user, m2 assistant(c1, c2), m3 tool c1, m4 tool c2, m5 final
    older, newer = rows.rows[:2], rows.rows[2:]  # the boundary falls between the call and its results
    t, rec = ShadowListener.attach()
    t.load(newer, has_more=True)
    assert [it.key for it in t.items] == ["call:c1", "call:c2", "m000005"]
    assert cards(t)[0].arguments == {}, "the page alone does not know the call's arguments"
    final = t.items[2]
    rec.clear()

    added = t.prepend(older, has_more=False)
    rec.check()
    assert rec.ops == [("remove", 0, 2), ("insert", 0, 4)]
    assert added == 2
    assert len(t.items) == 3 + added, "the return value is how much the list grew"
    assert t.items[-1] is final
    assert [it.call_id for it in cards(t)] == ["c1", "c2"], "exactly one card per call"
    c1, c2 = cards(t)
    assert c1.arguments == {"command": "ls -la\nsecond line"}
    assert c1.summary == "ls -la"
    assert (c1.status, c1.output, c1.duration_ms) == ("ok", "a.py\nb.py", 40)
    assert (c2.status, c2.output, c2.spilled_path) == ("ok", "patched", "/spill/c2.txt")
    assert c2.diff.startswith("--- a.py")
    assert [full(it) for it in t.items] == [full(it) for it in items_from_messages(rows.rows)]


def test_prepend_when_some_results_of_the_batch_are_on_the_older_page() -> None:
    rows = Rows()
    rows.user("go", "t1")
    rows.assistant("", "t1", [call("c1", command="a"), call("c2", command="b"), call("c3", command="c")])
    rows.tool("c1", "A", "t1")
    rows.tool("c2", "B", "t1", status="denied")
    rows.tool("c3", "C", "t1", status="interrupted")
    rows.assistant("Stopped.", "t1")
    t, rec = ShadowListener.attach()
    t.load(rows.rows[4:], has_more=True)  # tool c3 (orphan), final
    t.prepend(rows.rows[:4], has_more=False)  # user, assistant(c1..c3), tool c1, tool c2
    rec.check()
    assert [(c.call_id, c.status, c.output) for c in cards(t)] == [
        ("c1", "ok", "A"), ("c2", "denied", "B"), ("c3", "interrupted", "C")]
    assert [full(it) for it in t.items] == [full(it) for it in items_from_messages(rows.rows)]


def test_prepend_over_three_pages_with_a_page_of_results_only() -> None:
    rows = Rows()
    rows.user("go", "t1")
    rows.assistant("Two things.", "t1", [call("c1", command="a"), call("c2", command="b")])
    rows.tool("c1", "A", "t1")
    rows.tool("c2", "B", "t1", status="error")
    rows.assistant("Done.", "t1")
    t, rec = ShadowListener.attach()
    t.load(rows.rows[3:], has_more=True)  # tool c2, final
    t.prepend(rows.rows[2:3], has_more=True)  # tool c1: its call is older still
    assert [it.key for it in t.items] == ["call:c1", "call:c2", "m000005"]
    t.prepend(rows.rows[:2], has_more=False)
    rec.check()
    assert [c.call_id for c in cards(t)] == ["c1", "c2"]
    assert [full(it) for it in t.items] == [full(it) for it in items_from_messages(rows.rows)]


def test_prepend_keeps_a_result_card_open_when_it_is_rebuilt_with_its_call() -> None:
    rows = Rows()
    one_turn(rows, "t1")
    t = Transcript()
    t.load(rows.rows[2:], has_more=True)
    t.toggle(0)
    assert cards(t)[0].expanded
    t.prepend(rows.rows[:2], has_more=False)
    c1, c2 = cards(t)
    assert c1.expanded, "the reader opened this card; loading older rows must not close it"
    assert not c2.expanded


def test_prepend_leaves_orphans_of_other_calls_alone() -> None:
    # The page adds an older turn whose calls are unrelated to the orphan at the top.
    t = Transcript()
    t.load([tool("m9", "c9", "late", "t2"), assistant("m10", "ok", "t2")], has_more=True)
    orphan = t.items[0]
    added = t.prepend([user("m1", "hi", "t1"), assistant("m2", "", "t1", [call("c1", command="x")]),
                       tool("m3", "c1", "X", "t1")], has_more=True)
    assert added == 2
    assert t.items[2] is orphan
    assert [c.call_id for c in cards(t)] == ["c1", "c9"]


# --- reconcile_turn ----------------------------------------------------------------------------


def live_turn(t: Transcript, ev: Events, turn: str = "t1", aid: str = "a1") -> None:
    """The live events of `one_turn`."""
    t.apply(ev.started(turn, aid))
    t.add_user(aid, turn, "List the files and show the diff")
    t.apply(ev.delta(turn, "Let me "))
    t.apply(ev.delta(turn, "look."))
    t.apply(ev.tool_start(turn, "c1", command="ls -la\nsecond line"))
    t.apply(ev.tool_start(turn, "c2", "patch", "a.py", path="a.py", old="x", new="y"))
    t.apply(ev.tool_complete(turn, "c1", duration_ms=40))
    t.apply(ev.tool_complete(turn, "c2", name="patch", duration_ms=7, spilled_path="/spill/c2.txt",
                             meta={"diff": "--- a.py\n+++ a.py\n-x\n+y"}))
    t.apply(ev.delta(turn, "Done: one file"))
    t.apply(ev.complete(turn, aid, "Done: one file patched."))


def test_reconcile_turn_swaps_the_live_items_for_the_stored_rows() -> None:
    rows = Rows()
    rows.user("earlier", "t0")
    rows.assistant("Earlier answer.", "t0")
    t, rec = ShadowListener.attach()
    t.load(rows.rows, has_more=False)
    earlier = list(t.items)
    live_turn(t, Events(seq=2))
    rec.check()
    assert [type(it).__name__ for it in t.items[2:]] == [
        "UserItem", "AssistantItem", "ToolItem", "ToolItem", "AssistantItem"]
    assert t.items[2].key == "prompt:a1"
    t.toggle(5)  # the reader opened c2's card
    stored = one_turn(rows, "t1")
    rec.clear()

    t.reconcile_turn("t1", rows.rows)  # the page holds t0's rows too: only t1's are taken
    rec.check()
    assert all(a is b for a, b in zip(t.items[:2], earlier, strict=True)), "other turns are untouched"
    expected = items_from_messages(stored)
    of(ToolItem, expected[3]).expanded = True
    assert [full(it) for it in t.items[2:]] == [full(it) for it in expected]
    assert [op[0] for op in rec.ops] == ["remove"] * 5 + ["insert"]
    assert rec.ops[-1] == ("insert", 2, 5)
    # the turn is over: a delta of the next turn starts a new message after the stored rows
    t.apply(Events(seq=50).delta("t2", "Next"))
    assert t.items[-1].turn_id == "t2"
    assert len(t.items) == 8
    rec.check()


def test_reconcile_turn_without_rows_for_the_turn_keeps_the_live_items() -> None:
    t, rec = ShadowListener.attach()
    live_turn(t, Events())
    before = list(t.items)
    rec.clear()
    t.reconcile_turn("t1", [user("m1", "other", "t0")])
    assert t.items == before
    assert rec.ops == []


def test_reconcile_turn_puts_the_rows_where_the_turn_began_when_another_prompt_interleaved() -> None:
    t, rec = ShadowListener.attach()
    ev = Events()
    t.apply(ev.started("t1", "a1"))
    t.add_user("a1", "t1", "first")
    t.apply(ev.delta("t1", "Working"))
    t.add_user("a2", "t2", "second")  # another window's prompt, shown meanwhile, closes the message
    t.apply(ev.delta("t1", " on it"))  # so t1 goes on in a new item below it
    other = t.items[2]
    rec.clear()
    t.reconcile_turn("t1", [user("m1", "first", "t1"), assistant("m2", "Working on it", "t1")])
    rec.check()
    assert [it.key for it in t.items] == ["m1", "m2", "prompt:a2"]
    assert t.items[2] is other


def test_reconcile_turn_appends_a_turn_the_window_never_saw() -> None:
    t, rec = ShadowListener.attach()
    t.load([user("m1", "hi", "t0"), assistant("m2", "hello", "t0")], has_more=False)
    t.reconcile_turn("t1", [user("m3", "again", "t1"), assistant("m4", "yes", "t1")])
    rec.check()
    assert [it.key for it in t.items] == ["m1", "m2", "m3", "m4"]


def test_reconcile_turn_leaves_a_turn_alone_when_the_page_cut_off_its_beginning() -> None:
    # A long turn: the last page starts in the middle of it.  Replacing the whole turn with the
    # tail would lose its first rows from the window for good (they are newer than
    # oldest_message_id, so paging never brings them back).
    rows = Rows()
    rows.user("go", "t1")
    for i in range(3):
        rows.assistant(f"step {i}", "t1", [call(f"c{i}", command=f"cmd {i}")])
        rows.tool(f"c{i}", f"out {i}", "t1")
    rows.assistant("All done.", "t1")
    t, rec = ShadowListener.attach()
    ev = Events()
    t.apply(ev.started("t1", "a1"))
    t.add_user("a1", "t1", "go")
    for i in range(3):
        t.apply(ev.delta("t1", f"step {i}"))
        t.apply(ev.tool_start("t1", f"c{i}", command=f"cmd {i}"))
        t.apply(ev.tool_complete("t1", f"c{i}"))
    t.apply(ev.delta("t1", "All done."))
    t.apply(ev.complete("t1", "a1", "All done."))
    before = list(t.items)
    rec.clear()

    t.reconcile_turn("t1", rows.rows[4:])  # the page starts at step 1's result
    rec.check()
    assert t.items == before
    assert [c.call_id for c in cards(t)] == ["c0", "c1", "c2"]


def test_reconcile_turn_with_a_page_that_starts_at_the_turns_prompt_replaces_it_whole() -> None:
    t, rec = ShadowListener.attach()
    live_turn(t, Events())
    stored = one_turn(Rows(), "t1")
    t.reconcile_turn("t1", stored)  # the page's first row is this turn's, but it is the prompt
    rec.check()
    assert [full(it) for it in t.items] == [full(it) for it in items_from_messages(stored)]


# --- live events -------------------------------------------------------------------------------


def test_message_deltas_accumulate_in_one_streaming_item() -> None:
    t, rec = ShadowListener.attach()
    ev = Events()
    assert t.apply(ev.delta("t1", "Hel")) is None
    assert t.apply(ev.delta("t1", "lo")) is None
    rec.check()
    assert len(t.items) == 1
    item = t.items[0]
    assert isinstance(item, AssistantItem)
    assert item.streaming
    assert item.text == "Hello"
    assert item.turn_id == "t1"
    assert rec.ops == [("insert", 0, 1), ("changed", 0), ("changed", 0)]


def test_reasoning_deltas_are_no_event_of_the_protocol_and_leave_the_message_alone() -> None:
    t, rec = ShadowListener.attach()
    ev = Events()
    t.apply(ev.delta("t1", "Ans"))
    rec.clear()
    assert t.apply(ev.other("reasoning.delta", {"text": "Thinking "}, "t1")) is None
    assert rec.ops == []
    t.apply(ev.delta("t1", "wer"))
    assert len(t.items) == 1
    item = t.items[0]
    assert isinstance(item, AssistantItem)
    assert (item.text, item.streaming) == ("Answer", True)
    rec.check()


def test_versions_grow_with_every_change() -> None:
    t = Transcript()
    ev = Events()
    t.apply(ev.delta("t1", "a"))
    v1 = t.items[0].version
    t.apply(ev.delta("t1", "b"))
    v2 = t.items[0].version
    assert v2 > v1


def test_tool_start_ends_the_message_and_opens_a_running_card() -> None:
    t, rec = ShadowListener.attach()
    ev = Events()
    t.apply(ev.delta("t1", "Let me check."))
    t.apply(ev.tool_start("t1", "c1", command="git status\n--short"))
    rec.check()
    msg, card = t.items
    assert isinstance(msg, AssistantItem)
    assert not msg.streaming
    assert isinstance(card, ToolItem)
    assert (card.key, card.turn_id, card.name, card.status) == ("call:c1", "t1", "terminal", "running")
    assert card.arguments == {"command": "git status\n--short"}
    assert card.summary == "git status", "without a summary from the backend, one from the arguments"

    t.apply(ev.tool_start("t1", "c2", "read_file", "Reading a.py", path="a.py"))
    assert of(ToolItem, t.items[-1]).summary == "Reading a.py", "the backend's summary wins"

    t.apply(ev.delta("t1", "Now"))
    assert len(t.items) == 4
    second = t.items[-1]
    assert isinstance(second, AssistantItem)
    assert second.streaming
    assert second.text == "Now"
    assert second.key != msg.key
    rec.check()


def test_tool_start_for_a_call_already_shown_updates_that_card() -> None:
    t, rec = ShadowListener.attach()
    t.load([user("m1", "go", "t1"), assistant("m2", "", "t1", [call("c1", command="make")])],
           has_more=False, active_turn=active("t1", "a1"))
    card = of(ToolItem, t.items[1])
    t.apply(Events(seq=5).other("tool.start", {"call_id": "c1", "name": "terminal", "arguments": {},
                                               "summary": ""}, "t1"))
    rec.check()
    assert len(t.items) == 2
    assert t.items[1] is card
    assert card.arguments == {"command": "make"}, "empty arguments in the event keep the stored ones"
    assert card.status == "running"


def test_a_late_tool_start_does_not_undo_a_finished_card() -> None:
    t = Transcript()
    ev = Events()
    t.apply(ev.tool_complete("t1", "c1", "error"))
    t.apply(ev.tool_start("t1", "c1", command="x"))
    assert cards(t)[0].status == "error"


def test_tool_progress_appends_and_keeps_the_tail() -> None:
    t, rec = ShadowListener.attach()
    ev = Events()
    t.apply(ev.tool_start("t1", "c1", command="yes"))
    t.apply(ev.tool_progress("t1", "c1", "line 1\n"))
    t.apply(ev.tool_progress("t1", "c1", "line 2\n"))
    card = cards(t)[0]
    assert card.progress == "line 1\nline 2\n"
    t.apply(ev.tool_progress("t1", "c1", "".join(f"row {i}\n" for i in range(3 * PROGRESS_LINES))))
    assert card.progress.splitlines() == [f"row {i}" for i in range(2 * PROGRESS_LINES, 3 * PROGRESS_LINES)]
    t.apply(ev.tool_progress("t1", "c1", ("y" * 999 + "\n") * 100))
    assert len(card.progress) <= PROGRESS_KEEP
    t.apply(ev.tool_progress("t1", "c1", "END"))
    assert card.progress.endswith("y\nEND")
    assert len(card.progress) <= PROGRESS_KEEP
    assert rec.changes() == [0, 0, 0, 0, 0, 0]
    rec.check()


def test_tool_progress_is_a_stream_shown_as_a_terminal_leaves_it() -> None:
    """The garbled-output report: 40 lines over 10 s arrive as chunks that split lines anywhere,
    with progress bars redrawn by \r and colours; the card shows clean, whole lines."""
    t = Transcript()
    ev = Events()
    t.apply(ev.tool_start("t1", "c1", command="make"))
    stream = "".join(f"line {i}\n" for i in range(1, 41))
    stream += "\x1b[1;32mBuilding\x1b[0m \x1b]0;make: building\x07target\n"
    stream += "".join(f"\r[{'#' * i:<10}] {i * 10}%" for i in range(11)) + "\r\n"
    stream += "\x1b[31merror:\x1b[0m none\r\n\x1b[2K\rdone"
    for start in range(0, len(stream), 7):  # cuts lines, \r\n pairs and escape sequences
        t.apply(ev.tool_progress("t1", "c1", stream[start:start + 7]))
    lines = cards(t)[0].progress.splitlines()
    assert lines == [*(f"line {i}" for i in range(1, 41)),
                     "Building target", "[##########] 100%", "error: none", "done"]


def test_a_heartbeat_changes_no_output() -> None:
    t = Transcript()
    ev = Events()
    t.apply(ev.tool_progress("t1", "c1", "half a line"))
    t.apply(ev.tool_progress("t1", "c1", ""))
    assert cards(t)[0].progress == "half a line"


def test_tool_progress_for_a_card_not_shown_yet_opens_one() -> None:
    t, rec = ShadowListener.attach()
    t.apply(Events().tool_progress("t1", "c7", "hello"))
    card = cards(t)[0]
    assert (card.call_id, card.status, card.progress) == ("c7", "running", "hello")
    rec.check()


def test_tool_complete_records_the_outcome_and_the_diff() -> None:
    t, rec = ShadowListener.attach()
    ev = Events()
    t.apply(ev.tool_start("t1", "c1", "patch", "a.py", path="a.py"))
    t.apply(ev.tool_complete("t1", "c1", name="patch", summary="", duration_ms=9,
                             spilled_path="/spill/c1", meta={"diff": "-a\n+b"}))
    card = cards(t)[0]
    assert (card.status, card.summary, card.duration_ms, card.spilled_path, card.diff) == (
        "ok", "a.py", 9, "/spill/c1", "-a\n+b")
    rec.check()


def test_tool_complete_shows_the_start_of_the_result_until_the_stored_row_replaces_it() -> None:
    t = Transcript()
    ev = Events()
    t.apply(ev.tool_start("t1", "c1"))
    t.apply(ev.tool_complete("t1", "c1", output="line 1\nline 2", output_truncated=True))
    card = cards(t)[0]
    assert card.output == "line 1\nline 2\n…"  # says there is more
    t.apply(ev.tool_complete("t1", "c2", output="all of it"))
    assert cards(t)[1].output == "all of it"
    stored = [user("m1", "go", "t1"), assistant("m2", "", "t1", calls=[call("c1")]),
              tool("m3", "c1", "line 1\nline 2\nline 3", "t1")]
    t.reconcile_turn("t1", stored)
    assert cards(t)[0].output == "line 1\nline 2\nline 3"


def test_tool_complete_without_meta_keeps_a_diff_already_known() -> None:
    t = Transcript()
    ev = Events()
    t.apply(ev.tool_complete("t1", "c1", meta={"diff": "+x"}))
    t.apply(ev.tool_complete("t1", "c1", "error", summary="failed"))
    card = cards(t)[0]
    assert (card.status, card.diff, card.summary) == ("error", "+x", "failed")


@pytest.mark.parametrize("status", ["ok", "error", "denied", "skipped", "interrupted", "unknown"])
def test_every_tool_status_is_taken_as_is(status: str) -> None:
    t = Transcript()
    t.apply(Events().tool_complete("t1", "c1", status))
    assert cards(t)[0].status == status


def test_approvals_move_the_card_to_waiting_and_back() -> None:
    t, rec = ShadowListener.attach()
    ev = Events()
    t.apply(ev.tool_start("t1", "c1", command="rm -rf build"))
    t.apply(ev.tool_start("t1", "c2", command="ls"))
    rec.clear()
    t.apply(ev.approval_request("t1", "ap1", "c1"))
    assert cards(t)[0].status == "waiting_approval"
    assert cards(t)[1].status == "running"
    t.apply(ev.approval_resolved("t1", "ap1", "c1"))
    assert cards(t)[0].status == "running"
    assert rec.ops == [("changed", 0), ("changed", 0)]
    t.apply(ev.tool_complete("t1", "c1", "denied"))
    t.apply(ev.approval_resolved("t1", "ap1", "c1", "expired"))
    assert cards(t)[0].status == "denied", "a finished card keeps its outcome"
    rec.check()


def test_approval_for_a_call_not_shown_changes_nothing() -> None:
    t, rec = ShadowListener.attach()
    ev = Events()
    t.apply(ev.delta("t1", "hi"))
    rec.clear()
    assert t.apply(ev.approval_request("t1", "ap1", "c404")) is None
    assert rec.ops == []
    assert len(t.items) == 1


def test_turn_started_ends_an_open_message() -> None:
    t = Transcript()
    ev = Events()
    t.apply(ev.delta("t1", "partial"))
    assert t.apply(ev.started("t2", "a2")) is None
    item = t.items[0]
    assert isinstance(item, AssistantItem)
    assert not item.streaming
    t.apply(ev.delta("t2", "new"))
    assert len(t.items) == 2
    assert t.items[1].turn_id == "t2"


def test_message_complete_text_replaces_the_streamed_accumulation() -> None:
    t, rec = ShadowListener.attach()
    ev = Events()
    t.apply(ev.delta("t1", "Helo wrld"))  # coalesced or garbled: only a preview
    assert t.apply(ev.complete("t1", "a1", "Hello world.")) == "t1"
    item = t.items[0]
    assert isinstance(item, AssistantItem)
    assert (item.text, item.streaming) == ("Hello world.", False)
    assert len(t.items) == 1
    rec.check()
    t.apply(ev.delta("t2", "x"))
    assert len(t.items) == 2, "the completed message is closed"


def test_an_interrupted_turn_may_end_with_empty_text() -> None:
    t = Transcript()
    ev = Events()
    t.apply(ev.delta("t1", "I was say"))
    assert t.apply(ev.complete("t1", "a1", "", "interrupted")) == "t1"
    assert of(AssistantItem, t.items[0]).text == ""
    assert not of(AssistantItem, t.items[0]).streaming


def test_message_complete_without_deltas_shows_the_final_text() -> None:
    t, rec = ShadowListener.attach()
    ev = Events()
    t.apply(ev.tool_start("t1", "c1", command="ls"))
    t.apply(ev.tool_complete("t1", "c1"))
    assert t.apply(ev.complete("t1", "a1", "Here you go.")) == "t1"
    rec.check()
    final = t.items[-1]
    assert isinstance(final, AssistantItem)
    assert final.text == "Here you go."
    assert not final.streaming
    assert final.turn_id == "t1"


def test_a_turn_interrupted_while_its_tools_ran_does_not_repeat_the_message_shown() -> None:
    # Interrupted during the tool round, the turn's last message is the one with the calls:
    # message.complete carries its text, which the window already shows above the cards.
    t, rec = ShadowListener.attach()
    ev = Events()
    t.apply(ev.started("t1", "a1"))
    t.add_user("a1", "t1", "run the tests")
    t.apply(ev.delta("t1", "Running the tests."))
    t.apply(ev.tool_start("t1", "c1", command="pytest"))
    t.apply(ev.tool_complete("t1", "c1", "interrupted"))
    assert t.apply(ev.complete("t1", "a1", "Running the tests.", "interrupted")) == "t1"
    rec.check()
    assert [type(it).__name__ for it in t.items] == ["UserItem", "AssistantItem", "ToolItem"]
    assert of(AssistantItem, t.items[1]).text == "Running the tests."
    assert not of(AssistantItem, t.items[1]).streaming

    stored = [user("m1", "run the tests", "t1"),
              assistant("m2", "Running the tests.", "t1", [call("c1", command="pytest")]),
              tool("m3", "c1", "stopped", "t1", status="interrupted"),
              note("m4", "interrupted", "Interrupted by the user.", "t1")]
    t.reconcile_turn("t1", stored)
    rec.check()
    assert [full(it) for it in t.items] == [full(it) for it in items_from_messages(stored)]


def test_a_completed_turn_whose_answer_did_not_stream_still_shows_it_after_the_cards() -> None:
    t = Transcript()
    ev = Events()
    t.apply(ev.delta("t1", "Checking."))
    t.apply(ev.tool_start("t1", "c1", command="ls"))
    t.apply(ev.tool_complete("t1", "c1"))
    t.apply(ev.complete("t1", "a1", "Checking."))  # the same words, but a new, final message
    assert [type(it).__name__ for it in t.items] == ["AssistantItem", "ToolItem", "AssistantItem"]


def test_message_complete_with_no_text_and_no_stream_adds_nothing() -> None:
    t, rec = ShadowListener.attach()
    ev = Events()
    assert t.apply(ev.complete("t1", "a1", "", "failed", "provider down")) == "t1"
    assert t.items == []
    assert rec.ops == []


def test_unknown_event_types_are_ignored() -> None:
    t, rec = ShadowListener.attach()
    ev = Events()
    assert t.apply(ev.other("future.thing", {"x": 1}, "t1")) is None
    assert t.apply(ev.other("usage.update", {"usage": {}})) is None
    assert t.items == []
    assert rec.ops == []


# --- prompts, toggling, find ---------------------------------------------------------------------


def test_add_user_shows_the_prompt_once_and_closes_the_open_message() -> None:
    t, rec = ShadowListener.attach()
    ev = Events()
    t.apply(ev.delta("t0", "streaming"))
    t.add_user("a1", "t1", "What now?")
    t.add_user("a1", "t1", "What now?")
    rec.check()
    assert len(t.items) == 2
    msg, prompt = t.items
    assert isinstance(msg, AssistantItem)
    assert not msg.streaming
    assert isinstance(prompt, UserItem)
    assert (prompt.key, prompt.turn_id, prompt.text) == ("prompt:a1", "t1", "What now?")


def test_toggle_opens_and_closes_cards_only() -> None:
    t, rec = ShadowListener.attach()
    ev = Events()
    t.add_user("a1", "t1", "go")
    t.apply(ev.tool_start("t1", "c1", command="ls"))
    rec.clear()
    t.toggle(1)
    assert cards(t)[0].expanded
    t.toggle(1)
    assert not cards(t)[0].expanded
    t.toggle(0)  # a prompt: nothing to open
    assert rec.ops == [("changed", 1), ("changed", 1)]
    rec.check()


def test_find_returns_the_last_row_with_the_key() -> None:
    t = Transcript()
    t.load([user("m1", "a"), user("m2", "b")], has_more=False)
    assert t.find("m2") == 1
    assert t.find("m1") == 0
    assert t.find("nope") is None


def test_a_denied_card_knows_who_decided_and_a_failure_note_keeps_its_detail() -> None:
    r = Rows()
    r.user("clean", "t1")
    r.assistant("", "t1", [call("c1", "terminal", command="rm -rf build")])
    r.tool("c1", "denied", "t1", status="denied",
           meta={"decided_by": "user", "decided_at": "2026-11-30T14:02:00.000Z", "decision": "deny",
                 "duration_ms": 0})
    r.note("failed", "The server rejected the API key.", "t1")
    r.rows[-1] = msgspec.structs.replace(r.rows[-1], meta={"kind": "auth", "detail": "HTTP 401: bad key"})
    items = items_from_messages(r.rows)
    card = next(i for i in items if isinstance(i, ToolItem))
    assert (card.decided_by, card.decided_at, card.decision) == ("user", "2026-11-30T14:02:00.000Z", "deny")
    note = next(i for i in items if isinstance(i, NoteItem))
    assert note.detail == "HTTP 401: bad key"


def test_a_call_blocked_by_a_hook_names_it_and_a_hook_note_is_a_note() -> None:
    r = Rows()
    r.user("clean", "t1")
    r.assistant("", "t1", [call("c1", "terminal", command="rm -rf build")])
    r.tool("c1", "Not run: blocked by hook no-rm: no rm here", "t1", status="denied",
           meta={"decided_by": "hook", "hook": "no-rm", "decided_at": "2026-11-30T14:02:00.000Z"})
    r.note("hook", "The post_tool hook audit exited with status 1; the turn went on without it.",
           "t1")
    items = items_from_messages(r.rows)
    card = next(i for i in items if isinstance(i, ToolItem))
    assert (card.decided_by, card.hook) == ("hook", "no-rm")
    note = next(i for i in items if isinstance(i, NoteItem))
    assert note.kind == "hook"
    assert "audit" in note.text
