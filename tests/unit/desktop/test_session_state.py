"""SessionState: a snapshot plus the session's events, each counted once; queue, approvals, notices."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import msgspec
import pytest

from desktop.state.session import Notice, SessionState
from desktop.state.transcript import AssistantItem, ToolItem, UserItem
from shared import protocol as p
from tests.unit.desktop.factories import (
    SID,
    Events,
    Rows,
    ShadowListener,
    approval,
    call,
    event,
    receipt,
    resume,
    session,
    usage,
)


class Calls:
    """on_change / on_turn_done recorders."""

    def __init__(self) -> None:
        self.changes = 0
        self.done: list[str] = []

    def change(self) -> None:
        self.changes += 1

    def turn_done(self, turn_id: str) -> None:
        self.done.append(turn_id)


def state(**kw: Any) -> tuple[SessionState, Calls, ShadowListener]:
    calls = Calls()
    s = SessionState(SID, on_change=calls.change, on_turn_done=calls.turn_done, **kw)
    _, rec = ShadowListener.attach(s.transcript)
    return s, calls, rec


def status(s: SessionState) -> str:
    """The status now (a call, so the type checker does not keep an earlier assert's narrowing)."""
    return s.status


def active(turn_id: str, admission_id: str, text: str = "") -> p.ActiveTurn:
    return p.ActiveTurn(turn_id=turn_id, admission_id=admission_id, text=text)


def texts(s: SessionState) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for it in s.transcript.items:
        if isinstance(it, UserItem | AssistantItem):
            out.append((type(it).__name__, it.text))
        elif isinstance(it, ToolItem):
            out.append(("ToolItem", f"{it.call_id}:{it.status}"))
    return out


# --- the snapshot ---------------------------------------------------------------------------------


def test_load_takes_the_snapshot_as_the_truth() -> None:
    s, calls, rec = state()
    rows = Rows()
    rows.user("hi", "t1")
    rows.assistant("hello", "t1")
    info = msgspec.structs.replace(session(status="waiting_approval", title="Fix the build"),
                                   usage=usage(1200, 300, 100, 0.25))
    s.load(resume(rows.rows, latest_seq=17, status="waiting_approval", session_info=info, has_more=True,
                  queue=[receipt("a9", "queued", text="and then this")],
                  pending_approvals=[approval("ap1", "c1", "t2")]))
    assert s.loaded
    assert s.mark == 17
    assert s.status == "waiting_approval"
    assert s.busy
    assert s.title == "Fix the build"
    assert s.session == info
    assert s.usage == usage(1200, 300, 100, 0.25)
    assert list(s.queue) == ["a9"]
    assert s.prompts == {"a9": "and then this"}
    assert list(s.approvals) == ["ap1"]
    assert texts(s) == [("UserItem", "hi"), ("AssistantItem", "hello")]
    assert s.transcript.has_more
    assert calls.changes == 1
    rec.check()


def test_load_takes_the_status_of_the_snapshot_and_names_an_untitled_session() -> None:
    s, _, _ = state()
    assert s.title == "", "nothing said before the first page (a saved session opening)"
    s.load(resume(status="queued", session_info=session(status="idle", title="")))
    assert s.status == "queued", "the snapshot's status, not the summary's"
    assert s.title == "New session"


def test_load_clears_a_notice() -> None:
    s, _, _ = state()
    s.notice = Notice("fallback", "old")
    s.load(resume())
    assert s.notice is None


# --- each event once --------------------------------------------------------------------------------


def test_events_before_the_snapshot_wait_and_those_it_already_covers_are_dropped() -> None:
    s, calls, rec = state()
    ev = Events(seq=3)
    early = [ev.delta("t1", "a"), ev.delta("t1", "b"), ev.delta("t1", "c"), ev.delta("t1", "d")]  # 4..7
    for e in early:
        s.apply(e)
    assert s.transcript.items == [], "nothing applied before load"
    assert not s.loaded
    assert calls.changes == 0

    # the snapshot was taken at seq 5: "ab" is already in active_turn.text
    s.load(resume([], latest_seq=5, status="running",
                  active_turn=active("t1", "a1", "ab")))
    assert texts(s) == [("AssistantItem", "abcd")], "seq 6 and 7 applied once, 4 and 5 not again"
    assert s.mark == 7
    for e in early:  # the live copies of what the buffer held, arriving late
        s.apply(e)
    assert texts(s) == [("AssistantItem", "abcd")]
    s.apply(ev.delta("t1", "e"))
    assert texts(s) == [("AssistantItem", "abcde")]
    assert s.mark == 8
    rec.check()


def test_a_duplicate_in_the_buffer_counts_once() -> None:
    s, _, _ = state()
    ev = Events(seq=10)
    d = ev.delta("t1", "x")
    s.apply(d)
    s.apply(dataclasses.replace(d))  # an equal copy, not the same object
    s.load(resume(latest_seq=9, status="running"))
    assert texts(s) == [("AssistantItem", "x")]


def test_after_load_only_newer_seqs_are_applied() -> None:
    s, calls, _ = state()
    s.load(resume(latest_seq=20))
    changes = calls.changes
    s.apply(event("message.delta", {"text": "old"}, seq=20, turn_id="t1"))
    s.apply(event("message.delta", {"text": "older"}, seq=3, turn_id="t1"))
    assert s.transcript.items == []
    assert s.mark == 20
    assert calls.changes == changes
    s.apply(event("message.delta", {"text": "new"}, seq=21, turn_id="t1"))
    s.apply(event("message.delta", {"text": "again"}, seq=21, turn_id="t1"))
    assert texts(s) == [("AssistantItem", "new")]
    assert s.mark == 21
    assert calls.changes == changes + 1


def test_events_of_other_sessions_are_ignored_before_and_after_load() -> None:
    s, _, _ = state()
    other = Events(session_id="sess-2")
    s.apply(other.delta("t9", "not mine"))
    s.load(resume(latest_seq=0))
    s.apply(other.delta("t9", "still not mine"))
    s.apply(event("session.updated", {"session": session("sess-2", title="Other")}, session_id="sess-2"))
    assert s.transcript.items == []
    assert s.mark == 0
    assert s.title == "A session"


def test_reset_buffers_again_until_the_next_snapshot() -> None:
    s, _, rec = state()
    ev = Events()
    s.load(resume(latest_seq=0))
    s.apply(ev.delta("t1", "one"))  # seq 1
    s.reset()
    assert not s.loaded
    assert s.mark is None
    s.apply(ev.delta("t1", " two"))  # seq 2: buffered
    s.apply(ev.delta("t1", " three"))  # seq 3: buffered
    assert texts(s) == [("AssistantItem", "one")]
    s.load(resume([], latest_seq=2, status="running",
                  active_turn=active("t1", "a1", "one two")))
    assert texts(s) == [("AssistantItem", "one two three")]
    assert s.mark == 3
    rec.check()


# --- the queue, turns and status -----------------------------------------------------------------------


def test_a_prompt_queued_then_run_then_settled() -> None:
    s, calls, rec = state()
    s.load(resume(latest_seq=0))
    ev = Events()
    s.apply(ev.queued("a1", "What is in here?"))
    assert s.status == "queued"
    assert s.busy
    assert list(s.queue) == ["a1"]
    assert s.prompts["a1"] == "What is in here?"

    s.apply(ev.started("t1", "a1"))
    assert status(s) == "running"
    assert s.queue == {}
    assert texts(s) == [("UserItem", "What is in here?")]
    assert s.transcript.items[0].key == "prompt:a1"
    assert s.transcript.items[0].turn_id == "t1"

    s.apply(ev.delta("t1", "Two files"))
    s.apply(ev.complete("t1", "a1", "Two files.", turn_usage=usage(50, 7, 0, 0.002)))
    assert status(s) == "idle"
    assert not s.busy
    assert calls.done == ["t1"]
    assert s.turn_usage == usage(50, 7, 0, 0.002)
    assert texts(s) == [("UserItem", "What is in here?"), ("AssistantItem", "Two files.")]

    s.apply(ev.settled("a1"))
    assert status(s) == "idle"
    assert "a1" not in s.prompts
    rec.check()


def test_a_prompt_admitted_straight_away_is_not_queued_but_its_text_is_kept() -> None:
    s, _, _ = state()
    s.load(resume(latest_seq=0))
    ev = Events()
    s.apply(ev.queued("a1", "go", status="started"))
    assert s.queue == {}
    assert s.status == "idle"
    s.apply(ev.started("t1", "a1"))
    assert texts(s) == [("UserItem", "go")]


def test_turn_started_for_a_prompt_queued_before_the_snapshot_shows_its_text() -> None:
    s, _, _ = state()
    s.load(resume(latest_seq=0, queue=[receipt("a1", text="queued earlier")], status="queued"))
    s.apply(Events().started("t1", "a1"))
    assert s.queue == {}
    assert s.status == "running"
    assert texts(s) == [("UserItem", "queued earlier")]
    assert s.transcript.items[0].turn_id == "t1"


def test_a_second_prompt_waits_behind_the_running_turn() -> None:
    s, calls, _ = state()
    s.load(resume(latest_seq=0))
    ev = Events()
    s.apply(ev.queued("a1", "first"))
    s.apply(ev.started("t1", "a1"))
    s.apply(ev.queued("a2", "second"))
    assert s.status == "running", "a queued prompt does not hide the running turn"
    assert list(s.queue) == ["a2"]
    s.apply(ev.complete("t1", "a1", "one"))
    assert status(s) == "queued", "the next prompt is waiting"
    s.apply(ev.settled("a1"))
    assert status(s) == "queued"
    assert list(s.queue) == ["a2"]
    s.apply(ev.started("t2", "a2"))
    assert status(s) == "running"
    assert s.queue == {}
    s.apply(ev.complete("t2", "a2", "two"))
    s.apply(ev.settled("a2"))
    assert status(s) == "idle"
    assert calls.done == ["t1", "t2"]
    assert [t for t in texts(s) if t[0] == "UserItem"] == [("UserItem", "first"), ("UserItem", "second")]


def test_cancelling_the_only_queued_prompt_makes_the_session_idle() -> None:
    s, _, _ = state()
    s.load(resume(latest_seq=0, status="queued", queue=[receipt("a1", text="later")]))
    s.apply(Events().settled("a1", "cancelled"))
    assert s.queue == {}
    assert s.status == "idle"
    assert s.prompts == {}


def test_cancelling_a_queued_prompt_while_the_turn_runs_keeps_it_running() -> None:
    s, _, _ = state()
    s.load(resume(latest_seq=0, status="running", queue=[receipt("a2", text="later")],
                  active_turn=active("t1", "a1")))
    s.apply(Events().settled("a2", "cancelled"))
    assert s.queue == {}
    assert s.status == "running"


def test_cancelling_a_queued_prompt_while_a_person_is_asked_keeps_waiting_for_approval() -> None:
    s, _, _ = state()
    s.load(resume(latest_seq=0, status="waiting_approval", queue=[receipt("a2", text="later")],
                  pending_approvals=[approval("ap1", "c1", "t1")],
                  active_turn=active("t1", "a1")))
    s.apply(Events().settled("a2", "cancelled"))
    assert s.queue == {}
    assert s.status == "waiting_approval", "the turn still waits for the person"
    assert s.busy


def test_settling_an_unknown_admission_makes_the_session_idle() -> None:
    s, _, _ = state()
    s.load(resume(latest_seq=0, status="unknown"))
    s.apply(Events().settled("a1", "interrupted"))
    assert s.status == "idle"


# --- approvals ----------------------------------------------------------------------------------------


def test_approvals_pending_set_and_status() -> None:
    s, _, rec = state()
    s.load(resume(latest_seq=0))
    ev = Events()
    s.apply(ev.started("t1", "a1"))
    s.apply(ev.tool_start("t1", "c1", command="rm -rf build"))
    s.apply(ev.tool_start("t1", "c2", command="sudo true"))
    s.apply(ev.approval_request("t1", "ap1", "c1"))
    s.apply(ev.approval_request("t1", "ap2", "c2"))
    assert set(s.approvals) == {"ap1", "ap2"}
    assert s.status == "waiting_approval"
    assert [c.status for c in s.transcript.items if isinstance(c, ToolItem)] == ["waiting_approval"] * 2

    s.apply(ev.approval_resolved("t1", "ap1", "c1"))
    assert set(s.approvals) == {"ap2"}
    assert status(s) == "waiting_approval", "one is still pending"
    s.apply(ev.approval_resolved("t1", "ap2", "c2", "denied"))
    assert s.approvals == {}
    assert status(s) == "running"
    assert [c.status for c in s.transcript.items if isinstance(c, ToolItem)] == ["running", "running"]
    s.apply(ev.tool_complete("t1", "c2", "denied"))
    assert texts(s)[-1] == ("ToolItem", "c2:denied")
    rec.check()


def test_a_pending_approval_from_the_snapshot_is_resolved_by_an_event() -> None:
    s, _, _ = state()
    rows = Rows()
    rows.user("clean up", "t1")
    rows.assistant("", "t1", [call("c1", command="rm -rf build")])
    s.load(resume(rows.rows, latest_seq=9, status="waiting_approval",
                  pending_approvals=[approval("ap1", "c1", "t1")],
                  active_turn=active("t1", "a1")))
    s.apply(Events(seq=9).approval_resolved("t1", "ap1", "c1"))
    assert s.approvals == {}
    assert s.status == "running"


def test_unsequenced_approval_copies_are_ignored() -> None:
    s, calls, _ = state()
    s.load(resume(latest_seq=4, status="running"))
    changes = calls.changes
    s.apply(event("approval.request", {"approval": approval("ap1", "c1")}))
    s.apply(event("approval.resolved", {"approval": approval("ap1", "c1", status="allowed")}))
    assert s.approvals == {}
    assert s.status == "running"
    assert s.mark == 4
    assert calls.changes == changes

    s.reset()  # not buffered either
    s.apply(event("approval.request", {"approval": approval("ap2", "c2")}))
    s.load(resume(latest_seq=4, status="running"))
    assert s.approvals == {}


# --- notices, usage, summaries -------------------------------------------------------------------------


def test_provider_retry_shows_a_countdown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(time, "monotonic", lambda: 1000.0)
    s, _, _ = state()
    s.load(resume(latest_seq=0, status="running"))
    s.apply(Events().other("provider.retry", {"attempt": 2, "delay_s": 8.0, "reason": "rate limited (429)"},
                           "t1"))
    n = s.notice
    assert n is not None
    assert n.kind == "retry"
    assert n.until == 1008.0
    assert n.render(1000.0) == "Retrying in 8 s (attempt 2): rate limited (429)"
    assert n.render(1005.2) == "Retrying in 3 s (attempt 2): rate limited (429)"
    assert n.render(1020.0) == "Retrying in 0 s (attempt 2): rate limited (429)", "never negative"
    monkeypatch.setattr(time, "monotonic", lambda: 1006.0)
    assert n.render() == "Retrying in 2 s (attempt 2): rate limited (429)", "now defaults to the clock"


def test_a_notice_without_a_deadline_renders_its_text() -> None:
    assert Notice("fallback", "plain {left}").render(5.0) == "plain {left}"


@pytest.mark.parametrize(("type_", "data", "kind", "text"), [
    ("provider.fallback", {"from": "main", "to": "backup", "reason": "timeout"}, "fallback",
     "Switched from main to backup: timeout"),
    ("compression.start", {"reason": "threshold", "tokens": 90000}, "compression",
     "Compressing the context (90000 tokens)…"),
    ("compression.complete", {"before_tokens": 90000, "after_tokens": 12000}, "compression",
     "Context compressed: 90000 → 12000 tokens"),
    ("lease.waiting", {"turn_id": "t1", "holder_pid": 42, "expires_at": 1.0}, "lease",
     "Waiting: another Turnkey process is running this session"),
])
def test_notices(type_: str, data: dict[str, Any], kind: str, text: str) -> None:
    s, _, _ = state()
    s.load(resume(latest_seq=0, status="running"))
    s.apply(Events().other(type_, data, "t1"))
    assert s.notice is not None
    assert (s.notice.kind, s.notice.render()) == (kind, text)


@pytest.mark.parametrize(("type_", "data", "kept"), [
    ("provider.retry", {"attempt": 2, "delay_s": 1, "reason": "x"}, False),
    ("lease.waiting", {"turn_id": "t1", "holder_pid": 1, "expires_at": 1.0}, False),
    ("provider.fallback", {"from": "a", "to": "b", "reason": "x"}, True),
    ("compression.complete", {"before_tokens": 2, "after_tokens": 1}, True),
])
def test_the_end_of_a_turn_clears_only_waiting_notices(type_: str, data: dict[str, Any], kept: bool) -> None:
    s, _, _ = state()
    s.load(resume(latest_seq=0))
    ev = Events()
    s.apply(ev.started("t1", "a1"))
    s.apply(ev.other(type_, data, "t1"))
    s.apply(ev.complete("t1", "a1", "ok"))
    assert (s.notice is not None) is kept


def test_a_failed_turn_is_said_once_by_its_note_not_again_in_a_notice() -> None:
    s, calls, _ = state()
    s.load(resume(latest_seq=0))
    ev = Events()
    s.apply(ev.started("t1", "a1"))
    s.apply(ev.other("provider.retry", {"attempt": 3, "delay_s": 2, "reason": "503"}, "t1"))
    s.apply(ev.complete("t1", "a1", "", "failed", "the provider is down"))
    assert s.notice is None, "the retry countdown is gone and the failure is not repeated"
    assert s.status == "idle"
    assert calls.done == ["t1"]


def test_usage_update_and_the_usage_line() -> None:
    s, _, _ = state()
    s.load(resume(latest_seq=0, status="running"))
    assert s.usage_line() == "0 in · 0 out · 0 cached · $0.0000"
    s.apply(Events().other("usage.update", {"usage": usage(12345, 678, 9000, 0.01234)}))
    assert s.usage == usage(12345, 678, 9000, 0.01234)
    assert s.usage_line() == "12,345 in · 678 out · 9,000 cached · $0.0123"
    s.apply(Events(seq=1).other("usage.update", {"usage": usage(1, 2, 0, 0.0, estimated=True)}))
    assert s.usage_line() == "~1 in · 2 out · 0 cached · $0.0000"


def test_the_usage_line_counts_an_answer_in_while_it_streams() -> None:
    """A first answer: the line moves with the text (an estimate, `~`), then the provider's
    count replaces the estimate; a tool round's text is not counted twice."""
    s, _, _ = state()
    s.load(resume(latest_seq=0))
    ev = Events()
    s.apply(ev.queued("a1", text="hello"))
    s.apply(ev.started("t1", "a1"))
    assert s.usage_line() == "0 in · 0 out · 0 cached · $0.0000"
    s.apply(ev.delta("t1", "x" * 40))
    assert s.usage_line() == "~0 in · 10 out · 0 cached · $0.0000"
    s.apply(ev.delta("t1", "x" * 40))
    assert s.usage_line() == "~0 in · 20 out · 0 cached · $0.0000"
    # The model call ends: its count arrives before the turn ends, the stream still open.
    s.apply(ev.other("usage.update", {"usage": usage(100, 18)}))
    assert s.usage_line() == "100 in · 18 out · 0 cached · $0.0000"
    s.apply(ev.tool_start("t1", "c1"))
    s.apply(ev.tool_complete("t1", "c1"))
    s.apply(ev.delta("t1", "y" * 8))  # the next call's answer: a new stream, counted anew
    assert s.usage_line() == "~100 in · 20 out · 0 cached · $0.0000"
    s.apply(ev.other("usage.update", {"usage": usage(230, 21)}))
    s.apply(ev.complete("t1", "a1", "y" * 8))
    assert s.usage_line() == "230 in · 21 out · 0 cached · $0.0000"


def test_no_usage_no_line() -> None:
    s = SessionState(SID)
    assert s.usage_line() == ""


def test_unsequenced_session_updated_updates_the_summary_even_before_load() -> None:
    s, calls, _ = state()
    s.apply(event("session.updated", {"session": session(title="Renamed", status="running")}))
    assert s.title == "Renamed"
    assert s.status == "running"
    assert calls.changes == 1
    assert not s.loaded
    assert s.mark is None, "not buffered, not a seq"

    s.load(resume(latest_seq=3, session_info=session(title="Renamed")))
    new = msgspec.structs.replace(session(title="Renamed again", status="queued"),
                                  usage=usage(5, 5, 0, 0.5))
    s.apply(event("session.updated", {"session": new}))
    assert s.title == "Renamed again"
    assert status(s) == "queued"
    assert s.usage == usage(5, 5, 0, 0.5)
    assert s.mark == 3


def test_a_summary_replaces_the_session_its_status_and_its_usage_whole() -> None:
    s, _, _ = state()
    s.load(resume(latest_seq=0, status="running", session_info=session(title="Old", status="running")))
    s.apply(Events().other("usage.update", {"usage": usage(1, 1, 0, 0.1)}))
    new = msgspec.structs.replace(session(title="New title", status="idle", cwd="/elsewhere"),
                                  usage=usage(2, 2, 0, 0.2))
    s.apply(event("session.updated", {"session": new}))
    assert s.session == new
    assert s.title == "New title"
    assert status(s) == "idle"
    assert s.usage == usage(2, 2, 0, 0.2)


def test_sequenced_session_updated_counts_as_an_event() -> None:
    s, _, _ = state()
    s.load(resume(latest_seq=0))
    s.apply(Events().other("session.updated", {"session": session(title="Titled")}))
    assert s.title == "Titled"
    assert s.mark == 1


def test_message_complete_reports_the_turn_even_when_nothing_streamed() -> None:
    s, calls, _ = state()
    s.load(resume(latest_seq=0))
    ev = Events()
    s.apply(ev.started("t7", "a7"))
    s.apply(ev.complete("t7", "a7", "Short answer."))
    assert calls.done == ["t7"]
    assert texts(s)[-1] == ("AssistantItem", "Short answer.")


def test_every_applied_event_calls_on_change() -> None:
    s, calls, _ = state()
    s.load(resume(latest_seq=0))
    before = calls.changes
    ev = Events()
    # reasoning.delta is no event of the protocol: it arrives as an UnknownEvent, like future ones
    for e in (ev.delta("t1", "a"), ev.other("reasoning.delta", {"text": "b"}, "t1"),
              ev.other("future.event", {"x": 1})):
        s.apply(e)
    assert calls.changes == before + 3
    assert s.mark == 3, "unknown types still move the mark"
    assert texts(s) == [("AssistantItem", "a")], "and show nothing"


def test_bind_routes_transcript_notices_to_a_new_listener() -> None:
    s = SessionState(SID)
    rec = ShadowListener()
    rec.transcript = s.transcript
    s.bind(rec)
    s.load(resume([Rows().user("hi")], latest_seq=0))
    assert rec.ops == [("insert", 0, 1)]
    rec.check()


def test_a_receipt_that_arrives_after_its_turn_started_does_not_queue_the_running_prompt() -> None:
    """The submit reply resumes its coroutine after the turn's first events were applied: the
    window must not list the prompt that is running as queued behind itself."""
    s, _calls, _rec = state()
    s.load(resume(latest_seq=0))
    ev = Events()
    s.apply(ev.started("t0", "a0"))  # another prompt runs: the window is busy
    s.apply(ev.queued("a1", "Clean the build folders"))
    s.apply(ev.complete("t0", "a0", "done"))
    s.apply(ev.started("t1", "a1"))  # a1's turn started before its receipt reached us
    s.submitted(receipt("a1", "queued"), "Clean the build folders")
    assert s.queue == {}
    assert status(s) == "running"


def test_a_receipt_for_a_prompt_still_waiting_queues_it() -> None:
    s, _calls, _rec = state()
    s.load(resume(latest_seq=0))
    ev = Events()
    s.apply(ev.started("t0", "a0"))
    s.submitted(receipt("a1", "queued"), "next, please")
    assert list(s.queue) == ["a1"]
    assert s.prompts["a1"] == "next, please"
    s.apply(ev.queued("a1", "next, please"))
    s.apply(ev.started("t1", "a1"))
    assert s.queue == {}


def test_a_call_waiting_for_its_approval_opens_as_waiting_not_running() -> None:
    """Opened (or popped out) while an approval is pending: the call's card says it waits for
    you, like the window that saw the request live; the call beside it runs."""
    from tests.unit.desktop.factories import assistant, user

    s = SessionState(SID)
    rows = [user("m1", "clean up", "t1"),
            assistant("m2", "", "t1", tool_calls=[call("c1", command="rm -rf build"),
                                                  call("c2", command="ls")])]
    s.load(resume(rows, status="waiting_approval",
                  pending_approvals=[approval("a1", "c1", "t1")],
                  active_turn=active("t1", "adm1")))
    cards = {it.call_id: it.status for it in s.transcript.items if isinstance(it, ToolItem)}
    assert cards == {"c1": "waiting_approval", "c2": "running"}
