"""The model's questions as a window and the tray keep them: pending by id (each copy counts
once, a closed one never comes back), the session's status, the tool card's question and
answer, and the words and keys of the card, the notification and the tray."""

from __future__ import annotations

from desktop.state import questions as q
from desktop.state.session import SessionState
from desktop.state.sidebar import TONES
from desktop.state.transcript import ToolItem, items_from_messages
from desktop.state.turns import latest
from shared import protocol as p
from tests.unit.desktop.factories import (
    SID,
    Events,
    Rows,
    call,
    event,
    question,
    resume,
)

CHOICES = ["red", "green", "blue"]


def status(s: SessionState) -> str:
    """The status now (a call: the type checker keeps no earlier assert's narrowing)."""
    return s.status


def card(s: SessionState, call_id: str) -> ToolItem:
    found = next(it for it in s.transcript.items if isinstance(it, ToolItem) and it.call_id == call_id)
    assert isinstance(found, ToolItem)
    return found


def asked(data: p.Question) -> p.QuestionAsked:
    return p.QuestionAsked(question=data)


def resolved(data: p.Question) -> p.QuestionResolved:
    return p.QuestionResolved(question=data)


# --- Pending ---------------------------------------------------------------------------------


def test_both_copies_of_a_question_count_once_in_either_order() -> None:
    pending = q.Pending()
    assert pending.apply(asked(question("q1", "c1")))
    assert not pending.apply(asked(question("q1", "c1"))), "the second copy changes nothing"
    assert list(pending.waiting) == ["q1"]
    assert pending.apply(resolved(question("q1", "c1", status="answered", answer="red")))
    assert not pending.apply(resolved(question("q1", "c1", status="answered", answer="red")))
    assert pending.waiting == {}


def test_a_late_copy_of_the_request_never_brings_an_answered_question_back() -> None:
    pending = q.Pending()
    pending.apply(resolved(question("q1", "c1", status="expired")))  # the log copy, then the broadcast
    assert not pending.apply(asked(question("q1", "c1")))
    assert pending.waiting == {}
    pending.drop("q2")  # -32014 for one never seen asked: it stays away too
    assert not pending.apply(asked(question("q2", "c2")))


def test_a_snapshot_replaces_what_waits() -> None:
    pending = q.Pending()
    pending.apply(asked(question("q1", "c1")))
    pending.load([question("q2", "c2"), question("q3", "c3", status="answered")])
    assert list(pending.waiting) == ["q2"]


# --- the session ---------------------------------------------------------------------------------


def test_a_question_waits_then_its_answer_shows_on_the_tool_card() -> None:
    s = SessionState(SID)
    s.load(resume(latest_seq=0))
    ev = Events()
    s.apply(ev.started("t1", "a1"))
    s.apply(ev.tool_start("t1", "c1", name="clarify", question="Which colour?", choices=CHOICES))
    s.apply(ev.question_request("t1", question("q1", "c1", choices=CHOICES)))
    s.apply(event("clarify.request", {"question": question("q1", "c1", choices=CHOICES)}))
    assert list(s.questions.waiting) == ["q1"]
    assert s.status == "waiting_answer"
    assert card(s, "c1").status == "waiting_answer"
    assert s.busy
    assert latest(s.transcript.items, s.status).retry_text is None  # (a turn under way)

    s.apply(ev.question_resolved("t1", question("q1", "c1", status="answered", choices=CHOICES,
                                               answer="blue", choice=2, answered_by="user")))
    assert s.questions.waiting == {}
    assert status(s) == "running"
    assert card(s, "c1").outcome == "Answered: blue"
    assert card(s, "c1").status == "running"


def test_an_approval_and_a_question_at_once_wait_until_both_are_answered() -> None:
    s = SessionState(SID)
    s.load(resume(latest_seq=0))
    ev = Events()
    s.apply(ev.started("t1", "a1"))
    s.apply(ev.approval_request("t1", "ap1", "c1"))
    s.apply(ev.question_request("t1", question("q1", "c2")))
    assert s.status == "waiting_approval"
    s.apply(ev.approval_resolved("t1", "ap1", "c1"))
    assert status(s) == "waiting_answer", "the question still waits"
    s.apply(ev.question_resolved("t1", question("q1", "c2", status="answered", answer="yes")))
    assert status(s) == "running"


def test_a_pending_question_in_the_snapshot_waits_on_its_card() -> None:
    s = SessionState(SID)
    rows = Rows()
    rows.user("paint it", "t1")
    rows.assistant("", "t1", [call("c1", "clarify", question="Which colour?")])
    s.load(resume(rows.rows, latest_seq=5, status="waiting_answer",
                  active_turn=p.ActiveTurn(turn_id="t1", admission_id="a1", text=""),
                  pending_questions=[question("q1", "c1")]))
    assert list(s.questions.waiting) == ["q1"]
    assert card(s, "c1").status == "waiting_answer"
    s.apply(Events(seq=5).question_resolved("t1", question("q1", "c1", status="expired")))
    assert s.questions.waiting == {}
    assert card(s, "c1").outcome == "Nobody answered in time."


def test_a_stored_clarify_result_says_the_answer() -> None:
    rows = Rows()
    rows.user("paint it", "t1")
    rows.assistant("", "t1", [call(f"c{i}", "clarify", question="Which colour?", choices=CHOICES)
                              for i in (1, 2, 3)])
    rows.tool("c1", "The person answered with choice 2: green", "t1", name="clarify",
              meta={"question_id": "q1", "question_status": "answered", "choice": 1})
    rows.tool("c2", "The person answered: teal, please", "t1", name="clarify",
              meta={"question_id": "q2", "question_status": "answered"})
    rows.tool("c3", "Nobody answered within 600 s: go on", "t1", name="clarify",
              meta={"question_id": "q3", "question_status": "expired"})
    outcomes = [it.outcome for it in items_from_messages(rows.rows) if isinstance(it, ToolItem)]
    assert outcomes == ["Answered: green", "Answered: teal, please", "Nobody answered in time."]


def test_a_live_clarify_result_says_the_chosen_choice() -> None:
    s = SessionState(SID)
    s.load(resume(latest_seq=0))
    ev = Events()
    s.apply(ev.started("t1", "a1"))
    s.apply(ev.tool_start("t1", "c1", name="clarify", question="Which colour?", choices=CHOICES))
    s.apply(ev.tool_complete("t1", "c1", name="clarify", output="The person answered with "
                             "choice 1: red", meta={"question_status": "answered", "choice": 0}))
    assert card(s, "c1").outcome == "Answered: red"


def test_waiting_answer_is_a_warning_everywhere_waiting_approval_is() -> None:
    from desktop.state.composer import RUNNING
    from desktop.state.conversation import status_tone
    from desktop.state.sessions import status_label

    assert "waiting_answer" in RUNNING
    assert status_tone("waiting_answer") == "warning"
    assert TONES["waiting_answer"] == "warning"
    assert status_label("waiting_answer") == "Needs your answer"


# --- the card's keys and words ------------------------------------------------------------------


def test_keys_pick_choices_and_words_are_taken_only_when_allowed() -> None:
    only = question("q1", "c1", choices=CHOICES, allow_other=False)
    assert q.choice_of_key(only, 1) == 0
    assert q.choice_of_key(only, 3) == 2
    assert q.choice_of_key(only, 4) is None
    assert not q.takes_words(only)
    assert q.typed_answer(only, "purple") is None
    free = question("q2", "c2")
    assert q.takes_words(free)
    assert q.typed_answer(free, "  purple \n") == "purple"
    assert q.typed_answer(free, "   ") is None
    assert q.typed_answer(free, "x" * 5000) == "x" * p.MAX_ANSWER


def test_a_notification_offers_the_first_choices_then_open() -> None:
    many = question("q1", "c1", choices=["a", "b", "c", "d"])
    assert q.notification_actions(many) == [("choice:0", "a"), ("choice:1", "b"),
                                            ("choice:2", "c"), ("open", "Open")]
    assert q.action_choice("choice:2") == 2
    assert q.action_choice("open") is None
    assert q.action_choice("choice:x") is None
    title, text = q.notification_words(many, "Painting", " on box")
    assert title == "Turnkey has a question for you on box"
    assert text == "Which colour?\n— Painting"
    assert q.menu_words(question("q3", "c3", text="a\nlong " + "word " * 30)).endswith("…")
