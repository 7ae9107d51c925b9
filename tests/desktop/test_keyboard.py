"""The whole app from the keyboard alone: Tab walks every control of the main window in a
sensible order without a trap, and a session can be started, written to, found and reopened
without the mouse."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QWidget

from desktop.qt.controller import Controller
from desktop.qt.session_window import NewSessionDialog
from tests.fakes.openai_server import FakeOpenAI, Reply

from .test_session_window import new_session, turn_done


def focused() -> QWidget | None:
    return QApplication.focusWidget()


def press(qtbot: Any, key: Qt.Key, modifier: Qt.KeyboardModifier = Qt.KeyboardModifier.NoModifier) -> None:
    target = focused()
    assert target is not None, "the focus was lost"
    qtbot.keyClick(target, key, modifier)


def active(qtbot: Any, win: QWidget) -> None:
    win.show()
    win.raise_()
    win.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is win, timeout=5_000)


def test_tab_walks_every_control_in_order_and_comes_back(qtbot: Any, controller: Controller) -> None:
    sid = new_session(qtbot, controller)
    main = controller.main
    conv = controller.open_session(sid).conversation
    qtbot.waitUntil(lambda: conv.state.loaded, timeout=10_000)
    qtbot.waitUntil(lambda: main.sidebar.model.row_of(sid) is not None, timeout=10_000)
    active(qtbot, main)
    conv.composer.setFocus()
    qtbot.waitUntil(lambda: focused() is conv.composer, timeout=2_000)
    walk: list[QWidget] = []
    for _ in range(40):
        press(qtbot, Qt.Key.Key_Tab)
        now = focused()
        assert now is not None
        if now is conv.composer:
            break
        assert now.isVisible(), f"{now!r} took the focus while hidden"
        walk.append(now)
    else:
        raise AssertionError(f"Tab never came back to the message box: {walk}")
    sidebar = main.sidebar
    wanted = [sidebar.new_button, sidebar.search, sidebar.list, conv.view, conv.send_button]
    for widget in wanted:
        assert widget in walk, f"Tab never reaches {widget.accessibleName() or widget!r}"
    # Sidebar first (top to bottom), then the conversation: the order a reader sees.
    order = [walk.index(w) for w in (sidebar.new_button, sidebar.search, sidebar.list)]
    assert order == sorted(order)
    assert walk.index(sidebar.list) < walk.index(conv.view)
    # And Shift+Tab walks back the same way.
    press(qtbot, Qt.Key.Key_Backtab, Qt.KeyboardModifier.ShiftModifier)
    assert focused() is walk[-1]


def test_start_write_find_and_reopen_a_session_without_the_mouse(
    qtbot: Any, controller: Controller, fake_provider: FakeOpenAI, tmp_path: Any
) -> None:
    main = controller.main
    active(qtbot, main)
    main.sidebar.search.setFocus()
    # Ctrl+N: the new-session dialog, its title field first.
    press(qtbot, Qt.Key.Key_N, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: isinstance(getattr(main, "new_dialog", None), NewSessionDialog)
                    and main.new_dialog.isVisible(), timeout=5_000)
    dialog = main.new_dialog
    qtbot.waitUntil(lambda: focused() is dialog.title, timeout=5_000)
    qtbot.keyClicks(dialog.title, "Keyboard only")
    dialog.folder.setText(str(tmp_path))
    press(qtbot, Qt.Key.Key_Return)  # the default button: Start session
    qtbot.waitUntil(lambda: main.current is not None and main.conversation.state.loaded, timeout=10_000)
    conv = main.conversation
    active(qtbot, main)
    qtbot.waitUntil(lambda: focused() is conv.composer, timeout=5_000)
    # Type and Enter: sent.
    fake_provider.script(Reply(deltas=["Heard you."]))
    qtbot.keyClicks(conv.composer, "hello there")
    press(qtbot, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: turn_done(main, 1), timeout=15_000)
    first = main.session_id
    other = new_session(qtbot, controller)
    qtbot.waitUntil(lambda: main.sidebar.model.row_of(other) is not None, timeout=10_000)
    controller.open_session(other)
    assert main.session_id == other
    # Ctrl+F, a word from the first session, Down into the results, Enter opens it.
    press(qtbot, Qt.Key.Key_F, Qt.KeyboardModifier.ControlModifier)
    assert focused() is main.sidebar.search
    qtbot.keyClicks(main.sidebar.search, "hello")
    qtbot.waitUntil(lambda: [r.session_id for r in main.sidebar.sessions.rows] == [first],
                    timeout=10_000)
    press(qtbot, Qt.Key.Key_Down)
    assert focused() is main.sidebar.list
    press(qtbot, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: main.session_id == first, timeout=5_000)
    qtbot.waitUntil(lambda: focused() is main.conversation.composer, timeout=5_000)
    # Escape in the search field is not needed: Ctrl+Shift+S hides the sidebar and shows it.
    press(qtbot, Qt.Key.Key_S, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    assert not main.sidebar.isVisible()
    press(qtbot, Qt.Key.Key_S, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    assert main.sidebar.isVisible()
