"""The changes panel against a real backend: the session's files by turn with their diffs, a
live edit while the turn runs, Undo of one file, Open in editor, and the panel remembered."""

from __future__ import annotations

import json
import stat
import threading
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QObject, QPoint, Qt, QUrl, Slot
from PySide6.QtGui import QDesktopServices
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QTreeWidgetItem, QTreeWidgetItemIterator

from desktop.qt import palette
from desktop.qt.changes import ChangesPanel
from desktop.qt.controller import Controller
from desktop.qt.session_window import Window
from tests.fakes.openai_server import FakeOpenAI, Reply

from .test_session_window import new_session, open_window, turn_done, type_and_send


def write_file(path: str, content: str) -> dict[str, Any]:
    return {"name": "write_file", "arguments": {"path": path, "content": content}}


def patch(path: str, old: str, new: str) -> dict[str, Any]:
    return {"name": "patch", "arguments": {"path": path, "old": old, "new": new}}


def open_panel(qtbot: Any, win: Window) -> ChangesPanel:
    win.changes.toggleViewAction().trigger()
    panel = win.changes.panel
    qtbot.waitUntil(lambda: panel.model.loaded, timeout=10_000)
    return panel


def reaches_the_edge(win: Window) -> bool:
    """The conversation runs to the window's right edge: nothing beside it takes room."""
    conv = win.conversation
    return conv.mapTo(win, QPoint(conv.width(), 0)).x() >= win.width() - 2


def items(panel: ChangesPanel) -> list[QTreeWidgetItem]:
    """Every row, as shown: each turn, then its files."""
    found = []
    it = QTreeWidgetItemIterator(panel.tree)
    while it.value() is not None:
        found.append(it.value())
        it += 1
    return found


def tree_rows(panel: ChangesPanel) -> list[str]:
    return [item.text(0).strip() for item in items(panel)]


def item_of(panel: ChangesPanel, turn_id: str, label: str) -> QTreeWidgetItem:
    for item in items(panel):
        key = item.data(0, Qt.ItemDataRole.UserRole)
        if key[0] == turn_id and item.text(0).strip() == label:
            return item
    raise AssertionError(f"no row {label} of {turn_id}: {tree_rows(panel)}")


def test_the_panel_lists_the_files_by_turn_with_their_diffs_and_undoes_one_file(
    qtbot: Any, controller: Controller, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    notes, plan = tmp_path / "notes.md", tmp_path / "plan.txt"
    notes.write_text("alpha\nbeta\n")
    sid = new_session(qtbot, controller, tmp_path)
    win = open_window(qtbot, controller, sid)
    fake_provider.script(Reply.calls(patch("notes.md", "alpha", "ALPHA")),
                         Reply.calls(write_file("plan.txt", "step one\n")), Reply(deltas=["Done."]))
    type_and_send(qtbot, win, "start the plan")
    qtbot.waitUntil(lambda: turn_done(win, 1), timeout=15_000)
    fake_provider.script(Reply.calls(patch("notes.md", "beta", "BETA")), Reply(deltas=["Done again."]))
    type_and_send(qtbot, win, "shout beta\nplease")
    qtbot.waitUntil(lambda: turn_done(win, 2), timeout=15_000)

    conv = win.conversation
    assert not win.changes.isVisible(), "closed at first"
    assert reaches_the_edge(win), "the conversation keeps the room"
    panel = open_panel(qtbot, win)
    assert win.changes.isVisible()
    qtbot.waitUntil(lambda: not reaches_the_edge(win) and win.changes.width() >= 300, timeout=5_000)
    qtbot.waitUntil(lambda: len(panel.model.turns) == 2, timeout=10_000)
    first = panel.model.turns[1].turn_id
    rows = tree_rows(panel)
    assert rows[0].endswith("shout beta"), rows  # the newest turn first, its prompt's first line
    assert rows[1:2] == ["notes.md"]
    assert rows[2].endswith("start the plan")
    assert rows[3:] == ["notes.md", "plan.txt"]
    assert panel.heading.text() == "3 files changed in 2 turns"
    assert win.focusWidget() is panel.tree, "opened, the keyboard is in its list"
    # The newest file is shown; another is chosen with the keyboard.
    assert "+BETA" in panel.diff.toPlainText()
    panel.tree.setFocus()
    panel.tree.setCurrentItem(item_of(panel, first, "notes.md"))
    QTest.keyClick(panel.tree, Qt.Key.Key_Down)  # to plan.txt
    assert panel.model.chosen == (first, str(plan))
    assert "+step one" in panel.diff.toPlainText()
    assert item_of(panel, first, "plan.txt").text(1) == "+1 −0 new"
    heading = items(panel)[2]
    panel.tree.setCurrentItem(heading)  # a turn's heading: all its files' diffs, no action
    assert "+ALPHA" in panel.diff.toPlainText()
    assert "+step one" in panel.diff.toPlainText()
    assert not panel.undo_button.isEnabled()
    assert not panel.open_button.isEnabled()
    panel.tree.setCurrentItem(item_of(panel, first, "notes.md"))
    shown = panel.diff.toPlainText()
    assert "+ALPHA" in shown
    assert "BETA" not in shown, "the turn's own change, not the later one"

    assert panel.undo_button.isEnabled()
    panel.undo_button.click()
    qtbot.waitUntil(lambda: notes.read_text() == "alpha\nbeta\n", timeout=10_000)
    assert plan.read_text() == "step one\n", "the turn's other file stays"
    qtbot.waitUntil(lambda: "Put back notes.md." in panel.note.text(), timeout=5_000)
    qtbot.waitUntil(lambda: item_of(panel, first, "notes.md").font(0).strikeOut(), timeout=10_000)
    assert "undone" in item_of(panel, first, "notes.md").text(1)
    assert not panel.undo_button.isEnabled(), "put back once"
    # Every window learns it from files.restored: the call's card says undone.
    qtbot.waitUntil(lambda: any(getattr(it, "undone", False) for it in conv.state.transcript.items),
                    timeout=5_000)
    assert panel.model.chosen == (first, str(notes))

    # Its title bar's close button (the theme's icon, named for a screen reader) closes it.
    assert win.changes.close_button.accessibleName() == "Close the changes panel"
    assert not win.changes.close_button.icon().isNull()
    win.changes.close_button.click()
    qtbot.waitUntil(lambda: not win.changes.isVisible(), timeout=5_000)
    qtbot.waitUntil(lambda: reaches_the_edge(win), timeout=5_000)
    assert not win.changes.toggleViewAction().isChecked()


def test_the_panel_follows_a_live_edit_while_the_turn_runs(
    qtbot: Any, controller: Controller, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    sid = new_session(qtbot, controller, tmp_path)
    win = open_window(qtbot, controller, sid, new_window=True)
    panel = open_panel(qtbot, win)
    assert panel.heading.text() == "No file changed in this session yet."
    release = threading.Event()
    fake_provider.script(Reply.calls(write_file("live.txt", "first line\n")),
                         Reply(deltas=["Working", " on it."], hang_after=1, release=release))
    type_and_send(qtbot, win, "write it live")
    try:
        qtbot.waitUntil(lambda: panel.model.file_count() == 1, timeout=15_000)
        assert win.conversation.state.busy, "the turn still runs"
        assert tree_rows(panel)[1:] == ["live.txt"]
        assert "+first line" in panel.diff.toPlainText()
        assert not panel.undo_button.isEnabled(), "no undo while the turn runs"
    finally:
        release.set()
    qtbot.waitUntil(lambda: turn_done(win, 1), timeout=15_000)
    qtbot.waitUntil(lambda: panel.undo_button.isEnabled(), timeout=5_000)


def test_open_in_editor_runs_visual_with_the_files_path(
    qtbot: Any, controller: Controller, fake_provider: FakeOpenAI, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    argv_file = tmp_path / "argv.txt"
    editor = tmp_path / "fake editor"  # (a space in its path: $VISUAL is split as a shell would)
    part = f"{argv_file}.part"  # renamed when written whole
    editor.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$@\" > '{part}' && mv '{part}' '{argv_file}'\n")
    editor.chmod(editor.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("VISUAL", f"'{editor}' --flag")
    sid = new_session(qtbot, controller, work)
    win = open_window(qtbot, controller, sid)
    fake_provider.script(Reply.calls(write_file("src/app.py", "print('hi')\n")), Reply(deltas=["Made it."]))
    type_and_send(qtbot, win, "make the app")
    qtbot.waitUntil(lambda: turn_done(win, 1), timeout=15_000)
    panel = open_panel(qtbot, win)
    qtbot.waitUntil(lambda: panel.open_button.isEnabled(), timeout=10_000)
    with qtbot.waitSignal(panel.opened, timeout=5_000) as opened:
        panel.open_button.click()
    target = str((work / "src" / "app.py").resolve())
    assert opened.args == [target]
    qtbot.waitUntil(argv_file.exists, timeout=10_000)
    assert argv_file.read_text().splitlines() == ["--flag", target]
    argv_file.unlink()
    panel.tree.setFocus()
    QTest.keyClick(panel.tree, Qt.Key.Key_Return)  # Enter opens it too
    qtbot.waitUntil(argv_file.exists, timeout=10_000)


def test_the_panel_is_a_view_command_and_each_window_remembers_it(
    qtbot: Any, make_controller: Any, tmp_path: Path
) -> None:
    controller: Controller = make_controller()
    sid = new_session(qtbot, controller, tmp_path)
    win = open_window(qtbot, controller, sid, new_window=True)
    action = win.changes.toggleViewAction()
    assert action.shortcut().toString() == "Ctrl+Shift+D"
    assert action in win.view_menu.actions()
    assert "Show changes panel" in [palette.plain(a.text()) for a in palette.actions_of(win)]
    assert not controller.main.changes.isVisible()
    action.trigger()
    qtbot.waitUntil(lambda: win.changes.isVisible(), timeout=5_000)
    controller.save_layout()
    saved = json.loads((controller.data_dir / "desktop.json").read_text())
    assert [s["session_id"] for s in saved["sessions"]] == [sid]
    assert saved["sessions"][0]["docks"]
    controller.quit()
    qtbot.waitUntil(lambda: not controller.windows, timeout=10_000)

    again: Controller = make_controller(restore=True)
    qtbot.waitUntil(lambda: len(again.windows) == 1, timeout=15_000)
    reopened = again.windows[0]
    qtbot.waitUntil(lambda: reopened.changes.isVisible(), timeout=5_000)
    assert reopened.changes.widget() is not None, "built as it was restored open"
    assert reopened.changes.panel.conversation is reopened.current
    assert not again.main.changes.isVisible(), "open in that window only"


class _Opened(QObject):
    """Takes the file URLs the desktop's opener is asked to open (QDesktopServices's own
    handler hook), so the test sees what would have been opened, and nothing runs."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    @Slot(QUrl)
    def take(self, url: QUrl) -> None:
        self.urls.append(url.toLocalFile())


def test_without_visual_the_default_opener_never_gets_a_file_that_could_run(
    qtbot: Any, controller: Controller, fake_provider: FakeOpenAI, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The agent wrote the files: a desktop entry (a launcher, which an opener may run) is
    refused with words saying why and what to do; a markdown file opens."""
    monkeypatch.delenv("VISUAL", raising=False)
    work = tmp_path / "work"
    work.mkdir()
    opened = _Opened()
    QDesktopServices.setUrlHandler("file", opened, "take")  # type: ignore[arg-type]  # (a str at run time, whatever the stub says)
    try:
        sid = new_session(qtbot, controller, work)
        win = open_window(qtbot, controller, sid)
        launcher = "[Desktop Entry]\nType=Application\nName=Docs\nExec=sh -c 'touch pwned'\n"
        fake_provider.script(Reply.calls(write_file("notes.md", "# Notes\n"),
                                         write_file("docs.desktop", launcher)),
                             Reply(deltas=["Wrote them."]))
        type_and_send(qtbot, win, "write the notes")
        qtbot.waitUntil(lambda: turn_done(win, 1), timeout=15_000)
        panel = open_panel(qtbot, win)
        qtbot.waitUntil(lambda: panel.model.file_count() == 2, timeout=10_000)
        turn = panel.model.turns[-1].turn_id
        panel.choose(turn, str((work / "docs.desktop").resolve()))
        assert not panel.open_in_editor()
        assert "could run as a program" in panel.note.text()
        assert "$VISUAL" in panel.note.text()
        assert opened.urls == []
        notes = str((work / "notes.md").resolve())
        panel.choose(turn, notes)
        assert panel.open_in_editor()
        assert opened.urls == [notes]
    finally:
        QDesktopServices.unsetUrlHandler("file")


def test_the_panel_is_built_when_first_opened_following_the_session_shown(
    qtbot: Any, controller: Controller
) -> None:
    """A window opening with the dock closed (every start, nearly) builds no panel; opened, the
    panel follows the conversation the window shows, switched to before it was built."""
    first, second = new_session(qtbot, controller), new_session(qtbot, controller)
    win = open_window(qtbot, controller, first)
    assert win.changes.widget() is None, "not built while closed"
    win = open_window(qtbot, controller, second)
    assert win.changes.widget() is None
    panel = open_panel(qtbot, win)
    assert win.changes.widget() is panel
    assert panel.conversation is win.current
    assert panel.model.session_id == second
