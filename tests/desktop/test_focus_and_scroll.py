"""Where typing goes and what the conversation shows: the focus and scrolling rules of a
session window (desktop/qt/follow.py), against a real backend and the fake model."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QPoint, QRect, Qt
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QApplication, QWidget

from desktop.qt.controller import Controller
from desktop.qt.session_window import Window
from desktop.state.transcript import AssistantItem, ToolItem, UserItem
from shared.methods import AdmissionCancel
from tests.fakes.openai_server import FakeOpenAI, Reply

from .conftest import drive
from .test_keyboard import active
from .test_session_window import new_session, open_window, texts, turn_done, type_and_send

LONG = "".join(f"Line {i} of a long answer that needs several rows to show.\n\n" for i in range(60))


def at_bottom(win: Window) -> bool:
    bar = win.conversation.view.verticalScrollBar()
    return bar.maximum() > 0 and bar.value() == bar.maximum()


def small_window(qtbot: Any, controller: Controller, sid: str) -> Window:
    win = open_window(qtbot, controller, sid)
    win.resize(640, 420)
    win.show()
    qtbot.waitExposed(win)
    return win


def long_turn(qtbot: Any, win: Window, fake: FakeOpenAI, n: int) -> None:
    fake.script(Reply(deltas=[LONG]))
    type_and_send(qtbot, win, f"tell me a lot ({n})")
    qtbot.waitUntil(lambda: turn_done(win, n), timeout=15_000)


def test_a_new_window_takes_typing_in_its_composer(
    qtbot: Any, controller: Controller, fake_provider: FakeOpenAI
) -> None:
    sid = new_session(qtbot, controller)
    win = small_window(qtbot, controller, sid)
    assert win.focusWidget() is win.conversation.composer, "a new session's composer has focus"


def test_typing_on_the_transcript_goes_to_the_composer_and_enter_sends(
    qtbot: Any, controller: Controller, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    fake_provider.script(Reply.calls({"name": "list_dir", "arguments": {"path": "."}}),
                         Reply(deltas=["Listed."]))
    sid = new_session(qtbot, controller, tmp_path)
    win = small_window(qtbot, controller, sid)
    type_and_send(qtbot, win, "list it")
    qtbot.waitUntil(lambda: turn_done(win, 1), timeout=15_000)
    # Click a tool card: the transcript has focus now (its type-to-search used to eat keys).
    card = next(i for i, it in enumerate(win.conversation.state.transcript.items) if isinstance(it, ToolItem))
    rect = win.conversation.view.visualRect(win.conversation.model.index(card, 0))
    qtbot.mouseClick(win.conversation.view.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    win.conversation.view.setFocus()
    fake_provider.script(Reply(deltas=["Hello again."]))
    qtbot.keyClicks(win.conversation.view, "and now?")
    assert win.conversation.composer.toPlainText() == "and now?"
    assert win.focusWidget() is win.conversation.composer
    qtbot.keyClick(win.conversation.view, Qt.Key.Key_Return)  # Enter on the transcript sends, too
    qtbot.waitUntil(lambda: turn_done(win, 2), timeout=15_000)
    assert texts(win, UserItem) == ["list it", "and now?"]
    # Shortcuts are not typing: Ctrl+C on the transcript leaves the composer alone.
    win.conversation.view.setFocus()
    qtbot.keyClick(win.conversation.view, Qt.Key.Key_C, Qt.KeyboardModifier.ControlModifier)
    assert win.conversation.composer.toPlainText() == ""


def test_the_view_follows_the_bottom_and_counts_what_arrives_while_scrolled_up(
    qtbot: Any, controller: Controller, fake_provider: FakeOpenAI
) -> None:
    sid = new_session(qtbot, controller)
    win = small_window(qtbot, controller, sid)
    long_turn(qtbot, win, fake_provider, 1)
    qtbot.waitUntil(lambda: at_bottom(win), timeout=5_000)
    assert not win.conversation.follower.button.isVisible()
    # Streaming while at the bottom: the view stays there, delta after delta.
    fake_provider.script(Reply(deltas=[f"chunk {i} " * 30 + "\n\n" for i in range(15)], delay=0.05))
    type_and_send(qtbot, win, "more")
    qtbot.waitUntil(lambda: any(isinstance(it, AssistantItem) and it.streaming
                                for it in win.conversation.state.transcript.items), timeout=10_000)
    qtbot.waitUntil(lambda: turn_done(win, 2), timeout=15_000)
    qtbot.waitUntil(lambda: at_bottom(win), timeout=5_000)
    # Scrolled up: left alone, and what arrives is counted on the button.
    bar = win.conversation.view.verticalScrollBar()
    bar.setValue(bar.maximum() // 3)
    kept = bar.value()
    fake_provider.script(Reply(deltas=["A short one."]))
    win.conversation.composer.setPlainText("third")
    win.conversation.send()  # sending jumps to the bottom ...
    qtbot.waitUntil(lambda: at_bottom(win), timeout=5_000)
    qtbot.waitUntil(lambda: turn_done(win, 3), timeout=15_000)
    bar.setValue(kept)  # ... then the reader scrolls up again while another turn runs
    fake_provider.script(Reply(deltas=["Fourth answer."]))
    drive_submit(qtbot, win, "fourth")  # (from elsewhere: the reader stays where they are)
    qtbot.waitUntil(lambda: win.conversation.follower.button.isVisible(), timeout=10_000)
    qtbot.waitUntil(lambda: "new" in win.conversation.follower.button.text(), timeout=10_000)
    assert bar.value() == kept, "the reader who scrolled up is not moved"
    assert win.conversation.follower.button.accessibleName() == "Jump to latest"
    qtbot.mouseClick(win.conversation.follower.button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: at_bottom(win), timeout=5_000)
    assert not win.conversation.follower.button.isVisible()


def test_an_approval_card_does_not_cover_the_latest_text(
    qtbot: Any, controller: Controller, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    sid = new_session(qtbot, controller, tmp_path)
    win = small_window(qtbot, controller, sid)
    long_turn(qtbot, win, fake_provider, 1)
    fake_provider.script(Reply.calls({"name": "terminal", "arguments": {"command": "rm -rf build"}},
                                     text="Removing the build folder."))
    type_and_send(qtbot, win, "clean")
    qtbot.waitUntil(lambda: len(win.conversation.cards) == 1, timeout=15_000)
    qtbot.waitUntil(lambda: at_bottom(win), timeout=5_000)  # the view shrank and stayed down
    win.conversation.answer(next(iter(win.conversation.cards)), "deny")
    qtbot.waitUntil(lambda: not win.conversation.cards, timeout=10_000)


def drive_submit(qtbot: Any, win: Window, text: str) -> None:
    """A prompt sent by another window or client: this window only sees its events."""
    from shared.methods import PromptSubmit

    from .conftest import drive

    drive(qtbot, win.link.call(PromptSubmit(session_id=win.session_id, request_id=f"other-{text}",
                                            text=text)))


def test_the_message_box_grows_with_its_text_up_to_a_limit(qtbot: Any) -> None:
    from desktop.qt.conversation import Composer

    box = Composer()
    qtbot.addWidget(box)
    box.resize(500, box.height())
    box.show()
    qtbot.waitExposed(box)
    empty = box.height()
    box.setPlainText("one line")
    assert box.height() == empty, "two lines high from the start: typing one does not jump"
    box.setPlainText("\n".join(f"line {i}" for i in range(5)))
    five = box.height()
    assert five > empty
    box.setPlainText("\n".join(f"line {i}" for i in range(40)))
    most = box.height()
    assert most > five
    assert most < 40 * box.fontMetrics().lineSpacing(), "it stops growing and scrolls"
    assert box.verticalScrollBar().maximum() > 0
    box.clear()
    assert box.height() == empty, "sending shrinks it back"


def answer_from_the_keyboard(qtbot: Any, win: Window, fake: FakeOpenAI, folder: Path,
                             decision: str) -> None:
    """A turn asks for an approval; Space on the card's button answers it (the person went to
    the card with Tab); the turn then ends."""
    n = len(texts(win, UserItem)) + 1
    fake.script(Reply.calls({"name": "terminal", "arguments": {"command": f"rm -rf {folder}/v{n}"}}),
                Reply(deltas=[f"Answered {n}."]))
    type_and_send(qtbot, win, f"clean up {n}")
    qtbot.waitUntil(lambda: len(win.conversation.cards) == 1, timeout=15_000)
    button = next(iter(win.conversation.cards.values())).buttons[decision]
    button.setFocus(Qt.FocusReason.TabFocusReason)
    qtbot.waitUntil(lambda: QApplication.focusWidget() is button, timeout=2_000)
    qtbot.keyClick(button, Qt.Key.Key_Space)  # Allow once, or Deny
    qtbot.waitUntil(lambda: turn_done(win, n) and not win.conversation.cards, timeout=20_000)
    qtbot.wait(100)  # (the card's deletion is done)


@pytest.mark.parametrize("decision", ["once", "deny"])
def test_after_allow_or_deny_the_focus_goes_back_to_the_message_box(
    qtbot: Any, controller: Controller, fake_provider: FakeOpenAI, tmp_path: Path, decision: str
) -> None:
    sid = new_session(qtbot, controller, tmp_path)
    for win in (open_window(qtbot, controller, sid),  # beside the sidebar, then popped out
                open_window(qtbot, controller, sid, new_window=True)):
        active(qtbot, win)
        answer_from_the_keyboard(qtbot, win, fake_provider, tmp_path, decision)
        assert QApplication.focusWidget() is win.conversation.composer, \
            f"the focus went to {QApplication.focusWidget()!r}"


def test_after_a_queued_message_is_cancelled_the_focus_goes_back_to_the_message_box(
    qtbot: Any, controller: Controller, fake_provider: FakeOpenAI
) -> None:
    release = threading.Event()
    fake_provider.script(Reply(deltas=["working", " on it"], hang_after=1, release=release))
    sid = new_session(qtbot, controller)
    win = open_window(qtbot, controller, sid, new_window=True)
    conv = win.conversation
    active(qtbot, win)
    type_and_send(qtbot, win, "a long job")
    qtbot.waitUntil(lambda: conv.state.status == "running", timeout=15_000)
    type_and_send(qtbot, win, "then this")
    qtbot.waitUntil(lambda: len(conv.queue_rows) == 1, timeout=10_000)
    cancel = next(iter(conv.queue_rows.values())).cancel
    cancel.setFocus(Qt.FocusReason.MouseFocusReason)  # as a click gives it
    cancel.click()
    qtbot.waitUntil(lambda: not conv.queue_rows, timeout=10_000)
    qtbot.wait(100)  # (the row's deletion is done)
    assert QApplication.focusWidget() is conv.composer, f"the focus went to {QApplication.focusWidget()!r}"
    conv.interrupt()
    qtbot.waitUntil(lambda: not conv.state.busy, timeout=15_000)
    release.set()


def on_screen(widget: QWidget) -> QImage:
    """What the screen shows of `widget` now: its window's pixels as last painted (a grab of
    the widget itself would paint it afresh)."""
    win = widget.window()
    shot = win.screen().grabWindow(win.winId())
    return shot.copy(QRect(widget.mapTo(win, QPoint(0, 0)), widget.size())).toImage() \
        .convertToFormat(QImage.Format.Format_RGB32)


def painted(widget: QWidget) -> QImage:
    """What `widget` looks like painted now."""
    return widget.grab().toImage().convertToFormat(QImage.Format.Format_RGB32)


def test_the_message_box_says_steer_only_while_a_turn_runs(
    qtbot: Any, controller: Controller, fake_provider: FakeOpenAI
) -> None:
    from desktop.qt.conversation import IDLE_HINT, RUNNING_HINT

    sid = new_session(qtbot, controller)
    win = open_window(qtbot, controller, sid)  # (wide: the message box keeps its size)
    qtbot.waitExposed(win)
    conv = win.conversation
    box = conv.composer.viewport()
    assert conv.composer.placeholderText() == IDLE_HINT
    fake_provider.script(Reply(deltas=["one ", "two ", "three"], delay=0.3))
    type_and_send(qtbot, win, "count")
    conv.view.setFocus()  # (no blinking cursor in the pictures)
    qtbot.waitUntil(lambda: conv.composer.placeholderText() == RUNNING_HINT, timeout=10_000)
    box.update()  # (painted while the turn runs, whatever else had it painted)
    qtbot.waitUntil(lambda: on_screen(box) == painted(box), timeout=5_000)
    steering = on_screen(box)
    qtbot.waitUntil(lambda: turn_done(win, 1), timeout=15_000)
    qtbot.wait(200)  # (a refresh due is done, and painted)
    assert conv.composer.placeholderText() == IDLE_HINT
    assert on_screen(box) != steering, "the screen still shows the running turn's hint"
    assert on_screen(box) == painted(box)


def test_a_cancel_that_comes_after_the_message_left_the_queue_says_so_and_is_no_error(
    qtbot: Any, controller: Controller, fake_provider: FakeOpenAI
) -> None:
    """Cancel clicked as the queued message leaves the queue (its turn starting, or another
    window cancelling it first): the backend refuses, the row goes, and a note says it was too
    late; nothing is shown as an error."""
    release = threading.Event()
    fake_provider.script(Reply(deltas=["working", " on it"], hang_after=1, release=release))
    sid = new_session(qtbot, controller)
    win = open_window(qtbot, controller, sid)
    conv = win.conversation
    errors: list[str] = []
    conv.error.connect(errors.append)
    type_and_send(qtbot, win, "a long job")
    qtbot.waitUntil(lambda: conv.state.status == "running", timeout=15_000)
    type_and_send(qtbot, win, "then this")
    qtbot.waitUntil(lambda: len(conv.queue_rows) == 1, timeout=10_000)
    admission_id = next(iter(conv.queue_rows))
    drive(qtbot, controller.link_of(sid).call(AdmissionCancel(admission_id=admission_id)))
    conv.cancel(admission_id)  # the click that came second
    qtbot.waitUntil(lambda: "Too late to cancel" in conv.turn_bar.label.text(), timeout=10_000)
    qtbot.waitUntil(lambda: not conv.queue_rows and not conv.state.queue, timeout=10_000)
    assert errors == []
    conv.interrupt()
    qtbot.waitUntil(lambda: not conv.state.busy, timeout=15_000)
    release.set()
