"""File ▸ Connect to a remote backend…: a backend on another computer, beside this one's.

The person pastes the connection string `turnkey token create` printed there
(`turnkey://HOST:PORT?token=...&fp=...`, shared/remote.py) and may name the computer.  A
string that does not parse is explained under the field; one that parses is tried at once,
and only a backend that answers (with the pinned certificate and a token it knows) is added:
its sessions get a section of the sidebar, and the pairing is remembered across runs (the
token in the system keyring, desktop/pairings.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QLabel,
    QLineEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from desktop.qt.aio import spawn
from desktop.qt.compat import emit
from shared.client import BackendNotFound
from shared.remote import BadConnectionString, RemoteTarget, parse

PLACEHOLDER = "turnkey://HOST:PORT?token=…&fp=…"

Connect = Callable[[RemoteTarget, str], Awaitable[object]]  # the target, the name given


class RemoteDialog(QDialog):
    """The connection string field, what is wrong with it, and Connect."""

    connected = Signal(str)  # the host, once the app uses it
    failed = Signal(str)  # what the person was told

    def __init__(self, connect: Connect, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._connect = connect
        self.setWindowTitle("Connect to a remote backend")
        self.setMinimumWidth(560)
        box = QVBoxLayout(self)
        box.setSpacing(10)
        intro = QLabel("Paste the connection string that <b>turnkey token create</b> printed on "
                       "the other computer. Its certificate fingerprint is checked; nothing "
                       "else is trusted. Its sessions then show in the sidebar beside this "
                       "computer's, and their tools run there. The pairing is remembered; its "
                       "token is kept in the system keyring.")
        intro.setWordWrap(True)
        self.field = QLineEdit()
        self.field.setAccessibleName("Connection string")
        self.field.setAccessibleDescription("The turnkey:// string, with its token and fingerprint")
        self.field.setPlaceholderText(PLACEHOLDER)
        self.field.setEchoMode(QLineEdit.EchoMode.Password)  # it holds a token
        self.label = QLineEdit()
        self.label.setAccessibleName("Name")
        self.label.setAccessibleDescription("What the sidebar calls that computer")
        self.label.setPlaceholderText("Name (optional), e.g. build-box")
        self.error = QLabel()  # words from the other computer too: never read as markup
        self.error.setWordWrap(True)
        self.error.setTextFormat(Qt.TextFormat.PlainText)
        self.error.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.error.setProperty("tone", "danger")
        self.error.hide()
        self.field.textChanged.connect(lambda _: self.error.hide())
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel)
        self.connect_button = QPushButton("Connect")
        self.connect_button.setProperty("primary", True)
        self.connect_button.setDefault(True)
        buttons.addButton(self.connect_button, QDialogButtonBox.ButtonRole.AcceptRole)
        buttons.accepted.connect(self.attempt)
        buttons.rejected.connect(self.reject)
        for widget in (intro, self.field, self.label, self.error):
            box.addWidget(widget)
        box.addWidget(buttons)
        self.adjustSize()  # as tall as its contents, no gaps

    def attempt(self) -> None:
        """Connect: parse, then try the backend; the dialog closes only when it answered."""
        try:
            target = parse(self.field.text())
        except BadConnectionString as exc:
            self._fail(str(exc))
            return
        self.connect_button.setEnabled(False)
        self.connect_button.setText("Connecting…")
        spawn(self._go(target))

    async def _go(self, target: RemoteTarget) -> None:
        try:
            await self._connect(target, self.label.text().strip())
        except BackendNotFound as exc:
            self._fail(str(exc))
            return
        finally:
            self.connect_button.setEnabled(True)
            self.connect_button.setText("Connect")
        emit(self.connected, target.host)
        self.accept()

    def _fail(self, message: str) -> None:
        text = message[:1].upper() + message[1:]
        self.error.setText(text)
        self.error.show()
        self.adjustSize()  # a long message (two fingerprints) shows whole
        emit(self.failed, text)
