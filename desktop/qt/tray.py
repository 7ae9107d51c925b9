"""The tray icon and its notifications, through whichever channel this desktop has.

`choose_channel` picks one: the tray where a status area exists; else desktop
notifications over D-Bus where a notification server runs (GNOME, most Wayland
desktops: `desktop.qt.notify`), whose approval notifications carry Allow once /
Deny / Open buttons when the server shows buttons; else the app's own windows
(`fallback`).  `clicked` carries the notification's target (a session id and, for
an approval or a question, its id) whichever way it was shown; `answered` an approval
decided from a notification's button or from the tray's menu, `chose` a question's
choice picked there (a question's notification carries its first choices as buttons,
`state/questions.py`; words are typed in the app, which Open shows).

A tray balloon has no buttons (QSystemTrayIcon.showMessage), so the tray's menu
carries them instead: every approval waiting is an entry at the top of the menu,
with Allow once, Deny and Show, from when it is asked (`add_waiting`) until it is
answered anywhere or expires (`resolve`).  A click on the balloon itself opens the
approval's session with its card focused.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, QPointF, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QAction, QColor, QIcon, QPainter, QPixmap
from PySide6.QtWidgets import QMenu, QSystemTrayIcon

from desktop.assets import TRAY_STATES, icon_files, icons_dir
from desktop.qt.compat import emit
from desktop.state import questions

if TYPE_CHECKING:
    from desktop.qt.notify import DesktopNotifications

log = logging.getLogger(__name__)

STATE_COLORS = {"idle": "#4a6fa5", "working": "#2f7de1", "approval": "#d68a00", "offline": "#8a8f98"}


def app_icon(state: str = "idle", size: int = 64) -> QIcon:
    """The tray's Turnkey mark for a state (idle, working, approval, offline), every size of it.

    Built from the PNGs in assets/icons/tray/; `size` matters only to the drawn stand-in
    used when they are missing.  Cached: the tray asks again on every change of state.
    """
    if state not in TRAY_STATES:
        state = "idle"
    icon = _png_icon(f"tray-{state}")
    return icon if icon is not None else _drawn_icon(state, size)


def window_icon() -> QIcon:
    """The application icon (assets/icons/hicolor/), for windows and QApplication.setWindowIcon."""
    icon = _png_icon("app")
    return icon if icon is not None else _drawn_icon("idle", 64)


@functools.cache
def _png_icon(kind: str) -> QIcon | None:
    """A QIcon with every rendered size of `kind` that is on disk; None when none is."""
    icon = QIcon()
    missing = []
    for n, path in icon_files(kind):
        if path.is_file():
            icon.addFile(str(path), QSize(n, n))
        else:
            missing.append(path.name)
    if missing:
        log.warning("icon %s: missing %s under %s", kind, ", ".join(missing), icons_dir())
    return None if icon.isNull() else icon


@functools.cache
def _drawn_icon(state: str, size: int) -> QIcon:
    """The mark drawn with QPainter: a white key on a rounded square tinted by state.

    Only a stand-in for a checkout or bundle without the PNGs, so no window is ever
    without an icon.
    """
    pix = QPixmap(size, size)
    pix.fill(Qt.GlobalColor.transparent)
    p = QPainter(pix)
    p.setRenderHint(QPainter.RenderHint.Antialiasing)
    color = QColor(STATE_COLORS.get(state, STATE_COLORS["idle"]))
    p.setBrush(color)
    p.setPen(Qt.PenStyle.NoPen)
    s = size / 64
    p.drawRoundedRect(QRectF(2 * s, 2 * s, 60 * s, 60 * s), 14 * s, 14 * s)
    p.setBrush(QColor("white"))
    p.drawEllipse(QPointF(22 * s, 32 * s), 11 * s, 11 * s)
    p.drawRect(QRectF(30 * s, 29 * s, 24 * s, 6 * s))
    p.drawRect(QRectF(46 * s, 35 * s, 4 * s, 8 * s))
    p.setBrush(color)
    p.drawEllipse(QPointF(22 * s, 32 * s), 4.5 * s, 4.5 * s)
    if state == "approval":
        p.setBrush(QColor("#d0393e"))
        p.drawEllipse(QPointF(52 * s, 12 * s), 9 * s, 9 * s)
    p.end()
    return QIcon(pix)


def choose_channel(tray: bool, desktop_notifications: bool) -> str:
    """"tray" when there is a system tray, else "dbus" when a notification server answers on the
    session bus, else "window" (a banner in the app's own windows, seen only while one is open)."""
    if tray:
        return "tray"
    return "dbus" if desktop_notifications else "window"


APPROVAL_BUTTONS: tuple[tuple[str, str], ...] = (("once", "Allow once"), ("deny", "Deny"),
                                                 ("open", "Open"))
MENU_TITLE_CHARS = 60  # an approval's entry in the tray menu: its tool and summary, cut


def menu_title(text: str) -> str:
    """An approval's entry in the tray menu: one line, cut to MENU_TITLE_CHARS, with `&`
    doubled (a menu reads a lone `&` as a shortcut mark)."""
    line = " ".join(text.split())
    if len(line) > MENU_TITLE_CHARS:
        line = line[:MENU_TITLE_CHARS - 1].rstrip() + "…"
    return line.replace("&", "&&")


class Notifier(QObject):
    clicked = Signal(str, str)  # session_id, approval_id ("" when not an approval)
    answered = Signal(str, str)  # approval_id, decision ("once" or "deny"): a notification's button
    chose = Signal(str, int)  # question_id, the index of the choice picked (a button, the menu)
    fallback = Signal(str, str, str, str)  # title, text, session_id, approval_id
    shown = Signal(str, str)  # title, text: every notification, however it was shown
    activated = Signal()  # the tray icon itself was clicked
    quit_requested = Signal()

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.channel = choose_channel(QSystemTrayIcon.isSystemTrayAvailable(), False)
        self.desktop: DesktopNotifications | None = None  # set by start() when the channel is D-Bus
        self.state = "idle"
        self._target = ("", "")
        self._targets: dict[str, tuple[str, str]] = {}  # a D-Bus notification's key -> its target
        self.tray: QSystemTrayIcon | None = None
        self.menu = QMenu()
        # Approvals waiting, each a submenu above this separator (hidden while none waits).
        self.waiting: dict[str, QMenu] = {}
        self.waiting_end = self.menu.addSeparator()
        self.waiting_end.setVisible(False)
        self.show_action = QAction("Show Turnkey", self.menu)
        self.show_action.triggered.connect(lambda _=False: emit(self.activated))
        quit_action = QAction("Quit", self.menu)
        quit_action.triggered.connect(lambda _=False: emit(self.quit_requested))
        self.menu.addAction(self.show_action)
        self.menu.addSeparator()
        self.menu.addAction(quit_action)
        if self.channel == "tray":
            self.tray = QSystemTrayIcon(app_icon("idle"), self)
            self.tray.setToolTip("Turnkey")
            self.tray.setContextMenu(self.menu)
            self.tray.messageClicked.connect(self._message_clicked)
            self.tray.activated.connect(self._tray_activated)
            self.tray.show()

    @property
    def available(self) -> bool:
        """Whether a notification reaches the person with no window of the app open."""
        return self.channel != "window"

    async def start(self) -> None:
        """Without a tray, looks for a notification server on the session bus (the channel is
        "window" until it answers)."""
        if self.channel != "window" or self.desktop is not None:
            return
        from desktop.qt.notify import DesktopNotifications  # (jeepney: not before the first frame)

        desktop = DesktopNotifications(parent=self)
        if not await desktop.start():
            desktop.deleteLater()
            return
        self.desktop = desktop
        desktop.invoked.connect(self._invoked)
        desktop.closed.connect(lambda key: self._targets.pop(key, None))
        self.channel = choose_channel(self.tray is not None, True)

    async def stop(self) -> None:
        """Before the app exits: sends what is pending and takes back approval notifications,
        whose buttons would answer nothing once the app is gone."""
        if self.desktop is not None:
            for key in self.desktop.shown():
                if self._targets.get(key, ("", ""))[1]:
                    self.desktop.close(key)
            await self.desktop.flush()
            await self.desktop.stop()

    def notify(self, title: str, text: str, session_id: str, approval_id: str = "",
               buttons: Sequence[tuple[str, str]] = APPROVAL_BUTTONS) -> None:
        """Shows a notification; one for an approval or a question (`approval_id` its id)
        stays until `resolve` and carries `buttons` where the server shows them."""
        self._target = (session_id, approval_id)
        emit(self.shown, title, text)
        if self.tray is not None:
            self.tray.showMessage(title, text, app_icon("approval" if approval_id else self.state), 15000)
        elif self.desktop is not None:
            key = approval_id or f"{session_id or 'app'}:{title}"
            self._targets[key] = (session_id, approval_id)
            if approval_id:  # no expiry: it is answered or withdrawn (resolve), or denied in 5 minutes
                self.desktop.show(key, title, text, buttons, urgency="critical", timeout_ms=0)
            else:
                self.desktop.show(key, title, text)
        else:
            emit(self.fallback, title, text, session_id, approval_id)

    def resolve(self, approval_id: str) -> None:
        """The approval was answered (anywhere) or expired: its notification and its entry in
        the tray's menu go."""
        if self.desktop is not None:
            self.desktop.close(approval_id)
            self._targets.pop(approval_id, None)
        entry = self.waiting.pop(approval_id, None)
        if entry is not None:
            self.menu.removeAction(entry.menuAction())
            entry.deleteLater()
            self.waiting_end.setVisible(bool(self.waiting))

    def add_waiting(self, approval_id: str, session_id: str, title: str) -> None:
        """An approval waits: the tray's menu answers it (Allow once, Deny) or shows it, until
        `resolve`.  `title`: what asks, in one line ("terminal: rm -rf build")."""
        if approval_id in self.waiting:
            return
        entry = QMenu(f"Approve? {menu_title(title)}", self.menu)
        entry.setIcon(app_icon("approval"))
        entry.setToolTipsVisible(True)
        entry.menuAction().setToolTip(title)
        for decision, text in (("once", "Allow once"), ("deny", "Deny")):
            action = entry.addAction(text)
            action.triggered.connect(
                lambda _=False, d=decision: emit(self.answered, approval_id, d))
        entry.addSeparator()
        show = entry.addAction("Show in Turnkey…")
        show.triggered.connect(lambda _=False: emit(self.clicked, session_id, approval_id))
        self.menu.insertMenu(self.waiting_end, entry)
        self.waiting[approval_id] = entry
        self.waiting_end.setVisible(True)

    def add_question(self, question_id: str, session_id: str, title: str,
                     choices: Sequence[str]) -> None:
        """A question waits: the tray's menu lists it with its choices (picking one answers it)
        and Show in Turnkey… (for words, or to read it whole), until `resolve`."""
        if question_id in self.waiting:
            return
        entry = QMenu(menu_title(title), self.menu)
        entry.setIcon(app_icon("approval"))
        entry.setToolTipsVisible(True)
        entry.menuAction().setToolTip(title)
        for i, choice in enumerate(choices[:questions.MENU_CHOICES]):
            action = entry.addAction(menu_title(choice))
            action.triggered.connect(lambda _=False, n=i: emit(self.chose, question_id, n))
        if choices:
            entry.addSeparator()
        show = entry.addAction("Show in Turnkey…")
        show.triggered.connect(lambda _=False: emit(self.clicked, session_id, question_id))
        self.menu.insertMenu(self.waiting_end, entry)
        self.waiting[question_id] = entry
        self.waiting_end.setVisible(True)

    def waiting_ids(self) -> list[str]:
        return list(self.waiting)

    def _invoked(self, key: str, action: str) -> None:
        session_id, approval_id = self._targets.get(key, ("", ""))
        choice = questions.action_choice(action)
        if approval_id and choice is not None:
            emit(self.chose, approval_id, choice)
        elif approval_id and action in ("once", "deny"):
            emit(self.answered, approval_id, action)
        else:  # "open", or a click on the notification itself
            emit(self.clicked, session_id, approval_id)

    def set_state(self, state: str) -> None:
        """idle, working, approval or offline: the icon says it at a glance."""
        if state == self.state:
            return
        self.state = state
        if self.tray is not None:
            self.tray.setIcon(app_icon(state))
            self.tray.setToolTip({"idle": "Turnkey", "working": "Turnkey — working",
                                  "approval": "Turnkey — needs your approval",
                                  "offline": "Turnkey — reconnecting"}.get(state, "Turnkey"))

    def _message_clicked(self) -> None:
        emit(self.clicked, *self._target)

    def _tray_activated(self, reason: QSystemTrayIcon.ActivationReason) -> None:
        if reason in (QSystemTrayIcon.ActivationReason.Trigger, QSystemTrayIcon.ActivationReason.DoubleClick):
            emit(self.activated)
