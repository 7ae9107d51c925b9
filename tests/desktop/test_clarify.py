"""The model's questions in the app against a real backend (only the model is scripted): the
card on the conversation's shelf answered by a click on a choice, by a key, by words; the
model's next request carries the answer; a question answered elsewhere takes its card away;
the tray's menu and notification; the tool card keeps the question and the answer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QSystemTrayIcon

from desktop.qt.question_card import QuestionCard
from desktop.state.transcript import ToolItem
from shared.methods import ClarifyRespond, PromptSubmit, SessionCreate
from tests.fakes.openai_server import FakeOpenAI, Reply

from .conftest import drive
from .test_keyboard import active, focused, press

CHOICES = ["red", "blue", "green"]


def clarify(question: str, choices: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    args: dict[str, Any] = {"question": question, **extra}
    if choices is not None:
        args["choices"] = choices
    return {"name": "clarify", "arguments": args}


def tool_results(fake_provider: FakeOpenAI, n: int) -> list[str]:
    """The tool results the model's `n`th request (1-based) carried."""
    body = fake_provider.wait_requests(n)[n - 1].body
    return [str(m.get("content")) for m in body["messages"] if m.get("role") == "tool"]


def open_asking(qtbot: Any, controller: Any, tmp_path: Path, text: str = "paint it") -> Any:
    """A session shown in the main window, a prompt sent, and its question's card shown."""
    sid = drive(qtbot, controller.link.call(SessionCreate(cwd=str(tmp_path)))).session.session_id
    win = controller.open_session(sid)
    conv = win.conversation
    qtbot.waitUntil(lambda: conv.state.loaded, timeout=10_000)
    conv.composer.setPlainText(text)
    conv.send()
    qtbot.waitUntil(lambda: len(conv.shelves.questions) == 1, timeout=15_000)
    return conv


def only_card(conv: Any) -> QuestionCard:
    (card,) = conv.shelves.questions.values()
    assert isinstance(card, QuestionCard)
    return card


def clarify_card(conv: Any) -> ToolItem:
    found = [it for it in conv.state.transcript.items if isinstance(it, ToolItem) and it.name == "clarify"]
    assert len(found) == 1
    return found[0]


def test_a_choice_clicked_answers_the_question_and_the_model_reads_it(
    qtbot: Any, controller: Any, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    question = "Which colour? <a href='http://evil.example'>click</a>"
    fake_provider.script(Reply.calls(clarify(question, CHOICES)), Reply(deltas=["Blue it is."]))
    conv = open_asking(qtbot, controller, tmp_path)
    card = only_card(conv)
    label = card.findChild(type(card.note), "questionText")
    assert label is not None
    assert label.text() == question
    assert label.textFormat() == Qt.TextFormat.PlainText, "the model's words are never markup"
    assert [b.text() for b in card.buttons] == ["1. red", "2. blue", "3. green"]
    assert card.field is not None, "choices and the person's own words (allow_other)"
    assert conv.state.status == "waiting_answer"
    assert clarify_card(conv).status == "waiting_answer"
    sid = conv.session_id
    qtbot.waitUntil(lambda: controller.statuses.get(sid) == "waiting_answer", timeout=10_000)
    assert controller.notifier.state == "approval", "the tray's icon says someone is waited for"

    card.buttons[1].click()
    qtbot.waitUntil(lambda: not conv.shelves.questions and conv.state.status == "idle",
                    timeout=15_000)
    assert tool_results(fake_provider, 2) == ["The person answered with choice 2: blue"]
    qtbot.waitUntil(lambda: clarify_card(conv).outcome == "Answered: blue", timeout=10_000)


def test_a_key_picks_a_choice_and_words_typed_answer_a_question_without_choices(
    qtbot: Any, controller: Any, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    fake_provider.script(
        Reply.calls(clarify("Which colour?", CHOICES, allow_other=False)),
        Reply.calls(clarify("And what should it be called?")),
        Reply(deltas=["Done."]),
    )
    conv = open_asking(qtbot, controller, tmp_path)
    first = only_card(conv)
    assert first.field is None, "allow_other false: choices only"
    first.setFocus()
    qtbot.keyClick(first, Qt.Key.Key_3)
    qtbot.waitUntil(lambda: len(conv.shelves.questions) == 1
                    and only_card(conv) is not first, timeout=15_000)
    assert tool_results(fake_provider, 2) == ["The person answered with choice 3: green"]

    second = only_card(conv)
    assert second.buttons == []
    assert second.field is not None
    second.field.setText("  The Green Room ")
    qtbot.keyClick(second.field, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: not conv.shelves.questions and conv.state.status == "idle",
                    timeout=15_000)
    assert tool_results(fake_provider, 3)[-1] == "The person answered: The Green Room"


def test_a_question_answered_elsewhere_closes_its_card(
    qtbot: Any, controller: Any, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    fake_provider.script(Reply.calls(clarify("Which colour?", CHOICES)), Reply(deltas=["Red."]))
    conv = open_asking(qtbot, controller, tmp_path)
    card = only_card(conv)
    question = card.question
    # Another client (the CLI, a chat room) answers first: the card goes with clarify.resolved.
    drive(qtbot, controller.link.call(ClarifyRespond(question_id=question.question_id, choice=0)))
    qtbot.waitUntil(lambda: not conv.shelves.questions, timeout=10_000)
    qtbot.waitUntil(lambda: conv.state.status == "idle", timeout=15_000)
    assert tool_results(fake_provider, 2) == ["The person answered with choice 1: red"]

    # A card still shown when the answer came from elsewhere (its event not here yet): a click
    # on it is refused (-32014) and the card says so instead of failing.
    conv.state.questions.waiting[question.question_id] = question
    conv.shelves.refresh()
    late = only_card(conv)
    late.buttons[2].click()
    qtbot.waitUntil(lambda: late.note.isVisible(), timeout=10_000)
    assert "Answered elsewhere" in late.note.text()
    assert not any(b.isEnabled() for b in late.buttons)


@pytest.fixture
def tray_calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """A desktop with a system tray: QSystemTrayIcon says one exists; its balloons are recorded."""
    calls: list[tuple[str, str]] = []
    monkeypatch.setattr(QSystemTrayIcon, "isSystemTrayAvailable", staticmethod(lambda: True))
    monkeypatch.setattr(QSystemTrayIcon, "showMessage",
                        lambda self, title, text, *rest: calls.append((title, text)))
    return calls


def test_a_question_with_no_window_reaches_the_tray_whose_menu_answers_it(
    qtbot: Any, tray_calls: list[tuple[str, str]], make_controller: Any,
    fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    controller = make_controller()
    notifier = controller.notifier
    fake_provider.script(Reply.calls(clarify("Which colour?", CHOICES)), Reply(deltas=["Green."]))
    sid = drive(qtbot, controller.link.call(SessionCreate(cwd=str(tmp_path)))).session.session_id
    drive(qtbot, controller.link.call(PromptSubmit(session_id=sid, request_id="r1", text="paint")))
    qtbot.waitUntil(lambda: bool(tray_calls) and bool(notifier.waiting), timeout=15_000)
    title, text = tray_calls[0]
    assert title == "Turnkey has a question for you"
    assert text.startswith("Which colour?")
    (question_id,) = notifier.waiting
    entry = notifier.waiting[question_id]
    assert entry.title() == "Answer? Which colour?"
    assert [a.text() for a in entry.actions() if a.text()] == [*CHOICES, "Show in Turnkey…"]

    # The balloon's click opens the session with the card's first choice focused.
    notifier.tray.messageClicked.emit()
    main = controller.main
    qtbot.waitUntil(lambda: main.current is not None
                    and question_id in main.conversation.shelves.questions, timeout=10_000)
    card = main.conversation.shelves.questions[question_id]
    qtbot.waitUntil(lambda: main.focusWidget() is card.buttons[0], timeout=5_000)

    next(a for a in entry.actions() if a.text() == "green").trigger()
    qtbot.waitUntil(lambda: question_id not in notifier.waiting, timeout=10_000)
    qtbot.waitUntil(lambda: controller.statuses.get(sid) == "idle", timeout=15_000)
    assert tool_results(fake_provider, 2) == ["The person answered with choice 3: green"]
    assert not any(a.menu() for a in notifier.menu.actions()), "no entry is left"


def test_ctrl_shift_a_from_the_message_box_reaches_a_question_alone(
    qtbot: Any, controller: Any, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    """No approval waits, only a question: Ctrl+Shift+A, typed in the message box, puts the
    focus on its first choice and a digit answers (in the real app the shortcut was off while
    no approval card was shown, and the digit went into the message box)."""
    fake_provider.script(Reply.calls(clarify("Which colour?", CHOICES)), Reply(deltas=["Blue."]))
    conv = open_asking(qtbot, controller, tmp_path)
    main = controller.main
    active(qtbot, main)
    conv.composer.setFocus()
    qtbot.waitUntil(lambda: focused() is conv.composer, timeout=5_000)
    qtbot.waitUntil(lambda: main.approval_action.isEnabled(), timeout=5_000)
    press(qtbot, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    card = only_card(conv)
    assert focused() is card.buttons[0]
    press(qtbot, Qt.Key.Key_2)
    qtbot.waitUntil(lambda: not conv.shelves.questions, timeout=15_000)
    assert tool_results(fake_provider, 2) == ["The person answered with choice 2: blue"]
    assert conv.composer.toPlainText() == ""
    # The focus goes back to the message box, not along the window to New session.
    assert focused() is conv.composer
