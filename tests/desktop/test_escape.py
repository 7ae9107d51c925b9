"""Esc, the key a person reaches for in a panic, stops the running turn from wherever the
focus is in a window that shows a conversation; popups and dialogs keep their own Esc, and
with no turn running every widget keeps its own (the message reader goes back to the list)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QWidget

from desktop.qt.controller import Controller
from desktop.qt.conversation import Conversation
from desktop.qt.palette import CommandPalette
from desktop.qt.session_window import Window
from desktop.state.transcript import AssistantItem, NoteItem
from tests.fakes.openai_server import FakeOpenAI, Reply

from .test_keyboard import active
from .test_session_window import new_session, open_window

HANG = "hang on"  # a prompt with these words gets a reply that streams a word, then hangs


@pytest.fixture
def hanging(fake_provider: FakeOpenAI) -> Iterator[None]:
    release = threading.Event()
    fake_provider.routes[HANG] = Reply(deltas=["working", " on it"], hang_after=1, release=release)
    yield
    release.set()


def stopped(conv: Conversation) -> int:
    """How many turns of the session ended stopped by the person."""
    return sum(1 for it in conv.state.transcript.items
               if isinstance(it, NoteItem) and it.kind == "interrupted")


def run_turn(qtbot: Any, fake: FakeOpenAI, conv: Conversation) -> None:
    """A turn runs, its reply hanging after a word, and the window shows it running."""
    asked = len(fake.snapshot())
    conv.composer.setPlainText(f"{HANG}, please")
    conv.send()
    qtbot.waitUntil(lambda: len(fake.snapshot()) > asked and conv.state.status == "running"
                    and conv.stop_button.isEnabled(), timeout=15_000)


def esc_stops(qtbot: Any, fake: FakeOpenAI, win: Window, where: str,
              focus: Callable[[], QWidget | None]) -> None:
    """With a turn running and the focus put by `focus` (None: wherever it went), Esc pressed
    where the focus is stops the turn."""
    conv = win.conversation
    if conv.state.status != "running":
        run_turn(qtbot, fake, conv)
    before = stopped(conv)
    target = focus()
    if target is not None:
        target.setFocus(Qt.FocusReason.OtherFocusReason)
        qtbot.waitUntil(lambda: QApplication.focusWidget() in (target, target.focusProxy()),
                        timeout=2_000)
    now = QApplication.focusWidget() or win  # (no focus widget: keys go to the window)
    assert now.window() is win, f"{where}: the focus left the window, to {now!r}"
    shown = repr(now)  # (now, while it exists: Esc may close it)
    qtbot.keyClick(now, Qt.Key.Key_Escape)
    try:
        qtbot.waitUntil(lambda: stopped(conv) == before + 1, timeout=10_000)
    except Exception as exc:
        raise AssertionError(f"Esc with the focus on {where} ({shown}) did not stop the turn") from exc
    qtbot.waitUntil(lambda: not conv.state.busy and not conv.stop_button.isEnabled(), timeout=15_000)


def click_the_answer(qtbot: Any, conv: Conversation) -> QWidget | None:
    """A click on the streaming answer (it starts a selection there): the focus on the
    transcript."""
    rows = conv.state.transcript.items
    row = max(i for i, it in enumerate(rows) if isinstance(it, AssistantItem))
    rect = conv.view.visualRect(conv.model.index(row, 0))
    qtbot.mouseClick(conv.view.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    return conv.view


def read_the_answer(qtbot: Any, conv: Conversation) -> QWidget | None:
    """Enter on the answer opens it for reading (text selectable), the focus in its reader
    (None: the focus stays where it went)."""
    rows = conv.state.transcript.items
    row = max(i for i, it in enumerate(rows) if isinstance(it, AssistantItem))
    conv.view.setFocus(Qt.FocusReason.OtherFocusReason)
    conv.view.setCurrentIndex(conv.model.index(row, 0))
    qtbot.keyClick(conv.view, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: conv.view.reader() is not None
                    and QApplication.focusWidget() is conv.view.reader(), timeout=2_000)
    return None


def esc_everywhere(qtbot: Any, fake: FakeOpenAI, win: Window) -> None:
    conv = win.conversation
    shown: list[str] = []  # what the window showed as errors (said when a step fails)
    conv.error.connect(shown.append)
    active(qtbot, win)
    esc_stops(qtbot, fake, win, "the message box", lambda: conv.composer)
    esc_stops(qtbot, fake, win, "the transcript", lambda: conv.view)
    esc_stops(qtbot, fake, win, "an answer clicked", lambda: click_the_answer(qtbot, conv))
    esc_stops(qtbot, fake, win, "an answer's reader", lambda: read_the_answer(qtbot, conv))
    esc_stops(qtbot, fake, win, "the Stop button", lambda: conv.stop_button)
    esc_stops(qtbot, fake, win, "the model box", lambda: conv.model_box)
    # A message queued behind the running turn: Esc on its Cancel button stops the turn (the
    # queued message then runs, and ends on its own)...
    run_turn(qtbot, fake, conv)
    conv.composer.setPlainText("afterwards")
    conv.send()
    qtbot.waitUntil(lambda: len(conv.queue_rows) == 1, timeout=10_000)
    row = next(iter(conv.queue_rows.values()))
    esc_stops(qtbot, fake, win, "a queued message's Cancel button", lambda: row.cancel)
    qtbot.waitUntil(lambda: conv.state.status == "idle" and not conv.queue_rows, timeout=15_000)
    # ... and once Cancel was clicked (its row gone), Esc still stops the turn.
    run_turn(qtbot, fake, conv)
    conv.composer.setPlainText("never mind")
    conv.send()
    qtbot.waitUntil(lambda: len(conv.queue_rows) == 1, timeout=10_000)
    cancel = next(iter(conv.queue_rows.values())).cancel
    cancel.setFocus(Qt.FocusReason.MouseFocusReason)  # as a click gives it
    cancel.click()
    try:
        qtbot.waitUntil(lambda: not conv.queue_rows and not conv.state.queue, timeout=10_000)
    except Exception as exc:
        raise AssertionError(f"the cancelled message stayed queued: status {conv.state.status}, "
                             f"queue {list(conv.state.queue)}, rows {list(conv.queue_rows)}, "
                             f"shown as errors {shown}") from exc
    esc_stops(qtbot, fake, win, "wherever a clicked Cancel left it", lambda: None)


@pytest.mark.usefixtures("hanging")
def test_esc_stops_the_turn_from_anywhere_in_the_main_window(
    qtbot: Any, controller: Controller, fake_provider: FakeOpenAI
) -> None:
    sid = new_session(qtbot, controller)
    win = open_window(qtbot, controller, sid)
    sidebar = controller.main.sidebar
    qtbot.waitUntil(lambda: sidebar.model.row_of(sid) is not None, timeout=10_000)
    esc_everywhere(qtbot, fake_provider, win)
    esc_stops(qtbot, fake_provider, win, "the sessions list", lambda: sidebar.list)
    esc_stops(qtbot, fake_provider, win, "the sidebar's search", lambda: sidebar.search)


@pytest.mark.usefixtures("hanging")
def test_esc_stops_the_turn_from_anywhere_in_a_session_window(
    qtbot: Any, controller: Controller, fake_provider: FakeOpenAI
) -> None:
    sid = new_session(qtbot, controller)
    win = open_window(qtbot, controller, sid, new_window=True)
    qtbot.waitExposed(win)
    esc_everywhere(qtbot, fake_provider, win)


@pytest.mark.usefixtures("hanging")
def test_esc_closes_the_palette_first_and_leaves_the_reader_once_nothing_runs(
    qtbot: Any, controller: Controller, fake_provider: FakeOpenAI
) -> None:
    sid = new_session(qtbot, controller)
    win = open_window(qtbot, controller, sid, new_window=True)
    conv = win.conversation
    qtbot.waitExposed(win)
    active(qtbot, win)
    run_turn(qtbot, fake_provider, conv)
    # The command palette (a dialog over the window): Esc closes it, and only that.
    [opener] = [a for a in win.actions() if a.property("palette_opener")]
    opener.trigger()
    found = win.property("commandPalette")
    assert isinstance(found, CommandPalette)
    active(qtbot, found)
    qtbot.keyClick(found.query, Qt.Key.Key_Escape)
    qtbot.waitUntil(lambda: not found.isVisible(), timeout=5_000)
    qtbot.wait(500)
    assert conv.state.status == "running", "Esc only closed the palette"
    assert stopped(conv) == 0
    # Enter on the answer opens its reader (the focus in it): Esc stops the turn there too,
    # and once nothing runs, Esc in the reader goes back to the list.
    active(qtbot, win)
    esc_stops(qtbot, fake_provider, win, "an answer's reader",
              lambda: read_the_answer(qtbot, conv))
    qtbot.waitUntil(lambda: all(not it.key.startswith(("stream:", "prompt:"))
                                for it in conv.state.transcript.items), timeout=10_000)
    read_the_answer(qtbot, conv)
    qtbot.keyClick(QApplication.focusWidget(), Qt.Key.Key_Escape)
    assert conv.view.reader() is None
    assert conv.view.hasFocus()
    assert stopped(conv) == 1


def test_esc_without_a_running_turn_stops_nothing(
    qtbot: Any, controller: Controller, fake_provider: FakeOpenAI
) -> None:
    fake_provider.script(Reply(deltas=["done"]))
    sid = new_session(qtbot, controller)
    win = open_window(qtbot, controller, sid)
    conv = win.conversation
    active(qtbot, win)
    conv.composer.setPlainText("quick one")
    conv.send()
    qtbot.waitUntil(lambda: conv.state.status == "idle" and any(
        it for it in conv.state.transcript.items if getattr(it, "text", "") == "done"),
        timeout=15_000)
    asked = len(fake_provider.snapshot())
    for target in (conv.composer, conv.view):
        target.setFocus()
        qtbot.keyClick(target, Qt.Key.Key_Escape)
    qtbot.wait(300)
    assert stopped(conv) == 0
    assert conv.state.status == "idle"
    assert len(fake_provider.snapshot()) == asked
    assert not conv.banner.isVisible(), conv.banner.text()
