"""A session from start to end with the keyboard alone: a new session, a prompt, an approval
answered, a turn stopped, its answer regenerated, an earlier prompt edited into a branch and a
turn's file changes undone.  Every step is a key pressed where the focus is (no click, no call
of a widget's slot), so a step the keyboard cannot reach fails here."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QWidget

from desktop.qt.controller import Controller
from desktop.qt.session_window import NewSessionDialog
from desktop.state.transcript import AssistantItem, NoteItem, UserItem
from tests.fakes.openai_server import FakeOpenAI, Reply

from .test_keyboard import active, focused, press
from .test_session_window import turn_done

CTRL = Qt.KeyboardModifier.ControlModifier
SHIFT = Qt.KeyboardModifier.ShiftModifier
ALT = Qt.KeyboardModifier.AltModifier


def tab_to(qtbot: Any, widget: QWidget, limit: int = 30) -> None:
    """Tab until `widget` has the focus (as a person would)."""
    for _ in range(limit):
        if focused() is widget:
            return
        press(qtbot, Qt.Key.Key_Tab)
    raise AssertionError(f"Tab never reached {widget!r}; the focus is on {focused()!r}")


def shown_prompts(conv: Any) -> list[str]:
    return [it.text for it in conv.state.transcript.items
            if isinstance(it, UserItem) and not it.hidden]


def shown_answers(conv: Any) -> list[str]:
    return [it.text for it in conv.state.transcript.items
            if isinstance(it, AssistantItem) and not it.hidden and it.text]


def type_text(qtbot: Any, text: str) -> None:
    target = focused()
    assert target is not None, "the focus was lost"
    qtbot.keyClicks(target, text)


def test_a_whole_session_without_the_mouse(
    qtbot: Any, controller: Controller, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    main = controller.main
    active(qtbot, main)
    project = tmp_path / "project"
    project.mkdir()
    (project / "old").mkdir()

    # Ctrl+N: the new-session dialog; a title, then the folder (typed over), then Enter.
    press(qtbot, Qt.Key.Key_N, CTRL)
    qtbot.waitUntil(lambda: isinstance(getattr(main, "new_dialog", None), NewSessionDialog)
                    and main.new_dialog.isVisible(), timeout=5_000)
    dialog = main.new_dialog
    qtbot.waitUntil(lambda: focused() is dialog.title, timeout=5_000)
    type_text(qtbot, "Walk-through")
    tab_to(qtbot, dialog.folder)
    press(qtbot, Qt.Key.Key_A, CTRL)
    type_text(qtbot, str(project))
    press(qtbot, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: main.current is not None and main.conversation.state.loaded,
                    timeout=10_000)
    conv = main.conversation
    active(qtbot, main)
    qtbot.waitUntil(lambda: focused() is conv.composer, timeout=5_000)

    # A prompt whose command needs the person: Ctrl+Shift+A goes to the card, Enter allows.
    fake_provider.script(
        Reply.calls({"name": "terminal", "arguments": {"command": f"rm -rf {project}/old"}}),
        Reply(deltas=["Removed it."]))
    type_text(qtbot, "remove the old folder")
    press(qtbot, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: len(conv.cards) == 1, timeout=15_000)
    card = next(iter(conv.cards.values()))
    qtbot.waitUntil(lambda: main.approval_action.isEnabled(), timeout=5_000)
    press(qtbot, Qt.Key.Key_A, CTRL | SHIFT)
    assert focused() is card.buttons["once"]
    press(qtbot, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: turn_done(main, 1) and not conv.cards, timeout=20_000)
    assert not (project / "old").exists()
    qtbot.waitUntil(lambda: focused() is conv.composer, timeout=5_000)

    # A prompt that writes a file; Ctrl+Alt+Z puts it back (Ctrl+Shift+Z is the message box's
    # own Redo).
    fake_provider.script(
        Reply.calls({"name": "write_file", "arguments": {"path": "notes.txt", "content": "hi\n"}}),
        Reply(deltas=["Wrote notes.txt."]))
    type_text(qtbot, "write a note")
    press(qtbot, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: turn_done(main, 2), timeout=20_000)
    assert (project / "notes.txt").read_text() == "hi\n"
    qtbot.waitUntil(lambda: main.undo_action.isEnabled(), timeout=5_000)
    press(qtbot, Qt.Key.Key_Z, CTRL | ALT)
    qtbot.waitUntil(lambda: not (project / "notes.txt").exists(), timeout=10_000)
    qtbot.waitUntil(lambda: not main.undo_action.isEnabled(), timeout=5_000)

    # A turn that hangs mid-answer: Esc stops it, wherever the focus is.
    release = threading.Event()
    fake_provider.script(Reply(deltas=["Thinking", " about it"], hang_after=1, release=release))
    try:
        active(qtbot, main)
        press(qtbot, Qt.Key.Key_L, CTRL)
        assert focused() is conv.composer
        type_text(qtbot, "think about it")
        press(qtbot, Qt.Key.Key_Return)
        qtbot.waitUntil(lambda: conv.state.status == "running" and main.stop_action.isEnabled(),
                        timeout=15_000)
        press(qtbot, Qt.Key.Key_Escape)
        qtbot.waitUntil(lambda: any(isinstance(it, NoteItem) and it.kind == "interrupted"
                                    for it in conv.state.transcript.items), timeout=10_000)
        qtbot.waitUntil(lambda: not conv.state.busy, timeout=15_000)
    finally:
        release.set()
    assert QApplication.activeWindow() is main

    # Ctrl+Shift+R answers the stopped prompt again in place: no second bubble of it.
    fake_provider.script(Reply(deltas=["Thought it through."]))
    press(qtbot, Qt.Key.Key_R, CTRL | SHIFT)
    qtbot.waitUntil(lambda: turn_done(main, 3) and shown_answers(conv)[-1] == "Thought it through.",
                    timeout=20_000)
    assert shown_prompts(conv) == ["remove the old folder", "write a note", "think about it"]

    # Edit and branch the first prompt: Shift+Tab into the transcript, Home to the first
    # message, Ctrl+E, the text typed over, Enter.  The branch opens in this window.
    original = main.session_id
    fake_provider.script(Reply(deltas=["Branched: nothing removed."]))
    for _ in range(10):
        if focused() is conv.view:
            break
        press(qtbot, Qt.Key.Key_Backtab, SHIFT)
    assert focused() is conv.view
    press(qtbot, Qt.Key.Key_Home)
    press(qtbot, Qt.Key.Key_E, CTRL)
    qtbot.waitUntil(lambda: conv.edit_dialog is not None and conv.edit_dialog.isVisible(),
                    timeout=5_000)
    editor_dialog = conv.edit_dialog
    assert editor_dialog is not None
    qtbot.waitUntil(lambda: focused() is editor_dialog.editor, timeout=5_000)
    assert editor_dialog.editor.toPlainText() == "remove the old folder"
    press(qtbot, Qt.Key.Key_A, CTRL)
    type_text(qtbot, "list the old folder instead")
    press(qtbot, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: main.session_id != original, timeout=10_000)
    branch = main.conversation
    qtbot.waitUntil(lambda: turn_done(main, 1)
                    and shown_answers(branch)[-1] == "Branched: nothing removed.", timeout=20_000)
    assert shown_prompts(branch) == ["list the old folder instead"]
    made = branch.state.session
    assert made is not None
    assert made.forked_from == original
