"""The app's one-line questions (Add a provider, Rename session) open wide enough to read:
their window title, their label and a long value show in full, not clipped."""

from __future__ import annotations

from typing import Any

from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import QInputDialog, QLabel, QLineEdit

from desktop.qt.controller import Controller
from desktop.qt.settings import SettingsDialog

from .test_session_window import new_session, open_window

LONG = "Refactor the sandbox's network profile for builds"
TITLE_BAR_PX = 100  # at least this much beside the title: the window manager's buttons


def readable(qtbot: Any, dialog: QInputDialog, value: str) -> None:
    qtbot.waitUntil(dialog.isVisible, timeout=5_000)
    bold = dialog.font()
    bold.setBold(True)
    title = dialog.windowTitle()
    assert dialog.width() >= QFontMetrics(bold).horizontalAdvance(title) + TITLE_BAR_PX, \
        f"the title “{title}” is clipped at {dialog.width()} px"
    assert dialog.minimumWidth() >= QFontMetrics(bold).horizontalAdvance(title) + TITLE_BAR_PX
    label = dialog.findChild(QLabel)
    assert label is not None
    assert label.width() >= label.sizeHint().width(), f"“{label.text()}” is clipped"
    field = dialog.findChild(QLineEdit)
    assert field is not None
    assert field.width() >= field.fontMetrics().horizontalAdvance(value) + 12, \
        f"a {len(value)}-character value does not show whole in {field.width()} px"


def test_add_a_provider_asks_in_a_dialog_wide_enough_to_read(
    qtbot: Any, controller: Controller
) -> None:
    controller.open_settings()
    settings = controller.settings
    assert isinstance(settings, SettingsDialog)
    qtbot.waitUntil(lambda: settings.config is not None, timeout=10_000)
    settings.add_button.click()
    dialog = settings.findChild(QInputDialog)
    assert dialog is not None
    assert dialog.windowTitle() == "Add a provider"
    readable(qtbot, dialog, "openrouter-with-a-long-name")
    dialog.setTextValue("second")
    dialog.accept()  # not modal: the answer comes back through the loop
    qtbot.waitUntil(lambda: settings.name_edit.text() == "second", timeout=5_000)
    assert settings.current is None, "a new provider's form, to fill in and save"


def test_rename_asks_in_a_dialog_wide_enough_to_read(qtbot: Any, controller: Controller) -> None:
    win = open_window(qtbot, controller, new_session(qtbot, controller))
    win.rename_action.trigger()
    dialog = win.conversation.rename_dialog
    assert dialog.windowTitle() == "Rename session"
    readable(qtbot, dialog, LONG)
