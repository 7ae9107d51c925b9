"""Edit one of your earlier messages into a new branch: the text to send there, and whether to
put the folder's files back as they were when that message was first sent (`session.fork`)."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QLabel,
    QPlainTextEdit,
    QVBoxLayout,
    QWidget,
)

from desktop.qt.compat import emit

EXPLAIN = ("The conversation up to this message is copied into a new session, which gets your "
           "edited message; this session stays as it is.")
RESTORE = "Also put files back as they were at this message"
RESTORE_WHY = ("Puts back every file the agent changed from this message on, as Undo does; "
               "without it, files stay as they are now")


class Editor(QPlainTextEdit):
    """Enter sends (the dialog's Send), Shift+Enter is a new line: as the message box."""

    send = Signal()

    def keyPressEvent(self, e: QKeyEvent) -> None:
        if e.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter) \
                and not e.modifiers() & Qt.KeyboardModifier.ShiftModifier:
            emit(self.send)
            return
        super().keyPressEvent(e)


class EditPromptDialog(QDialog):
    """Opened with the message's text, selected; accepted with a text that is not empty."""

    def __init__(self, text: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Edit and branch")
        self.setMinimumWidth(520)
        box = QVBoxLayout(self)
        words = QLabel(EXPLAIN)
        words.setWordWrap(True)
        words.setProperty("muted", True)
        self.editor = Editor()
        self.editor.setObjectName("editPrompt")
        self.editor.setAccessibleName("Edited message")
        self.editor.setAccessibleDescription("Enter sends it in a new branch, Shift+Enter starts a "
                                             "new line, Esc cancels")
        self.editor.setTabChangesFocus(True)
        self.editor.setPlainText(text)
        self.editor.selectAll()
        self.editor.send.connect(self._send)
        self.restore = QCheckBox(RESTORE)
        self.restore.setToolTip(RESTORE_WHY)
        self.restore.setAccessibleDescription(RESTORE_WHY)
        ok, cancel = QDialogButtonBox.StandardButton.Ok, QDialogButtonBox.StandardButton.Cancel
        buttons = QDialogButtonBox(ok | cancel)
        self.send_button = buttons.button(ok)
        self.send_button.setText("Send in a new branch")
        self.send_button.setProperty("primary", True)
        buttons.accepted.connect(self._send)
        buttons.rejected.connect(self.reject)
        self.editor.textChanged.connect(
            lambda: self.send_button.setEnabled(bool(self.text())))
        box.addWidget(words)
        box.addWidget(self.editor, 1)
        box.addWidget(self.restore)
        box.addWidget(buttons)
        self.editor.setFocus(Qt.FocusReason.OtherFocusReason)

    def text(self) -> str:
        return self.editor.toPlainText().strip()

    def _send(self) -> None:
        if self.text():
            self.accept()
