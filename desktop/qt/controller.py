"""The desktop app's wiring: one link, the browser, session windows, tray, settings, saved layout.

Closing a window only closes it.  Closing the last one leaves the app running in
the background when a notification can still reach the person (a tray, or
desktop notifications over D-Bus), and says so the first time; otherwise it
quits.  Quit closes the connection and leaves the backend running its turns.  Which
sessions were open, and where every window was, is saved in DIR/desktop.json
and restored on the next start.
"""

from __future__ import annotations

import base64
import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QByteArray, QObject, Qt, QTimer, QUrl, Signal
from PySide6.QtGui import QDesktopServices, QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication, QStyleFactory, QWidget

from desktop.link import Link
from desktop.qt.aio import settle, spawn
from desktop.qt.browser import BrowserWindow
from desktop.qt.compat import emit
from desktop.qt.screens import available, cascaded, show_on_screen
from desktop.qt.session_window import SessionWindow
from desktop.qt.tray import Notifier, window_icon
from shared import protocol as p
from shared.client import Incoming
from shared.methods import ApprovalRespond, SessionList

log = logging.getLogger("desktop")
LAYOUT = "desktop.json"
ACTIVE = frozenset({"running", "queued", "waiting_approval"})  # a turn is under way


class Controller(QObject):
    ready = Signal()
    quitting = Signal()

    def __init__(self, data_dir: Path, restart_after_s: float | None = 3.0) -> None:
        super().__init__()
        self.data_dir = data_dir
        self.link = Link(data_dir, restart_after_s)
        self.windows: list[SessionWindow] = []
        self.notifier = Notifier(self)
        self.notifier.clicked.connect(self.open_target)
        self.notifier.answered.connect(self.answer)
        self.notifier.activated.connect(self.show_browser)
        self.notifier.quit_requested.connect(self.quit)
        self.browser = BrowserWindow(self.link, str(Path.home()))
        self.browser.setWindowIcon(window_icon())
        self.browser.open_requested.connect(self.open_session)
        self.browser.open_new_requested.connect(lambda sid: self.open_session(sid, new_window=True))
        self.browser.settings_requested.connect(self.open_settings)
        self.browser.quit_requested.connect(self.quit)
        self.browser.folder_requested.connect(self.open_folder)
        self.notifier.fallback.connect(self._fallback)
        self.link.received.connect(self._on_event)
        self.link.state.connect(self._on_state)
        self.link.failed.connect(self.browser.show_message)
        self.settings: QWidget | None = None
        self.statuses: dict[str, str] = {}
        self._quitting = False
        self.background_told = False  # said once ever (kept in DIR/desktop.json): it stays running
        self.keep_layout = True  # False for a smoke run: it must not overwrite the saved layout
        # Ends the Qt application once Quit has closed everything (tests that run several
        # controllers in one QApplication replace it: quitting the application under pytest-qt
        # would stop the event loops the next test waits in).
        self.exit_app: Callable[[], None] = QApplication.quit
        self._save_timer = QTimer(self, singleShot=True, interval=500)
        self._save_timer.timeout.connect(self._save_due)

    # --- start and stop ------------------------------------------------------------

    def start(self, restore: bool = True) -> None:
        saved = self._read_layout()
        self.background_told = bool(saved.get("background_told"))
        layout = saved if restore else {}
        geometry = layout.get("browser")
        if geometry:
            self.browser.restoreGeometry(QByteArray(base64.b64decode(geometry)))
        show_on_screen(self.browser)  # a saved place may be on a screen that is gone
        spawn(self.notifier.start())
        spawn(self._connect(layout.get("sessions", []) if restore else []), self._failed)

    async def _connect(self, reopen: list[dict[str, Any]]) -> None:
        await self.link.start()
        self.browser.reload()
        server = self.link.server
        sandbox = server.capabilities.sandbox if server is not None else None
        if sandbox is not None and not sandbox.active:
            self.browser.show_sandbox_warning(sandbox.reason or "")
        # The tray's state from what is running now; broadcasts keep it current from here.
        listing = await self.link.call(SessionList(limit=500))
        for session in listing.sessions:
            self.statuses.setdefault(session.session_id, session.status)
        self._tray_state()
        for entry in reopen:
            win = self.open_session(entry["session_id"], new_window=True)
            if entry.get("geometry"):
                win.restoreGeometry(QByteArray(base64.b64decode(entry["geometry"])))
                show_on_screen(win)
        emit(self.ready)

    def _failed(self, message: str) -> None:
        self.browser.show_message(f"Could not reach the Turnkey service: {message}. It writes its "
                                  f"log to {self.data_dir / 'logs'}.")

    def quit(self) -> None:
        """Ends the app; the backend keeps running (and finishing) its turns."""
        if self._quitting:
            return
        self._quitting = True
        # Quit saves the layout now, with every window still open.  A save the debounce timer
        # still holds (a window opened less than 500 ms ago) must not run after the windows
        # close: it would overwrite this layout with none of them.
        self._save_timer.stop()
        self.save_layout()
        emit(self.quitting)
        running = sum(1 for status in self.statuses.values() if status in ACTIVE)
        if running:  # a notice, not a question: quitting is never held up
            turns = f"{running} running turn{'s keep' if running > 1 else ' keeps'}"
            log.info("quit with %s going in the backend", turns)
            self.notifier.notify("Turnkey closed", f"{turns} going in the background; "
                                 "open Turnkey to see how it ends.", "")

        async def down() -> None:
            try:
                for win in list(self.windows):
                    win.close()
                self.browser.close()
                await settle()  # the windows' unsubscribes go out before the connection closes
                await self.notifier.stop()  # the notice above goes out; approvals' buttons go
                await self.link.close()
            finally:
                self.exit_app()

        spawn(down())

    def last_window_closed(self) -> None:
        """The last window closed: stay in the background when notifications still reach the
        person (saying so the first time ever), else quit."""
        if self._quitting:
            return
        if not self.notifier.available:
            self.quit()
            return
        if not self.background_told:
            self.background_told = True
            self.notifier.notify("Turnkey keeps running in the background",
                                 "Approvals will reach you here.", "")
            self.save_layout()

    # --- windows -------------------------------------------------------------------

    def open_session(self, session_id: str, new_window: bool = False) -> SessionWindow:
        if not new_window:
            for win in self.windows:
                if win.session_id == session_id:
                    win.showNormal()
                    win.raise_()
                    win.activateWindow()
                    return win
        win = SessionWindow(self.link, session_id)
        win.setWindowIcon(window_icon())
        win.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        win.closed.connect(lambda _sid, w=win: self._closed(w))
        win.requested.connect(self._window_asked)
        self.windows.append(win)
        if self.windows[:-1]:
            win.move(cascaded(self.windows[-2].frameGeometry(), win.frameGeometry(), available(win)))
        show_on_screen(win)
        self._save_timer.start()
        return win

    def _window_asked(self, action: str, session_id: str) -> None:
        """A session window's File/Session/Help menu (see APP_ACTIONS)."""
        if action == "new":
            self.show_browser()
            self.browser.new_session()
        elif action == "sessions":
            self.show_browser()
        elif action == "settings":
            self.open_settings()
        elif action == "quit":
            self.quit()
        elif action == "pop_out":
            self.open_session(session_id, new_window=True)
        elif action in ("logs", "data"):
            self.open_folder(action)

    def open_target(self, session_id: str, approval_id: str = "") -> None:
        if not session_id:
            self.show_browser()
            return
        win = self.open_session(session_id)
        if approval_id:
            # The card appears once the window's snapshot is in; focus it then.
            QTimer.singleShot(0, lambda: win.show_approval(approval_id))

    def answer(self, approval_id: str, decision: str) -> None:
        """An approval decided from a notification's button ("once" or "deny")."""
        choice: p.Decision = "once" if decision == "once" else "deny"
        spawn(self.link.call(ApprovalRespond(approval_id=approval_id, decision=choice)),
              lambda words: self.notifier.notify("The approval was not answered", words, ""))

    def show_browser(self) -> None:
        self.browser.showNormal()
        self.browser.raise_()
        self.browser.activateWindow()

    def _closed(self, win: SessionWindow) -> None:
        if win in self.windows:
            self.windows.remove(win)
        if not self._quitting:
            self._save_timer.start()

    def open_folder(self, which: str) -> bool:
        """Opens DIR/logs ("logs", where the backend and the app write their logs) or DIR
        ("data") in the file manager."""
        folder = self.data_dir / "logs" if which == "logs" else self.data_dir
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        opened = bool(QDesktopServices.openUrl(QUrl.fromLocalFile(str(folder))))
        if not opened:
            self.browser.show_message(f"No file manager could open {folder}.")
        return opened

    def open_settings(self) -> None:
        from desktop.qt.settings import SettingsDialog

        if self.settings is None:
            self.settings = SettingsDialog(self.link, self.data_dir, self.browser)
        self.settings.show()
        self.settings.raise_()

    # --- notifications -------------------------------------------------------------

    def _visible_window(self, session_id: str) -> SessionWindow | None:
        for win in self.windows:
            if win.session_id == session_id and win.isVisible() and win.isActiveWindow():
                return win
        return None

    def _on_event(self, event: Incoming) -> None:
        if event.seq is not None:
            return  # the stored copies are for session windows
        data = event.data
        if event.type == "approval.request" and isinstance(data, p.ApprovalEvent):
            approval = data.approval
            if self._visible_window(approval.session_id) is None:
                self.notifier.notify(
                    "Turnkey needs your approval",
                    f"{approval.tool}: {approval.summary}\n{approval.reason}",
                    approval.session_id, approval.approval_id)
        elif event.type == "approval.resolved" and isinstance(data, p.ApprovalEvent):
            self.notifier.resolve(data.approval.approval_id)
            if self.browser.banner_target[1] == data.approval.approval_id:
                self.browser.banner.hide()  # answered somewhere: the fallback banner goes too
        elif event.type == "session.updated" and isinstance(data, p.SessionEvent):
            session = data.session
            sid, status = session.session_id, session.status
            before = self.statuses.get(sid)
            self.statuses[sid] = status
            if before in ("running", "waiting_approval") and status == "idle" \
                    and self._visible_window(sid) is None:
                self.notifier.notify("Turn finished", session.title or "A session finished", sid)
        self._tray_state()

    def _tray_state(self) -> None:
        values = set(self.statuses.values())
        if self.link.current != "connected":
            state = "offline"
        elif "waiting_approval" in values:
            state = "approval"
        elif values & {"running", "queued"}:
            state = "working"
        else:
            state = "idle"
        self.notifier.set_state(state)

    def _on_state(self, state: str) -> None:
        self._tray_state()

    def _fallback(self, title: str, text: str, session_id: str, approval_id: str) -> None:
        """No tray here: say it in the browser, and raise it so it is seen."""
        self.browser.show_message(f"{title} — {text.splitlines()[0] if text else ''} (click to open)",
                                  session_id, approval_id)

    # --- layout --------------------------------------------------------------------

    def _read_layout(self) -> dict[str, Any]:
        try:
            data = json.loads((self.data_dir / LAYOUT).read_text())
            return data if isinstance(data, dict) else {}
        except (OSError, ValueError):
            return {}

    def _save_due(self) -> None:
        if not self._quitting:  # once quitting, the layout quit saved is the one to keep
            self.save_layout()

    def save_layout(self) -> None:
        if not self.keep_layout:
            return
        data = {
            "browser": _geometry(self.browser),
            "sessions": [{"session_id": w.session_id, "geometry": _geometry(w)} for w in self.windows],
            "background_told": self.background_told,
        }
        path = self.data_dir / LAYOUT
        try:
            self.data_dir.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(data))
            os.replace(tmp, path)
        except OSError as exc:
            log.warning("could not save the window layout: %s", exc)


def _geometry(widget: QWidget) -> str:
    return base64.b64encode(bytes(widget.saveGeometry().data())).decode()


def apply_palette(app: QApplication) -> None:
    """Fusion, in light or dark as the system says, and again whenever the system changes it."""
    app.setStyle(QStyleFactory.create("Fusion"))

    def follow() -> None:
        scheme = QGuiApplication.styleHints().colorScheme()
        app.setPalette(_dark() if scheme == Qt.ColorScheme.Dark else app.style().standardPalette())

    follow()
    QGuiApplication.styleHints().colorSchemeChanged.connect(lambda _s: follow())


def _dark() -> QPalette:
    from PySide6.QtGui import QColor

    p = QPalette()
    role = QPalette.ColorRole
    for r, c in ((role.Window, "#202225"), (role.WindowText, "#e6e6e6"), (role.Base, "#17181a"),
                 (role.AlternateBase, "#26282c"), (role.Text, "#e6e6e6"), (role.Button, "#2a2c30"),
                 (role.ButtonText, "#e6e6e6"), (role.Highlight, "#2f7de1"),
                 (role.HighlightedText, "#ffffff"), (role.Mid, "#3a3d42"), (role.ToolTipBase, "#2a2c30"),
                 (role.ToolTipText, "#e6e6e6"), (role.PlaceholderText, "#8a8f98"), (role.Link, "#6aa5ff")):
        p.setColor(r, QColor(c))
    # Disabled controls must look disabled: dimmer text, flatter buttons (without this group
    # they inherit the active colours, and a disabled Stop reads like an enabled one).
    off = QPalette.ColorGroup.Disabled
    for r, c in ((role.WindowText, "#6b6f76"), (role.Text, "#6b6f76"), (role.ButtonText, "#6b6f76"),
                 (role.Button, "#232528"), (role.Base, "#1b1c1e"), (role.Highlight, "#3a3d42"),
                 (role.HighlightedText, "#9a9ea5")):
        p.setColor(off, r, QColor(c))
    return p
