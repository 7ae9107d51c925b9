"""A session window is never a dead end: the same File and Help menus and shortcuts as the
browser, and a Session menu (rename, pop out, stop), carried out by the controller."""

from __future__ import annotations

from typing import Any

from PySide6.QtWidgets import QDialog

from desktop.qt.browser import NewSessionDialog
from desktop.qt.controller import Controller

from .test_session_window import new_session, open_window


def test_the_session_window_menus_reach_every_app_action(qtbot: Any, controller: Controller) -> None:
    sid = new_session(qtbot, controller)
    win = open_window(qtbot, controller, sid)
    menus = [a.text().replace("&", "") for a in win.menuBar().actions()]
    assert menus == ["File", "Session", "Help"]
    shortcuts = {name: a.shortcut().toString() for name, a in win.app_actions.items()}
    browser = {a.text(): a.shortcut().toString() for a in (controller.browser.new_action,
                                                           controller.browser.settings_action,
                                                           controller.browser.quit_action)}
    assert shortcuts["new"] == browser["New session"] == "Ctrl+N", "one shortcut everywhere"
    assert shortcuts["settings"] == browser["Settings"] == "Ctrl+,"
    assert shortcuts["quit"] == browser["Quit"] == "Ctrl+Q"
    assert shortcuts["pop_out"] == "Ctrl+Shift+O"
    assert win.rename_action.shortcut().toString() == "F2"
    # Back to every session when the browser was closed.
    controller.browser.close()
    win.app_actions["sessions"].trigger()
    qtbot.waitUntil(lambda: controller.browser.isVisible(), timeout=5_000)
    # Ctrl+N from a session window: the new-session dialog.
    win.app_actions["new"].trigger()
    qtbot.waitUntil(lambda: any(isinstance(d, NewSessionDialog) and d.isVisible()
                                for d in controller.browser.findChildren(QDialog)), timeout=5_000)
    # Pop out: the same session in a second window.
    win.app_actions["pop_out"].trigger()
    qtbot.waitUntil(lambda: len([w for w in controller.windows if w.session_id == sid]) == 2,
                    timeout=5_000)


def test_f2_renames_the_session(qtbot: Any, controller: Controller) -> None:
    sid = new_session(qtbot, controller)
    win = open_window(qtbot, controller, sid)
    win.rename_action.trigger()
    dialog = win.rename_dialog
    assert dialog.isVisible()
    dialog.setTextValue("  Release notes  ")
    dialog.accept()
    qtbot.waitUntil(lambda: win.state.title == "Release notes", timeout=10_000)
    qtbot.waitUntil(lambda: win.windowTitle().startswith("Release notes"), timeout=5_000)
