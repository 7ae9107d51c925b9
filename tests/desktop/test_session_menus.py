"""No window is a dead end: the main window and a popped-out session window have the same
menus (File, Edit, View, Session, Help) and shortcuts, carried out by the controller."""

from __future__ import annotations

from typing import Any

from PySide6.QtWidgets import QDialog

from desktop.qt.controller import Controller
from desktop.qt.session_window import NewSessionDialog

from .test_session_window import new_session, open_window

MENUS = ["File", "Edit", "View", "Session", "Help"]


def shortcuts(win: Any) -> dict[str, str]:
    found = {name: a.shortcut().toString() for name, a in win.app_actions.items()}
    for name in ("rename_action", "stop_action", "composer_action", "latest_action"):
        found[name] = getattr(win, name).shortcut().toString()
    return found


def test_every_window_has_the_same_menus_and_shortcuts(qtbot: Any, controller: Controller) -> None:
    sid = new_session(qtbot, controller)
    main = controller.main
    win = open_window(qtbot, controller, sid, new_window=True)
    for w in (main, win):
        assert [a.text().replace("&", "") for a in w.menuBar().actions()] == MENUS
    keys = shortcuts(win)
    assert keys == shortcuts(main), "one shortcut everywhere"
    assert keys["new"] == "Ctrl+N"
    assert keys["find"] == "Ctrl+F"
    assert keys["settings"] == "Ctrl+,"
    assert keys["quit"] == "Ctrl+Q"
    assert keys["pop_out"] == "Ctrl+Shift+O"
    assert keys["rename_action"] == "F2"
    assert main.sidebar_action.shortcut().toString() == "Ctrl+Shift+S"
    # Without a session beside the sidebar, what needs one is off (and says so by being grey).
    assert main.current is None
    assert not main.rename_action.isEnabled()
    assert not main.app_actions["pop_out"].isEnabled()
    assert win.rename_action.isEnabled()


def test_a_session_window_reaches_every_app_action(qtbot: Any, controller: Controller) -> None:
    sid = new_session(qtbot, controller)
    win = open_window(qtbot, controller, sid, new_window=True)
    main = controller.main
    # Back to every session when the main window was closed.
    main.close()
    win.app_actions["sessions"].trigger()
    qtbot.waitUntil(lambda: main.isVisible(), timeout=5_000)
    # Ctrl+F from a session window: the main window's search, with the focus in it.
    main.hide()
    win.app_actions["find"].trigger()
    qtbot.waitUntil(lambda: main.isVisible(), timeout=5_000)
    assert main.sidebar.search.hasFocus() or not main.isActiveWindow()
    assert main.focusWidget() is main.sidebar.search
    # Ctrl+N from a session window: the new-session dialog, over the main window.
    win.app_actions["new"].trigger()
    qtbot.waitUntil(lambda: any(isinstance(d, NewSessionDialog) and d.isVisible()
                                for d in main.findChildren(QDialog)), timeout=5_000)
    # Pop out: the same session in a second window.
    win.app_actions["pop_out"].trigger()
    qtbot.waitUntil(lambda: len([w for w in controller.windows if w.session_id == sid]) == 2,
                    timeout=5_000)


def test_the_main_window_pops_its_session_out_and_hides_the_sidebar(
    qtbot: Any, controller: Controller
) -> None:
    sid = new_session(qtbot, controller)
    main = open_window(qtbot, controller, sid)
    assert main is controller.main
    main.app_actions["pop_out"].trigger()
    qtbot.waitUntil(lambda: [w.session_id for w in controller.windows] == [sid], timeout=5_000)
    assert main.session_id == sid, "the main window keeps showing it too"
    main.sidebar_action.trigger()
    assert not main.sidebar.isVisibleTo(main)
    main.app_actions["find"].trigger()  # searching brings the sidebar back
    assert main.sidebar.isVisibleTo(main)


def test_f2_renames_the_session(qtbot: Any, controller: Controller) -> None:
    sid = new_session(qtbot, controller)
    win = open_window(qtbot, controller, sid)
    win.rename_action.trigger()
    dialog = win.conversation.rename_dialog
    assert dialog.isVisible()
    dialog.setTextValue("  Release notes  ")
    dialog.accept()
    qtbot.waitUntil(lambda: win.conversation.state.title == "Release notes", timeout=10_000)
    qtbot.waitUntil(lambda: win.windowTitle().startswith("Release notes"), timeout=5_000)


def test_one_table_makes_every_windows_menus_and_palette(qtbot: Any, controller: Controller) -> None:
    """actions.py declares each command once: every window has each of them in the menus the
    table says, with its keys, the palette lists them (those that can run now), and no two
    commands share a key."""
    from desktop.qt import palette
    from desktop.qt.actions import APP_COMMANDS, CONVERSATION_COMMANDS
    from desktop.qt.actions import MENUS as TABLE

    sid = new_session(qtbot, controller)
    main = controller.main
    controller.open_session(sid)
    win = open_window(qtbot, controller, sid, new_window=True)
    keys: dict[str, str] = {}
    names = [c.name for c in APP_COMMANDS] + [c.name for c in CONVERSATION_COMMANDS]
    for name in names:
        action = main.app_actions.get(name) or main.conversation_actions[name]
        for key in action.shortcuts():
            text = key.toString()
            assert text not in keys, f"{text} is both {keys.get(text)} and {name}"
            keys[text] = name
    for w in (main, win):
        menus = {m.text(): list(m.menu().actions()) for m in w.menuBar().actions()  # type: ignore[attr-defined]
                 if m.menu() is not None}
        for title, entries in TABLE:
            shown = [a for a in menus[title] if not a.isSeparator()]
            for entry in entries:
                if entry in w.conversation_actions:
                    assert w.conversation_actions[entry] in shown, f"{entry} not in {title}"
                elif entry in w.app_actions:
                    assert w.app_actions[entry] in shown, f"{entry} not in {title}"
        listed = {palette.plain(a.text()) for a in palette.actions_of(w)}
        for key_name, action in w.conversation_actions.items():
            assert (palette.plain(action.text()) in listed) == action.isEnabled(), key_name
        assert palette.plain(w.app_actions["settings"].text()) in listed
