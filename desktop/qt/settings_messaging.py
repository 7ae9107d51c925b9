"""Settings → Messaging: the backend's doors, each as a card, and the form that sets a Matrix door
up or changes it.

The form sends what the person typed.  Test connection is `door.test`: the homeserver is asked
for real whether it answers and whether the access token is valid and the account's; nothing is
saved.  Save is `door.set`: the backend writes `[doors.matrix]` and keeps the token in the
system keyring (never config.toml), and starts the door at once; its card then follows the
door live (`door.state`, desktop/qt/doors.py).  The token field never echoes and is never
filled back: editing a saved door shows its homeserver, account and allowed users (from
`config.get`), and an empty token field keeps the stored token.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import msgspec
import shiboken6
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QFormLayout,
    QFrame,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from desktop.qt import theme
from desktop.qt.aio import spawn
from desktop.qt.compat import emit, set_placeholder
from desktop.qt.doors import DoorWatch
from desktop.qt.doors_view import DoorCard
from desktop.state import doors as words
from shared import protocol as p
from shared.client import InvalidParams
from shared.config import ConfigView, MatrixDoorConfig
from shared.methods import DoorSet, DoorTest

if TYPE_CHECKING:
    from desktop.link import Link

TEST_TIMEOUT_S = 45.0  # door.test waits up to 10 s for each of its (at most three) requests
NEW_TOKEN = "Paste the account's access token"
KEEP_TOKEN = "Stored in the keyring: leave empty to keep it"


def _say(label: QLabel, text: str, tone: str = "") -> None:
    """A status line: its text in its tone (success, danger, ...), hidden when empty."""
    if not shiboken6.isValid(label):
        return  # (the page was closed meanwhile)
    label.setText(text)
    label.setVisible(bool(text))
    theme.restyle(label, tone=tone)


def _plain(selectable: bool = False) -> QLabel:
    label = QLabel()
    label.setWordWrap(True)
    label.setTextFormat(Qt.TextFormat.PlainText)  # the homeserver's words, not markup
    if selectable:
        label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    label.hide()
    return label


class DoorForm(QGroupBox):
    """A Matrix door's settings: homeserver, account, access token (not echoed), allowed users;
    Test connection and Save."""

    tested = Signal(object)  # door.test's DoorTestResult
    saved = Signal(object)  # door.set's DoorSetResult
    cancelled = Signal()

    def __init__(self, link: Link, parent: QWidget | None = None) -> None:
        super().__init__("Set up a Matrix door", parent)
        self.setObjectName("doorForm")
        self.link = link
        self.editing = False  # a saved door is shown: an empty token field keeps its token
        self.busy: set[str] = set()  # "test", "save"
        lay = QVBoxLayout(self)
        form = QFormLayout()
        form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.WrapLongRows)
        self.homeserver_edit = QLineEdit()
        self.homeserver_edit.setPlaceholderText("https://matrix.org")
        self.homeserver_edit.setAccessibleName(words.FIELD_LABELS["homeserver"])
        self.homeserver_edit.setToolTip("The homeserver of the agent's account, as your chat "
                                        "app shows it when you sign in")
        self.account_edit = QLineEdit()
        self.account_edit.setPlaceholderText("@my-agent:matrix.org")
        self.account_edit.setAccessibleName(words.FIELD_LABELS["user_id"])
        self.account_edit.setToolTip("The Matrix user id the agent speaks as")
        self.token_edit = QLineEdit()
        self.token_edit.setEchoMode(QLineEdit.EchoMode.Password)
        self.token_edit.setPlaceholderText(NEW_TOKEN)
        self.token_edit.setAccessibleName(words.FIELD_LABELS["access_token"])
        self.token_edit.setAccessibleDescription("Not shown as you type; kept in the system "
                                                 "keyring, never in config.toml")
        self.users_edit = QPlainTextEdit()
        self.users_edit.setObjectName("allowedUsers")
        self.users_edit.setTabChangesFocus(True)
        self.users_edit.setAccessibleName(words.FIELD_LABELS["allowed_users"])
        self.users_edit.setAccessibleDescription("The Matrix user ids who may prompt the agent "
                                                 "and answer its approvals, one per line")
        set_placeholder(self.users_edit, "@me:matrix.org\n(one per line; nobody else may use it)")
        lines = self.users_edit.fontMetrics().lineSpacing()
        self.users_edit.setFixedHeight(4 * lines + 14)
        form.addRow(f"{words.FIELD_LABELS['homeserver']}:", self.homeserver_edit)
        form.addRow(f"{words.FIELD_LABELS['user_id']}:", self.account_edit)
        form.addRow(f"{words.FIELD_LABELS['access_token']}:", self.token_edit)
        form.addRow(f"{words.FIELD_LABELS['allowed_users']}:", self.users_edit)
        lay.addLayout(form)
        self.help_label = QLabel(words.TOKEN_HELP)
        self.help_label.setWordWrap(True)
        self.help_label.setProperty("muted", True)
        lay.addWidget(self.help_label)
        self.result_label = _plain(selectable=True)
        self.result_label.setObjectName("doorFormResult")
        self.result_label.setAccessibleName("Result")
        lay.addWidget(self.result_label)
        actions = QHBoxLayout()
        self.test_button = QPushButton("Test connection")
        self.test_button.setAccessibleDescription(
            "Ask the homeserver whether it answers and accepts the token for this account; "
            "nothing is saved")
        self.test_button.clicked.connect(self.test)
        self.progress = QProgressBar()
        self.progress.setRange(0, 0)
        self.progress.setAccessibleName("Working")
        self.progress.setMaximumHeight(8)
        self.progress.setTextVisible(False)
        self.progress.hide()
        self.cancel_button = QPushButton("Close")
        self.cancel_button.setAccessibleDescription("Close the form; what was not saved is lost")
        self.cancel_button.clicked.connect(lambda: emit(self.cancelled))
        self.save_button = QPushButton("Save")
        self.save_button.setProperty("primary", True)
        self.save_button.setAccessibleDescription(
            "Save the door and start it; the token goes to the system keyring")
        self.save_button.clicked.connect(self.save)
        actions.addWidget(self.test_button)
        actions.addWidget(self.progress, 1)
        actions.addStretch(1)
        actions.addWidget(self.cancel_button)
        actions.addWidget(self.save_button)
        lay.addLayout(actions)
        for edit in (self.homeserver_edit, self.account_edit, self.token_edit):
            edit.returnPressed.connect(self.save)

    # --- what it shows ---------------------------------------------------------------

    def start_new(self) -> None:
        """An empty form for a door not saved yet."""
        self.editing = False
        self.setTitle("Set up a Matrix door")
        for edit in (self.homeserver_edit, self.account_edit, self.token_edit):
            edit.clear()
        self.users_edit.setPlainText("")
        self.token_edit.setPlaceholderText(NEW_TOKEN)
        _say(self.result_label, "")

    def edit(self, saved: MatrixDoorConfig) -> None:
        """The saved door's settings, never its token (an empty field keeps it)."""
        self.editing = True
        self.setTitle("Matrix door")
        self.homeserver_edit.setText(saved.homeserver)
        self.account_edit.setText(saved.user_id)
        self.users_edit.setPlainText("\n".join(saved.allowed_users))
        self.token_edit.clear()
        self.token_edit.setPlaceholderText(KEEP_TOKEN)
        _say(self.result_label, "")

    def values(self) -> tuple[str, str, str | None, list[str]]:
        token = self.token_edit.text().strip()
        return (self.homeserver_edit.text().strip(), self.account_edit.text().strip(),
                token or None, words.parse_users(self.users_edit.toPlainText()))

    def _missing(self, homeserver: str, account: str, token: str | None) -> str:
        """What must be filled in before asking the backend, in words; "" when nothing."""
        if not homeserver:
            return f"{words.FIELD_LABELS['homeserver']}: give the homeserver's address (https://…)."
        if not account:
            return f"{words.FIELD_LABELS['user_id']}: give the agent's user id (@name:server)."
        if token is None and not self.editing:
            return f"{words.FIELD_LABELS['access_token']}: {NEW_TOKEN.lower()}."
        return ""

    def _busy(self, what: str, on: bool) -> None:
        (self.busy.add if on else self.busy.discard)(what)
        self.progress.setVisible(bool(self.busy))
        self.test_button.setEnabled("test" not in self.busy)
        self.test_button.setText("Testing…" if "test" in self.busy else "Test connection")
        self.save_button.setEnabled("save" not in self.busy)

    # --- test and save ---------------------------------------------------------------

    def test(self) -> None:
        if "test" in self.busy:
            return
        homeserver, account, token, _users = self.values()
        missing = self._missing(homeserver, account, token)
        if missing:
            _say(self.result_label, missing, "danger")
            return
        _say(self.result_label, f"Asking {homeserver}…")
        self._busy("test", True)
        request = DoorTest(homeserver=homeserver, user_id=account, access_token=token)
        spawn(self._test(request), self._failed("test"))

    async def _test(self, request: DoorTest) -> None:
        try:
            result = await self.link.call(request, timeout=TEST_TIMEOUT_S)
        except InvalidParams as exc:
            self._refused("test", exc, [])
            return
        if not shiboken6.isValid(self):
            return
        self._busy("test", False)
        _say(self.result_label, *words.test_words(result))
        emit(self.tested, result)

    def save(self) -> None:
        if "save" in self.busy:
            return
        homeserver, account, token, users = self.values()
        missing = self._missing(homeserver, account, token)
        if missing:
            _say(self.result_label, missing, "danger")
            return
        _say(self.result_label, "Saving…")
        self._busy("save", True)
        request = DoorSet(homeserver=homeserver, user_id=account, allowed_users=users,
                          access_token=token)
        spawn(self._save(request, users), self._failed("save"))

    async def _save(self, request: DoorSet, users: list[str]) -> None:
        try:
            result = await self.link.call(request)
        except InvalidParams as exc:
            self._refused("save", exc, users)
            return
        if not shiboken6.isValid(self):
            return
        self._busy("save", False)
        self.token_edit.clear()  # stored: never kept in the form, never shown back
        self.editing = True
        self.token_edit.setPlaceholderText(KEEP_TOKEN)
        _say(self.result_label, *words.saved_words(result))
        emit(self.saved, result)

    def _refused(self, what: str, exc: InvalidParams, users: list[str]) -> None:
        if shiboken6.isValid(self):
            self._busy(what, False)
            _say(self.result_label, words.form_error(exc.field, exc.message, users), "danger")

    def _failed(self, what: str) -> Callable[[str], None]:
        def failed(why: str) -> None:
            if shiboken6.isValid(self):
                self._busy(what, False)
                _say(self.result_label, why, "danger")
        return failed


class MessagingPage(QWidget):
    """Each door of the dialog's backend as a card (Edit… opens the form on it), or the form
    for a first door."""

    open_requested = Signal(str)  # a bound room's session id

    def __init__(self, link: Link, reload_config: Callable[[], None] = lambda: None,
                 parent: QWidget | None = None) -> None:
        """`reload_config`: asks the dialog to fetch the config again (after a save, so an
        edit shows what was saved)."""
        super().__init__(parent)
        self.link = link
        self.reload_config = reload_config
        self.watch = DoorWatch.of(link)
        self.doors_config: MatrixDoorConfig | None = None  # the saved [doors.matrix], if any
        self.form_open = False  # the person opened the form on a listed door (Edit…)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setObjectName("messagingScroll")  # (transparent: the page's own background)
        scroll.setStyleSheet("QScrollArea#messagingScroll, QWidget#messagingInner "
                             "{ background: transparent; }")
        scroll.viewport().setAutoFillBackground(False)
        inner = QWidget()
        inner.setObjectName("messagingInner")
        lay = QVBoxLayout(inner)
        intro = QLabel("A messaging door lets the people you allow talk to Turnkey from a chat "
                       "app; each room gets a session of its own, listed here and marked in "
                       "the sidebar.")
        intro.setWordWrap(True)
        lay.addWidget(intro)
        self.empty = QLabel(words.HOW_TO)
        self.empty.setWordWrap(True)
        self.empty.setProperty("muted", True)
        self.empty.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        lay.addWidget(self.empty)
        self.cards_box = QVBoxLayout()
        self.cards_box.setContentsMargins(0, 8, 0, 0)
        self.cards_box.setSpacing(18)
        lay.addLayout(self.cards_box)
        self.cards: list[DoorCard] = []
        self.form = DoorForm(link)
        self.form.saved.connect(self._saved)
        self.form.cancelled.connect(self._close_form)
        lay.addWidget(self.form)
        lay.addStretch(1)
        scroll.setWidget(inner)
        outer.addWidget(scroll)
        self.watch.changed.connect(self.refresh)
        self.refresh()

    def show_config(self, config: ConfigView) -> None:
        """The dialog's config (config.get): what Edit… fills the form with."""
        self.doors_config = config.doors.matrix
        if not self.watch.doors and not self.form.editing and self.doors_config is not None \
                and not self._typed():
            self.form.edit(self.doors_config)  # saved but not running (disabled): shown as saved
        self.refresh()

    def refresh(self) -> None:
        if not shiboken6.isValid(self):
            return
        doors = self.watch.doors
        while len(self.cards) < len(doors):
            card = DoorCard(offer_edit=True)
            card.open_requested.connect(lambda sid: emit(self.open_requested, sid))
            card.edit_requested.connect(self.edit)
            self.cards_box.addWidget(card)
            self.cards.append(card)
        while len(self.cards) > len(doors):
            card = self.cards.pop()
            self.cards_box.removeWidget(card)
            card.deleteLater()
        for card, door in zip(self.cards, doors, strict=True):
            card.show_door(door)
        self.empty.setVisible(not doors and self.doors_config is None)
        # A first door: the form is the page.  Once one is listed, it opens from its card.
        self.form.setVisible(not doors or self.form_open)
        self.form.cancel_button.setVisible(bool(doors))

    def edit(self, door: p.DoorStatus | None = None) -> None:
        """Opens the form on the saved door's settings (never its token)."""
        if self.doors_config is not None:
            self.form.edit(self.doors_config)
        elif door is not None:  # (the config is still on its way: what the door reports)
            self.form.start_new()
            self.form.editing = True
            self.form.token_edit.setPlaceholderText(KEEP_TOKEN)
            self.form.account_edit.setText(door.account)
            self.form.users_edit.setPlainText("\n".join(door.allowed_users))
        self.form_open = True
        self.refresh()
        self.form.homeserver_edit.setFocus()

    def _close_form(self) -> None:
        self.form_open = False
        self.refresh()

    def _saved(self, result: p.DoorSetResult) -> None:
        """The door is listed at once (its card follows it live); the form stays open on
        what was saved, saying so, until closed."""
        self.form_open = True
        homeserver, account, _token, users = self.form.values()
        # What Edit… shows until the config comes again (asked for now) with the rest of it.
        saved = self.doors_config or MatrixDoorConfig(homeserver=homeserver, user_id=account)
        self.doors_config = msgspec.structs.replace(
            saved, homeserver=homeserver.rstrip("/"), user_id=account, allowed_users=users,
            enabled=True)
        self.watch.saw(result.door)
        self.reload_config()

    def _typed(self) -> bool:
        return any(e.text() for e in (self.form.homeserver_edit, self.form.account_edit,
                                      self.form.token_edit)) or bool(self.form.users_edit.toPlainText())
