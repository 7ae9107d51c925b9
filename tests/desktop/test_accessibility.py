"""Every interactive widget has a name assistive technology can read (what a screen reader
says for it: its accessible name, a button's text, a form label's buddy), in every window
and dialog, with the moving parts (an approval card, a queued message) on screen."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtGui import QAccessible
from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractItemView,
    QAbstractSpinBox,
    QComboBox,
    QDialog,
    QLineEdit,
    QPlainTextEdit,
    QTextEdit,
    QWidget,
)

from desktop.qt.controller import Controller
from desktop.qt.settings import SettingsDialog
from tests.fakes.openai_server import FakeOpenAI, Reply

from .conftest import drive
from .test_session_window import new_session, open_window, type_and_send

INTERACTIVE = (QAbstractButton, QAbstractItemView, QComboBox, QLineEdit, QPlainTextEdit,
               QTextEdit, QAbstractSpinBox)


def unnamed(root: QWidget) -> list[str]:
    """The interactive widgets shown in `root` that assistive technology cannot name."""
    found = []
    for widget in [root, *root.findChildren(QWidget)]:
        if not isinstance(widget, INTERACTIVE) or not widget.isVisibleTo(root):
            continue
        iface = QAccessible.queryAccessibleInterface(widget)
        name = iface.text(QAccessible.Text.Name) if iface is not None else ""
        if not name.strip():
            found.append(f"{type(widget).__name__} {widget.objectName()!r} in {type(root).__name__}")
    return found


def test_every_control_of_every_window_has_a_name(
    qtbot: Any, controller: Controller, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    from shared.methods import PromptSubmit

    fake_provider.script(Reply.calls({"name": "terminal", "arguments": {"command": "rm -rf build"}}),
                         Reply(deltas=["ok"]), Reply(deltas=["second"]))
    sid = new_session(qtbot, controller, tmp_path)
    win = open_window(qtbot, controller, sid)
    type_and_send(qtbot, win, "clean")
    qtbot.waitUntil(lambda: len(win.conversation.cards) == 1, timeout=15_000)
    drive(qtbot, win.link.call(PromptSubmit(session_id=sid, request_id="queued-1", text="next")))
    qtbot.waitUntil(lambda: len(win.conversation.queue_rows) == 1, timeout=10_000)
    win.rename_action.trigger()
    controller.main.new_session()
    controller.open_settings()
    settings = controller.settings
    assert isinstance(settings, SettingsDialog)
    qtbot.waitUntil(lambda: settings.config is not None, timeout=10_000)
    roots: list[QWidget] = [controller.main, win, settings, win.conversation.rename_dialog,
                            *[d for d in controller.main.findChildren(QDialog) if d.isVisible()]]
    missing = [entry for root in roots for entry in unnamed(root)]
    assert not missing, "interactive widgets without an accessible name:\n  " + "\n  ".join(missing)
    win.conversation.answer(next(iter(win.conversation.cards)), "deny")
    qtbot.waitUntil(lambda: not win.conversation.cards, timeout=10_000)


def test_the_check_catches_an_unnamed_control(qtbot: Any) -> None:
    root = QWidget()
    qtbot.addWidget(root)
    QLineEdit(root)
    assert unnamed(root) == ["QLineEdit '' in QWidget"]
