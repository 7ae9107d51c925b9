"""A delegate call's card without Qt: its child session, its state in words, task and answer."""

from __future__ import annotations

from desktop.state.delegation import (
    answer_of,
    child_state,
    context_of,
    is_delegate,
    task_of,
    unnamed_children,
)
from desktop.state.sessions import SessionRows
from desktop.state.transcript import ToolItem, Transcript, items_from_messages
from tests.unit.desktop.factories import Events, Rows, call, event, session

CHILD = "ses_child"


def card(t: Transcript, call_id: str = "c1") -> ToolItem:
    i = t.find(f"call:{call_id}")
    assert i is not None
    item = t.items[i]
    assert isinstance(item, ToolItem)
    return item


def test_a_live_card_learns_its_child_follows_its_state_and_ends_with_the_answer() -> None:
    t, ev = Transcript(), Events()
    t.apply(ev.started("t1", "a1"))
    t.apply(ev.tool_start("t1", "c1", name="delegate", task="Count the TODOs", context="in src/"))
    item = card(t)
    assert is_delegate(item)
    assert item.summary == "Count the TODOs"
    assert (task_of(item), context_of(item)) == ("Count the TODOs", "in src/")
    assert child_state(item).words == "Starting…"

    t.apply(ev.tool_progress("t1", "c1", "Waiting for a free sub-agent slot (4 running).\n"))
    assert child_state(item).words.startswith("Waiting for a free slot")
    t.apply(ev.other("tool.progress", {"call_id": "c1", "text": "", "meta": {"child_session_id": CHILD}},
                     "t1"))
    assert item.child_session_id == CHILD
    t.apply(ev.tool_progress("t1", "c1", f"Sub-agent session {CHILD} is working on it.\n"))
    assert child_state(item).words == "Working in its own session…"
    assert not child_state(item).done
    t.apply(ev.tool_progress("t1", "c1", "The sub-agent is waiting for an approval in its session.\n"))
    assert child_state(item).words == "Waiting for your approval in its session."
    t.apply(ev.tool_progress("t1", "c1", "The sub-agent goes on.\n"))
    assert child_state(item).words == "Working in its own session…"
    assert answer_of(item) == "", "no answer while it runs"

    t.apply(ev.tool_complete("t1", "c1", name="delegate", output="There are 12.",
                             meta={"child_session_id": CHILD, "child_outcome": "completed"}))
    assert child_state(item).done
    assert child_state(item).tone == "success"
    assert answer_of(item) == "There are 12."


def test_stored_rows_keep_the_child_and_say_how_it_ended() -> None:
    rows = Rows()
    rows.user("go", "t1")
    rows.assistant("", "t1", [call("c1", "delegate", task="A"), call("c2", "delegate", task="B"),
                              call("c3", "delegate", task="C")])
    rows.tool("c1", "The answer.", "t1", name="delegate", meta={"child_session_id": "s1"})
    rows.tool("c2", "The sub-agent failed: no key.", "t1", name="delegate", status="error",
              meta={"child_session_id": "s2"})
    rows.tool("c3", "Not run", "t1", name="delegate", status="skipped")
    cards = [it for it in items_from_messages(rows.rows) if isinstance(it, ToolItem)]
    assert [c.child_session_id for c in cards] == ["s1", "s2", None]
    assert [child_state(c).tone for c in cards] == ["success", "danger", "muted"]
    assert answer_of(cards[1]) == "The sub-agent failed: no key."
    assert answer_of(cards[2]) == ""
    assert not is_delegate(ToolItem("k", None, name="terminal"))


def test_the_session_list_leaves_sub_agents_out() -> None:
    rows = SessionRows()
    rows.load([session("mine")], None)
    child = session(CHILD, delegated_from="mine", delegated_call_id="c1")
    rows.apply(event("session.created", {"session": child}, session_id=CHILD))
    rows.apply(event("session.updated", {"session": child}, session_id=CHILD))
    assert [r.session_id for r in rows.rows] == ["mine"]
    # Its parent deleted, it is unlinked: an ordinary session from then on.
    freed = session(CHILD, updated_at="2026-11-29T18:01:00.000Z", delegated_call_id="c1")
    rows.apply(event("session.updated", {"session": freed}, session_id=CHILD))
    assert [r.session_id for r in rows.rows] == [CHILD, "mine"]


def test_cards_loaded_mid_call_learn_their_child_from_the_listing_of_sub_agents() -> None:
    rows = Rows()
    rows.user("go", "t1")
    rows.assistant("", "t1", [call("c1", "delegate", task="A"), call("c2", "delegate", task="B"),
                              call("c3", "terminal", command="ls")])
    t = Transcript()
    t.load(rows.rows, False)
    assert unnamed_children(t.items)
    t.link_children([session("s1", delegated_from="sess-1", delegated_call_id="c1"),
                     session("other", delegated_from="sess-1", delegated_call_id="c9")])
    assert [card(t, c).child_session_id for c in ("c1", "c2", "c3")] == ["s1", None, None]
    assert unnamed_children(t.items), "c2 has not started its child yet"
    t.link_children([session("s2", delegated_from="sess-1", delegated_call_id="c2")])
    assert not unnamed_children(t.items)
    assert card(t, "c1").child_session_id == "s1", "a known child is kept"
