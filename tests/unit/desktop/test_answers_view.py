"""A prompt's answers in the transcript (desktop/state/answers.py): one shown, the others hidden,
a bar to page through them; a regeneration adds no prompt; every window follows
`answer.chosen` and `session.forked`."""

from __future__ import annotations

import msgspec

from desktop.state.answers import AnswerBar, visible
from desktop.state.session import SessionState
from desktop.state.transcript import AssistantItem, Transcript, UserItem
from desktop.state.turns import latest
from shared import protocol as p
from tests.unit.desktop.factories import Events, ShadowListener, assistant, resume, session, user


def texts(t: Transcript) -> list[str]:
    return [it.text for it in visible(t.items) if isinstance(it, UserItem | AssistantItem)]


def bars(t: Transcript) -> list[tuple[str, str, bool]]:
    return [(it.prompt_key, it.words, it.last) for it in t.items if isinstance(it, AnswerBar)]


def two_answers() -> list[p.Message]:
    return [user("m1", "tell a joke", "t1"), assistant("m2", "First.", "t1", active=False),
            assistant("m3", "Second.", "t2"), user("m4", "another", "t3"),
            assistant("m5", "Sure.", "t3")]


def test_the_shown_answer_stands_in_the_prompts_place_and_a_bar_pages_the_others() -> None:
    t, shadow = ShadowListener.attach()
    t.load(two_answers(), has_more=False)
    shadow.check()
    assert texts(t) == ["tell a joke", "Second.", "another", "Sure."]
    assert bars(t) == [("m1", "2 / 2", False)]
    assert [type(it).__name__ for it in t.items][:4] == ["UserItem", "AssistantItem",
                                                          "AssistantItem", "AnswerBar"]
    bar = t.bar_of(1)
    assert bar is not None
    assert bar.turns == ["t1", "t2"]
    assert t.bar_of(4) is None, "one answer: no bar"

    ev = Events(seq=10)
    t.apply(ev.other("answer.chosen", {"message_id": "m1", "turn_id": "t1"}))
    shadow.check()
    assert texts(t) == ["tell a joke", "First.", "another", "Sure."]
    assert bars(t) == [("m1", "1 / 2", False)]


def test_a_regeneration_streams_in_place_without_a_second_prompt() -> None:
    s = SessionState("sess-1")
    s.load(resume([user("m1", "tell a joke", "t1"), assistant("m2", "First.", "t1")]))
    assert latest(s.transcript.items, s.status).regenerate
    ev = Events(seq=0)
    s.apply(ev.queued("a2", "tell a joke"))
    started = msgspec.to_builtins(p.TurnStarted(turn_id="t2", admission_id="a2", model="m",
                                                regenerates="m1"))
    s.apply(ev.other("turn.started", started, "t2"))
    s.apply(ev.other("answer.chosen", {"message_id": "m1", "turn_id": "t2"}, "t2"))
    s.apply(ev.delta("t2", "Second"))
    assert texts(s.transcript) == ["tell a joke", "Second"], "the old answer is hidden"
    assert bars(s.transcript) == [], "no bar while the answer is still coming"
    s.apply(ev.complete("t2", "a2", "Second."))
    s.transcript.reconcile_turn("t2", [user("m1", "tell a joke", "t1"),
                                       assistant("m2", "First.", "t1", active=False),
                                       assistant("m3", "Second.", "t2")])
    assert texts(s.transcript) == ["tell a joke", "Second."]
    assert bars(s.transcript) == [("m1", "2 / 2", True)]
    assert [it.text for it in s.transcript.items if isinstance(it, UserItem)] == ["tell a joke"]

    # Once more: the bar goes while the third answer streams (it would sit above it), and
    # comes back under it at its end, before the stored rows are even read.
    s.apply(ev.queued("a3", "tell a joke"))
    again = msgspec.to_builtins(p.TurnStarted(turn_id="t3", admission_id="a3", model="m",
                                              regenerates="m1"))
    s.apply(ev.other("turn.started", again, "t3"))
    assert bars(s.transcript) == []
    s.apply(ev.other("answer.chosen", {"message_id": "m1", "turn_id": "t3"}, "t3"))
    s.apply(ev.delta("t3", "Third"))
    assert bars(s.transcript) == []
    assert texts(s.transcript) == ["tell a joke", "Third"]
    s.apply(ev.complete("t3", "a3", "Third."))
    assert bars(s.transcript) == [("m1", "3 / 3", True)]
    assert isinstance(s.transcript.items[-1], AnswerBar), "under the answer shown"


def test_a_page_that_starts_inside_a_turn_is_not_taken_for_a_second_answer() -> None:
    t = Transcript()
    t.load([assistant("m9", "tail of t2", "t2"), user("m10", "next", "t3"),
            assistant("m11", "ok", "t3")], has_more=True)
    t.prepend([user("m1", "hi", "t1"), assistant("m2", "hello", "t1")], has_more=False)
    assert bars(t) == []


def test_a_branch_is_named_on_the_prompt_it_was_made_at() -> None:
    t = Transcript()
    t.load([user("m1", "plan", "t1", branches=["ses_b1"]), assistant("m2", "ok", "t1"),
            user("m3", "more", "t2"), assistant("m4", "ok", "t2")], has_more=False)
    first = t.items[0]
    assert isinstance(first, UserItem)
    assert first.branches == ["ses_b1"]
    forked = msgspec.to_builtins(p.SessionForked(message_id="m3", branch=session("ses_b2")))
    t.apply(Events(seq=3).other("session.forked", forked))
    third = t.items[2]
    assert isinstance(third, UserItem)
    assert third.branches == ["ses_b2"]


def test_rows_read_before_a_choice_do_not_undo_it() -> None:
    """The window reads a finished turn's rows, and meanwhile another window shows the other
    answer: the rows (read before) must not bring the answer back that the event hid."""
    s = SessionState("sess-1")
    s.load(resume([user("m1", "q", "t1"), assistant("m2", "First.", "t1")]))
    ev = Events(seq=0)
    started = msgspec.to_builtins(p.TurnStarted(turn_id="t2", admission_id="a2", model="m",
                                                regenerates="m1"))
    s.apply(ev.other("turn.started", started, "t2"))
    s.apply(ev.other("answer.chosen", {"message_id": "m1", "turn_id": "t2"}, "t2"))
    s.apply(ev.delta("t2", "Second."))
    s.apply(ev.complete("t2", "a2", "Second."))
    stale = [user("m1", "q", "t1"), assistant("m2", "First.", "t1", active=False),
             assistant("m3", "Second.", "t2")]
    s.apply(ev.other("answer.chosen", {"message_id": "m1", "turn_id": "t1"}))
    s.transcript.reconcile_turn("t2", stale)
    assert texts(s.transcript) == ["q", "First."]
    assert bars(s.transcript) == [("m1", "1 / 2", True)]
