"""The latest turn's actions: Retry after a failed or stopped turn, Undo after file changes,
"thinking" before the first word."""

from __future__ import annotations

import dataclasses

import msgspec

from desktop.state.transcript import ToolItem, Transcript, items_from_messages
from desktop.state.turns import TurnActions, latest, offer, undo_words
from shared import protocol as p
from tests.unit.desktop.factories import Rows, call, event


def test_a_failed_or_stopped_turn_offers_its_prompt_again() -> None:
    for kind in ("failed", "interrupted"):
        r = Rows()
        r.user("first", "t1")
        r.assistant("done", "t1")
        r.user("explain the parser\nin detail", "t2")
        r.note(kind, "The provider failed", "t2")
        assert latest(items_from_messages(r.rows), "idle").retry_text == "explain the parser\nin detail"


def test_a_finished_turn_offers_no_retry_and_a_busy_one_offers_nothing() -> None:
    r = Rows()
    r.user("hi", "t1")
    r.assistant("hello", "t1")
    items = items_from_messages(r.rows)
    assert latest(items, "idle") == TurnActions(regenerate=True, prompt_key=items[0].key), (
        "an answer can be regenerated")
    r.note("failed", "boom", "t1")
    items = items_from_messages(r.rows)
    assert latest(items, "queued") == TurnActions(), "the next prompt is on its way"
    assert latest([], "idle") == TurnActions()


def test_file_changes_of_the_latest_turn_can_be_undone_once() -> None:
    r = Rows()
    r.user("fix it", "t1")
    r.assistant("", "t1", [call("c1", "write_file", path="a.py", content="x"),
                           call("c2", "write_file", path="b.py", content="y"),
                           call("c3", "read_file", path="c.py")])
    r.tool("c1", "wrote a.py", "t1", name="write_file", meta={"diff": "--- a/a.py\n+++ b/a.py\n+x"})
    r.tool("c2", "no", "t1", name="write_file", status="error", meta={"diff": ""})
    r.tool("c3", "1 x", "t1", name="read_file")
    r.assistant("Fixed.", "t1")
    items = items_from_messages(r.rows)
    answered = TurnActions(regenerate=True, prompt_key=items[0].key)
    assert latest(items, "idle") == TurnActions(undo_turn="t1", files_changed=1, regenerate=True,
                                                prompt_key=items[0].key)
    assert latest(items, "idle", undone=frozenset({"t1"})) == answered


def test_files_restored_marks_the_calls_and_ends_the_offer_in_every_window() -> None:
    """Undone anywhere (files.restored, live) or before the window opened (the rows' meta):
    the cards say undone and the turn offers no Undo."""
    r = Rows()
    r.user("fix it", "t1")
    r.assistant("", "t1", [call("c1", "write_file", path="a.py", content="x"),
                           call("c2", "read_file", path="c.py")])
    r.tool("c1", "wrote a.py", "t1", name="write_file", meta={"diff": "+x"})
    r.tool("c2", "1 x", "t1", name="read_file")
    r.assistant("Fixed.", "t1")
    transcript = Transcript()
    transcript.load(r.rows, False)
    assert latest(transcript.items, "idle").undo_turn == "t1"
    restored = p.FilesRestored(turn_id="t1", paths=["/w/a.py"], call_ids=["c1"])
    transcript.apply(event("files.restored", msgspec.to_builtins(restored), seq=9, turn_id="t1"))
    cards = {it.call_id: it.undone for it in transcript.items if isinstance(it, ToolItem)}
    assert cards == {"c1": True, "c2": False}
    answered = TurnActions(regenerate=True, prompt_key=transcript.items[0].key)
    assert latest(transcript.items, "idle") == answered

    r.rows[2] = msgspec.structs.replace(r.rows[2], meta={"diff": "+x", "undone": True})
    later = items_from_messages(r.rows)
    assert [it.undone for it in later if isinstance(it, ToolItem)] == [True, False]
    assert latest(later, "idle") == answered


def test_thinking_until_the_model_says_or_calls_something() -> None:
    r = Rows()
    r.user("go", "t1")
    assert latest(items_from_messages(r.rows), "running").thinking
    assert not latest(items_from_messages(r.rows), "waiting_approval").thinking
    r.assistant("", "t1", [call("c1", "terminal", command="ls")])
    assert not latest(items_from_messages(r.rows), "running").thinking


def test_a_turn_its_provider_failed_also_offers_another_provider() -> None:
    """The failed note's meta names a provider-error kind only when the provider failed the
    turn; a failure of another kind (the window, the store) offers Retry alone."""
    r = Rows()
    r.user("explain the parser", "t1")
    failed = r.note("failed", "The server rejected the API key.", "t1")
    r.rows[-1] = msgspec.structs.replace(failed, meta={"kind": "auth", "detail": "main: HTTP 401"})
    items = items_from_messages(r.rows)
    retried = TurnActions(retry_text="explain the parser", regenerate=True, prompt_key=items[0].key)
    assert latest(items, "idle") == dataclasses.replace(retried, provider_failed=True)
    r.rows[-1] = failed
    assert latest(items_from_messages(r.rows), "idle") == retried
    r.rows[-1] = msgspec.structs.replace(failed, note_kind="interrupted", meta={"kind": "auth"})
    assert not latest(items_from_messages(r.rows), "idle").provider_failed


def test_the_turn_bar_says_what_the_latest_turn_offers() -> None:
    assert offer(TurnActions(), True) is None, "nothing offered: the bar hides"
    assert offer(TurnActions(regenerate=True), True) is None, "Regenerate is not the bar's"
    failed = offer(TurnActions(retry_text="go", provider_failed=True), True)
    assert failed is not None
    assert (failed.text, failed.retry, failed.other, failed.undo) == (
        "The last turn did not finish.", True, True, False)
    alone = offer(TurnActions(retry_text="go", provider_failed=True), False)
    assert alone is not None
    assert not alone.other, "no other provider set up: no menu to offer"
    stopped = offer(TurnActions(retry_text="go"), True)
    assert stopped is not None
    assert not stopped.other, "a stop is not the provider's failure"
    one = offer(TurnActions(undo_turn="t1", files_changed=1), True)
    assert one is not None
    assert (one.text, one.retry, one.undo) == (
        "The last turn changed files (1 change).", False, True)
    both = offer(TurnActions(retry_text="go", undo_turn="t1", files_changed=3), True)
    assert both is not None
    assert both.text == (
        "The last turn did not finish. It changed files (3 changes).")


def test_undo_names_the_files_put_back() -> None:
    assert undo_words([]) == "Nothing to put back: no file had changed."
    assert undo_words(["/w/a.py"]) == "Put back 1 file: a.py."
    seven = [f"/w/f{i}.txt" for i in range(7)]
    assert undo_words(seven) == "Put back 7 files: f0.txt, f1.txt, f2.txt, f3.txt, f4.txt and 2 more."
