"""Messaging doors (Matrix) in the app: a row per door at the foot of the sidebar, and a card
with everything about one door (in a popover from that row, and on the settings' Messaging
page, desktop/qt/settings_messaging.py).

The row says the state at a glance ("Matrix · connected as @agent:server" beside a green
dot); a failing door's row is outlined in the danger colour and says why, and a click opens
its card, where the whole reason is selectable.  With no door configured nothing is shown in
the sidebar: the app looks as it did before doors.  Everything a door reports is the
backend's or the platform's text (a room's name is whatever its members chose), so it is
always shown as plain text, never as markup.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import TYPE_CHECKING

import shiboken6
from PySide6.QtCore import QPoint, Qt, Signal
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from desktop.qt import theme
from desktop.qt.compat import emit
from desktop.qt.doors import DoorWatch
from desktop.qt.marks import Badge, dot
from desktop.state import doors as words
from shared import protocol as p

if TYPE_CHECKING:
    from desktop.link import Link



def tone_color(tone: str) -> str:
    return str(getattr(theme.colors(), tone, theme.colors().muted))


def plain_tooltip(text: str) -> str:
    """A tooltip that shows `text` as it is: Qt reads a tooltip that looks like markup as
    markup, and a room's name or a failure's words are not ours (a room named "<img src=…>")."""
    return f"<p style='white-space:pre-wrap'>{html.escape(text, quote=False)}</p>"


def _plain(text: str = "", selectable: bool = False) -> QLabel:
    """A label for the backend's or the platform's words: wrapped, never read as markup."""
    label = QLabel(text)
    label.setWordWrap(True)
    label.setTextFormat(Qt.TextFormat.PlainText)
    if selectable:
        label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    return label


class DoorBadge(Badge):
    """A door's state as the MCP page shows a server's: a rounded label in the state's colour."""

    def set_state(self, state: str) -> None:
        self.state = state
        said, _tone = words.STATES.get(state, (state, "muted"))
        self.setText(f"● {said.capitalize()}")
        self.setAccessibleName(f"State: {said}")
        self._repaint()

    def _repaint(self, _scheme: str = "") -> None:
        if not shiboken6.isValid(self):
            return
        color = tone_color(words.STATES.get(self.state, ("", "muted"))[1])
        t = theme.tokens()
        self.setStyleSheet(
            f"QLabel#mcpBadge {{ color: {color}; background: {t.surface}; "
            f"border: 1px solid {color}; border-radius: 9px; padding: 1px 8px; "
            "font-weight: 600; }")


class DoorCard(QFrame):
    """Everything about one door: state and since when, its account, who may use it, the
    rooms bound to sessions (a click opens the session), and why it fails."""

    open_requested = Signal(str)  # a bound room's session id
    edit_requested = Signal(object)  # the DoorStatus whose settings to change

    def __init__(self, parent: QWidget | None = None, offer_edit: bool = False) -> None:
        super().__init__(parent)
        self.setObjectName("doorCard")
        self.offer_edit = offer_edit  # a button to change its settings (Settings only)
        self.door: p.DoorStatus | None = None
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        head = QHBoxLayout()
        self.title = QLabel()
        self.title.setTextFormat(Qt.TextFormat.PlainText)
        font = self.title.font()
        font.setBold(True)
        font.setPointSizeF(font.pointSizeF() * 1.15)
        self.title.setFont(font)
        self.badge = DoorBadge()
        self.since = QLabel()
        self.since.setProperty("muted", True)
        head.addWidget(self.title)
        head.addWidget(self.badge)
        head.addWidget(self.since)
        head.addStretch(1)
        lay.addLayout(head)
        self.detail = _plain(selectable=True)
        self.detail.setObjectName("doorDetail")
        self.detail.setAccessibleName("Why the door is failing")
        lay.addWidget(self.detail)
        self.account = _plain(selectable=True)
        self.allowed = _plain(selectable=True)
        lay.addWidget(self.account)
        lay.addWidget(self.allowed)
        rooms_title = QLabel("Rooms bound to sessions")
        rooms_title.setProperty("muted", True)
        lay.addWidget(rooms_title)
        self.rooms_box = QVBoxLayout()
        self.rooms_box.setSpacing(2)
        lay.addLayout(self.rooms_box)
        self.room_buttons: list[QPushButton] = []
        self.no_rooms = QLabel("None yet: a room gets a session at an allowed user's first "
                               "message there.")
        self.no_rooms.setWordWrap(True)
        self.no_rooms.setProperty("muted", True)
        lay.addWidget(self.no_rooms)
        self.edit_button = QPushButton("Edit…")
        self.edit_button.setAccessibleDescription(
            "Change the door's homeserver, account, access token or allowed users")
        self.edit_button.clicked.connect(lambda: emit(self.edit_requested, self.door))
        self.edit_button.setVisible(False)
        edit_row = QHBoxLayout()
        edit_row.addWidget(self.edit_button)
        edit_row.addStretch(1)
        lay.addLayout(edit_row)

    def show_door(self, door: p.DoorStatus) -> None:
        self.door = door
        said, tone = words.state_words(door)
        self.title.setText(words.title(door))
        self.badge.set_state(door.state)
        self.since.setText(words.since_words(door.since))
        why = words.reason(door)
        self.detail.setText(f"Why: {why}" if why else "")
        self.detail.setVisible(bool(why))
        theme.restyle(self.detail, tone=tone if tone in ("danger", "warning") else "")
        self.account.setText(f"Speaks as {door.account}")
        allowed = ", ".join(door.allowed_users) or "nobody yet (add people in Settings → Messaging)"
        self.allowed.setText(f"Who may use it: {allowed}")
        self._show_rooms(door)
        self.edit_button.setVisible(self.offer_edit)
        self.setAccessibleName(f"{words.platform_name(door)} door {door.name}: {said}")

    def _show_rooms(self, door: p.DoorStatus) -> None:
        for button in self.room_buttons:
            self.rooms_box.removeWidget(button)
            button.deleteLater()
        self.room_buttons = []
        for room in door.rooms:
            button = QPushButton(f"{words.room_label(room)}  ({room.room_id})"
                                 if room.name else room.room_id)
            button.setObjectName("doorRoom")
            button.setFlat(True)
            button.setToolTip(f"Open the session this room talks to ({room.session_id})")
            button.setAccessibleDescription("Opens the session bound to this room")
            button.clicked.connect(lambda _=False, sid=room.session_id: emit(self.open_requested, sid))
            self.rooms_box.addWidget(button)
            self.room_buttons.append(button)
        self.no_rooms.setVisible(not door.rooms)


class DoorPopover(QFrame):
    """A door's card just above its sidebar row (a popup: Esc or a click elsewhere closes it),
    with a way on to the settings' Messaging page."""

    open_requested = Signal(str)  # a bound room's session id
    settings_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent, Qt.WindowType.Popup)
        self.setObjectName("doorPopover")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(14, 12, 14, 12)
        self.card = DoorCard()
        self.card.open_requested.connect(self._open)
        lay.addWidget(self.card)
        row = QHBoxLayout()
        row.addStretch(1)
        self.settings_button = QPushButton("Messaging settings…")
        self.settings_button.clicked.connect(self._settings)
        row.addWidget(self.settings_button)
        lay.addLayout(row)
        self.setMinimumWidth(380)
        self.setMaximumWidth(520)

    def show_door(self, door: p.DoorStatus, at: QPoint) -> None:
        self.card.show_door(door)
        self.adjustSize()
        self.move(at)
        self.show()

    def _open(self, session_id: str) -> None:
        self.hide()
        emit(self.open_requested, session_id)

    def _settings(self) -> None:
        self.hide()
        emit(self.settings_requested)


class DoorRow(QPushButton):
    """One door in the sidebar: a dot in its state's colour and one line; failing, outlined
    in the danger colour with the reason after the state."""

    def __init__(self, link: Link, door: p.DoorStatus, prefix: str) -> None:
        super().__init__()
        self.setObjectName("doorRow")
        self.setFlat(True)
        self.link = link
        self.door = door
        self.prefix = prefix
        self.show_door(door)

    def show_door(self, door: p.DoorStatus, away: bool = False) -> None:
        """`away`: the backend is not connected, so this is the door as last seen (greyed)."""
        self.door = door
        said, tone = words.state_words(door)
        line = f"{self.prefix}{words.summary(door)}"
        why = words.reason(door)
        if why:
            line = f"{line}: {why}"
        tip = words.tooltip(door)
        if away:
            line, tone = f"{line} (last seen)", "muted"
            tip = f"{words.AWAY}\n{tip}"
        self.full_text = line
        self.setIcon(dot(tone_color(tone)))
        self.setToolTip(plain_tooltip(tip))
        self.setAccessibleName(f"{words.platform_name(door)} door: {said}")
        self.setAccessibleDescription(why or words.summary(door))
        theme.restyle(self, tone=tone)
        self._elide()

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._elide()

    def _elide(self) -> None:
        room = max(40, self.width() - self.iconSize().width() - 30)
        self.setText(self.fontMetrics().elidedText(self.full_text, Qt.TextElideMode.ElideRight, room))


class DoorStrip(QWidget):
    """The sidebar's door rows: every backend's doors, each row named by its backend while the
    sidebar lists several.  Hidden while no backend has a door."""

    open_requested = Signal(str, object)  # a bound room's session id, the Link it lives on
    settings_requested = Signal(object)  # the Link whose Messaging settings to open

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("doorStrip")
        self.links: list[Link] = []
        self.rows: list[DoorRow] = []
        self.lay = QVBoxLayout(self)
        self.lay.setContentsMargins(0, 0, 0, 0)
        self.lay.setSpacing(2)
        self.popover: DoorPopover | None = None
        self._popover_link: Link | None = None  # the backend of the door the popover shows
        # Whether a backend's doors have a settings page here (the dialog is this computer's
        # backend's); the controller says.  Without one the popover offers no way there.
        self.is_local: Callable[[Link], bool] = lambda link: bool(self.links) and link is self.links[0]
        self.hide()
        theme.changed.connect(self._restyle)

    def watch(self, link: Link) -> None:
        if link in self.links:
            return
        self.links.append(link)
        DoorWatch.of(link).changed.connect(self.refresh)
        self.refresh()

    def forget(self, link: Link) -> None:
        if link in self.links:
            self.links.remove(link)
            self.refresh()

    def refresh(self) -> None:
        if not shiboken6.isValid(self):
            return
        wanted = [(link, door) for link in self.links for door in DoorWatch.of(link).doors]
        several = len(self.links) > 1
        same = [(r.link, r.door.name) for r in self.rows] == [(lk, d.name) for lk, d in wanted]
        if same:
            for row, (link, door) in zip(self.rows, wanted, strict=True):
                row.show_door(door, DoorWatch.of(link).away)
        else:
            for row in self.rows:
                self.lay.removeWidget(row)
                row.deleteLater()
            self.rows = []
            for link, door in wanted:
                row = DoorRow(link, door, f"{link.title}: " if several else "")
                row.show_door(door, DoorWatch.of(link).away)
                row.clicked.connect(lambda _=False, r=row: self.show_popover(r))
                self.lay.addWidget(row)
                self.rows.append(row)
        self.setVisible(bool(self.rows))
        if self.popover is not None and self.popover.isVisible():
            shown = self.popover.card.door
            for row in self.rows:
                if shown is not None and row.door.name == shown.name:
                    self.popover.card.show_door(row.door)

    def show_popover(self, row: DoorRow) -> None:
        """The door's card just above its row (the row is at the foot of the sidebar)."""
        if self.popover is None:
            self.popover = DoorPopover(self)
            self.popover.open_requested.connect(
                lambda sid: emit(self.open_requested, sid, self._popover_link))
            self.popover.settings_requested.connect(
                lambda: emit(self.settings_requested, self._popover_link))
        self._popover_link = row.link
        self.popover.settings_button.setVisible(self.is_local(row.link))
        self.popover.card.show_door(row.door)
        self.popover.adjustSize()
        top = row.mapToGlobal(QPoint(0, 0))
        self.popover.show_door(row.door, QPoint(top.x(), max(0, top.y() - self.popover.height() - 4)))

    def _restyle(self, _scheme: str = "") -> None:
        self.refresh()
