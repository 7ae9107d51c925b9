"""The command palette (Ctrl+K) finds and runs every action of the window it opens over."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt

from desktop.qt.controller import Controller
from desktop.qt.palette import CommandPalette, actions_of, matches, plain

from .test_session_window import new_session, open_window


def test_letters_in_order_match() -> None:
    assert matches("nse", "New session")
    assert matches("", "anything")
    assert matches("OPEN win", "Open in new window")
    assert not matches("sx", "Settings")
    assert not matches("ts", "Stop")
    assert plain("&New session…") == "New session"
    assert plain("Save && close") == "Save & close"


def palette_of(qtbot: Any, window: Any) -> CommandPalette:
    [opener] = [a for a in window.actions() if a.property("palette_opener")]
    assert opener.shortcut().toString() == "Ctrl+K"
    opener.trigger()  # (what Ctrl+K does in an active window; offscreen has none)
    qtbot.waitUntil(lambda: isinstance(window.property("commandPalette"), CommandPalette)
                    and window.property("commandPalette").isVisible(), timeout=5_000)
    found = window.property("commandPalette")
    assert isinstance(found, CommandPalette)
    return found


def test_ctrl_k_in_a_session_window_finds_rename_and_runs_it(qtbot: Any, controller: Controller) -> None:
    sid = new_session(qtbot, controller)
    win = open_window(qtbot, controller, sid, new_window=True)
    qtbot.waitExposed(win)
    names = {plain(a.text()) for a in actions_of(win)}
    assert {"New session", "All sessions", "Settings", "Quit", "Rename", "Open in new window",
            "Close window"} <= names
    assert "Command palette" not in names, "the palette does not list itself"
    found = palette_of(qtbot, win)
    qtbot.keyClicks(found.query, "renam")
    assert found.list.count() == 1
    qtbot.keyClick(found.query, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: win.conversation.rename_dialog.isVisible(), timeout=5_000)
    assert not found.isVisible()


def test_ctrl_k_in_the_main_window_opens_settings(qtbot: Any, controller: Controller) -> None:
    qtbot.waitExposed(controller.main)
    names = [plain(a.text()) for a in actions_of(controller.main)]
    assert len(names) == len(set(names)), "each command once"
    assert {"Group by day", "Group by folder", "Show sidebar", "Search sessions"} <= set(names)
    found = palette_of(qtbot, controller.main)
    qtbot.keyClicks(found.query, "sett")
    qtbot.keyClick(found.query, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: controller.settings is not None and controller.settings.isVisible(),
                    timeout=5_000)
