"""The desktop app's wiring: one link, the main window, popped-out session windows, tray,
settings, saved layout.

Closing a window only closes it.  Closing the last one leaves the app running in
the background when a notification can still reach the person (a tray, or
desktop notifications over D-Bus), and says so the first time; otherwise it
quits.  Quit closes the connection and leaves the backend running its turns.  Which
sessions were open, where every window was and whether its changes panel was open
are saved in DIR/desktop.json and restored on the next start.

A first run (nothing configured on this computer's backend, which has no session yet) opens on a
new session to type in; when nothing can answer (no offline model either), the settings open at
the provider form by themselves, once ever (`provider_form_shown` in DIR/desktop.json).  Started
`hidden` (`turnkey --background`, at login), the app stays in the tray: no window shows until the
tray, a notification or a later launch asks for one, and the saved windows open then.
"""

from __future__ import annotations

import base64
import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QByteArray, QObject, Qt, QTimer, QUrl, Signal
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import QApplication, QMainWindow, QMessageBox, QWidget

from desktop import pairings, startup_trace
from desktop.link import Link
from desktop.qt.aio import settle, spawn
from desktop.qt.backends import Backends
from desktop.qt.compat import emit
from desktop.qt.first_frame import after_paint
from desktop.qt.first_run import open_provider_form
from desktop.qt.remote import RemoteDialog
from desktop.qt.screens import available, cascaded, show_on_screen
from desktop.qt.session_window import MainWindow, SessionWindow, Window
from desktop.qt.tray import Notifier, window_icon
from desktop.state import questions
from desktop.state.first_run import first_run, readiness
from desktop.state.questions import WAITING
from shared import protocol as p
from shared.client import Incoming, RpcError
from shared.folders import launch_folder
from shared.mcp_names import shown_name, shown_summary
from shared.methods import ApprovalList, ApprovalRespond, ClarifyList, ClarifyRespond, SessionList
from shared.remote import RemoteTarget

if TYPE_CHECKING:  # loaded when first opened
    from desktop.qt.fleet import FleetDialog

log = logging.getLogger("desktop")
LAYOUT = "desktop.json"
ACTIVE = frozenset({"running", "queued", "waiting_approval", "waiting_answer"})  # a turn is under way


def _launched_in() -> str:
    """The app's working directory at launch (home when it no longer exists)."""
    try:
        return os.getcwd()
    except FileNotFoundError:
        return str(Path.home())


class Controller(QObject):
    ready = Signal()
    quitting = Signal()

    def __init__(self, data_dir: Path, restart_after_s: float | None = 3.0,
                 remote: RemoteTarget | None = None) -> None:
        super().__init__()
        self.data_dir = data_dir
        self.link = Link(data_dir, restart_after_s, remote)
        self.windows: list[SessionWindow] = []
        self.notifier = Notifier(self)
        self.notifier.clicked.connect(self.open_target)
        self.notifier.answered.connect(self.answer)
        self.notifier.chose.connect(self.reply)
        self.notifier.activated.connect(self.show_main)
        self.notifier.quit_requested.connect(self.quit)
        self.main = MainWindow(self.link, launch_folder(_launched_in(), data_dir))
        self.main.setWindowIcon(window_icon())
        self.main.requested.connect(self._window_asked)
        self.notifier.fallback.connect(self._fallback)
        # Every backend: this computer's (`link`) and each paired remote one.
        self.backends = Backends(data_dir, self.link)
        self.backends.received.connect(self._on_event)
        self.backends.added.connect(self._backend_added)
        self.backends.removed.connect(self._backend_removed)
        self.main.home_of = self.link_of
        # A messaging door's row and card: a bound room opens its session; its settings page.
        doors = self.main.sidebar.doors
        doors.open_requested.connect(lambda sid, link: self.open_session(sid, link=link))
        doors.settings_requested.connect(lambda _link: self.open_settings("Messaging"))
        doors.is_local = lambda link: link is self.link
        self.approvals: dict[str, Link] = {}  # an approval asked for -> the backend asking
        self.questions: dict[str, Link] = {}  # a question waiting -> the backend asking
        self.asked = questions.Pending()  # the questions waiting (each copy counted once)
        self._reopen: dict[str, list[dict[str, Any]]] = {}  # windows waiting for their backend
        self.link.state.connect(self._on_state)
        self.link.failed.connect(self.main.show_message)
        self.settings: QWidget | None = None
        self.schedules: QWidget | None = None
        self.fleet_views: dict[str, FleetDialog] = {}  # a backend's key -> its Backends view
        self.remote_dialog: RemoteDialog | None = None
        # Sessions a schedule's firing started a turn in: their next finish says "scheduled".
        self.scheduled: dict[str, str] = {}
        self.statuses: dict[str, str] = {}
        self._quitting = False
        self._notifier_started = False
        self._started = False  # the first connection's listing is done: reconnections list again
        self.background_told = False  # said once ever (kept in DIR/desktop.json): it stays running
        self.provider_form_shown = False  # the first run opened it (kept there too): never again
        self.hidden = False  # started in the background: no window shown yet
        # Saved windows waiting for the first show of a hidden start: (backend, layout entries).
        self._deferred: list[tuple[Link, list[dict[str, Any]]]] = []
        self.keep_layout = True  # False for a smoke run: it must not overwrite the saved layout
        # Ends the Qt application once Quit has closed everything (tests that run several
        # controllers in one QApplication replace it: quitting the application under pytest-qt
        # would stop the event loops the next test waits in).
        self.exit_app: Callable[[], None] = QApplication.quit
        self._save_timer = QTimer(self, singleShot=True, interval=500)
        self._save_timer.timeout.connect(self._save_due)
        # A save still due when the main window is gone has nothing to save (seen in the test
        # suite: a controller outliving its window, its timer firing in a later test).
        self.main.destroyed.connect(self._save_timer.stop)

    # --- start and stop ------------------------------------------------------------

    def start(self, restore: bool = True, hidden: bool = False) -> None:
        """Shows the main window (unless `hidden`: see the module's docstring), connects and
        restores the saved layout (`restore`)."""
        saved = self._read_layout()
        self.background_told = bool(saved.get("background_told"))
        self.provider_form_shown = bool(saved.get("provider_form_shown"))
        self.hidden = hidden
        layout = saved if restore else {}
        geometry = layout.get("main")
        if geometry:
            self.main.restoreGeometry(QByteArray(base64.b64decode(geometry)))
        splitter = layout.get("splitter")
        if splitter:
            self.main.splitter.restoreState(QByteArray(base64.b64decode(splitter)))
        _restore_docks(self.main, layout.get("main_docks"))
        if layout.get("grouping") in ("day", "folder"):
            self.main.sidebar.set_grouping(layout["grouping"])
        current = str(layout.get("current") or "")
        if current and layout.get("current_backend", "local") == "local" and not hidden:
            # Opened before the window shows, so its first frame is the session's, not the
            # start page (its requests wait for the connection).
            shown = self.main.show_session(current, link=self.link)
            shown.loading.opened.connect(lambda: after_paint(shown.view.viewport(),
                                                             self._start_notifier))
            current = ""
        elif not hidden:
            after_paint(self.main, self._start_notifier)
        if not hidden:
            startup_trace.watch_paint(self.main, "window_painted")
            show_on_screen(self.main)  # a saved place may be on a screen that is gone
        # The notifications' D-Bus connection (and its imports, jeepney) wait for the first
        # frame that shows the session, or the window; at the latest, for the connection's
        # listing (a window that never paints, a session that fails to open).
        self.ready.connect(self._start_notifier)
        if hidden:
            self._start_notifier()
        self.backends.restore()  # remote pairings connect in the background, each on its own
        sessions = list(layout.get("sessions", []))
        if current and layout.get("current_backend", "local") != "local":
            sessions.append({"session_id": current, "backend": layout["current_backend"],
                             "beside": True})
            current = ""
        for entry in sessions:  # a remote backend's windows open once it is connected
            key = str(entry.get("backend", "local"))
            if key != "local" and self.backends.link(key) is not None:
                self._reopen.setdefault(key, []).append(entry)
        spawn(self._connect([e for e in sessions if e.get("backend", "local") == "local"],
                            current), self._failed)

    def _start_notifier(self) -> None:
        if not self._notifier_started:
            self._notifier_started = True
            spawn(self.notifier.start())

    async def _connect(self, reopen: list[dict[str, Any]], current: str = "") -> None:
        await self.link.start()
        if current:  # (a hidden start's; a shown one's opened before the window showed)
            self.main.show_session(current, link=self.link)
        self._show_backend()
        self.main.sidebar.reload()
        server = self.link.server
        sandbox = server.capabilities.sandbox if server is not None else None
        if sandbox is not None and not sandbox.active:
            self.main.show_sandbox_warning(sandbox.reason or "")
        # The tray's state from what is running now; broadcasts keep it current from here.
        listing = await self.link.call(SessionList(limit=500))
        for session in listing.sessions:
            self.statuses.setdefault(session.session_id, session.status)
        self._tray_state()
        self._reopen_windows(self.link, reopen)
        await self._show_waiting(self.link)
        # Not for a smoke run (keep_layout False): a check of the install must neither make
        # a session nor use up the first run's one opening of the provider form.
        if server is not None and not self.hidden and self.keep_layout:
            self._first_run(server.capabilities.provider, not listing.sessions)
        self._started = True
        for link in self.backends.remotes:
            if link.current == "connected":
                self._reopen_windows(link, self._reopen.pop(link.key, []))
                spawn(self._list_waiting(link))
        emit(self.ready)

    async def _show_waiting(self, link: Link) -> None:
        """An approval or a question waits (asked while the app was closed, or while no window
        showed its session): the main window shows the session that asked last, instead of
        the start page, unless the saved layout already shows it somewhere."""
        waiting = await self._list_waiting(link)
        if not waiting or self.main.current is not None:
            return
        _asked_at, latest = max(waiting)
        if all(win.session_id != latest for win in self.windows):
            self.main.show_session(latest, link=link)

    async def _list_waiting(self, link: Link) -> list[tuple[str, str]]:
        """The backend's approvals and questions waiting now, as (asked at, session), and the
        tray's menu made to list exactly those of it (answered or asked while this app was
        away from it)."""
        waiting = (await link.call(ApprovalList())).approvals
        listed = {a.approval_id for a in waiting}
        for approval_id in [a for a, lk in self.approvals.items() if lk is link and a not in listed]:
            self.approvals.pop(approval_id, None)
            self.notifier.resolve(approval_id)
        for approval in waiting:
            self._waiting(link, approval)
        asked = await self._list_questions(link)
        return [(a.created_at, a.session_id) for a in waiting] + \
            [(q.created_at, q.session_id) for q in asked]

    async def _list_questions(self, link: Link) -> list[p.Question]:
        """The backend's questions waiting now, in the tray's menu (exactly those of it)."""
        try:
            waiting = (await link.call(ClarifyList())).questions
        except RpcError as exc:  # (a backend from before questions: it asks none)
            log.info("no questions from %s: %s", link.key, exc)
            return []
        listed = {q.question_id for q in waiting}
        for question_id in [q for q, lk in self.questions.items() if lk is link and q not in listed]:
            self._answered(question_id)
        for question in waiting:
            if self.asked.apply(p.QuestionAsked(question=question)):
                self._question_waiting(link, question)
        return waiting

    def _question_waiting(self, link: Link, question: p.Question) -> None:
        self.questions[question.question_id] = link
        self.notifier.add_question(question.question_id, question.session_id,
                                   questions.menu_words(question), question.choices)

    def _answered(self, question_id: str) -> None:
        """The question closed (anywhere): its notification, menu entry and banner go."""
        self.asked.drop(question_id)
        self.questions.pop(question_id, None)
        self.notifier.resolve(question_id)
        if self.main.banner_target[1] == question_id:
            self.main.banner.hide()

    def _waiting(self, link: Link, approval: p.Approval) -> None:
        self.approvals[approval.approval_id] = link
        title, _text = approval_words(approval, _on(link, self.link))
        self.notifier.add_waiting(approval.approval_id, approval.session_id, title)

    def _first_run(self, summary: p.ProviderSummary, no_sessions: bool) -> None:
        """Nothing configured: a first session to type in when there is none, and, when nothing
        can answer, the provider form (once ever)."""
        if not first_run(summary):
            return
        if no_sessions and self.main.current is None and not self.windows:
            self.main.create_session("", self.main.default_folder, self.link)
        if readiness(summary, None) == "needs_provider" and not self.provider_form_shown:
            self.provider_form_shown = True
            self.save_layout()  # at once: a crash before the next save must not show it again
            self.add_provider()

    def add_provider(self) -> None:
        """The settings at the provider form, a new provider's (the welcome's Add a provider)."""
        from desktop.qt.settings import SettingsDialog

        self.open_settings("Providers")
        if isinstance(self.settings, SettingsDialog):
            open_provider_form(self.settings)

    def _providers_saved(self, _config: object) -> None:
        """A provider saved or removed: every conversation asks which providers answer now (a
        first provider makes the message box take messages)."""
        for win in [self.main, *self.windows]:
            if win.current is not None and win.current.link is self.link:
                spawn(win.current.fetch_providers())

    def _reopen_windows(self, link: Link, entries: list[dict[str, Any]]) -> None:
        """The saved layout's windows of one backend, now that it is connected (at the first
        show, for a hidden start)."""
        if self.hidden:
            if entries:
                self._deferred.append((link, entries))
            return
        for entry in entries:
            if entry.get("beside"):
                self.main.show_session(entry["session_id"], link=link)
                continue
            win = self.open_session(entry["session_id"], new_window=True, link=link)
            if entry.get("geometry"):
                win.restoreGeometry(QByteArray(base64.b64decode(entry["geometry"])))
                show_on_screen(win)
            _restore_docks(win, entry.get("docks"))

    def _failed(self, message: str) -> None:
        self.main.show_message(f"Could not reach the Turnkey service: {message}. It writes its "
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
                for view in self.fleet_views.values():
                    view.close()  # its timer stops asking
                self.main.close()
                await settle()  # the windows' unsubscribes go out before the connection closes
                await self.notifier.stop()  # the notice above goes out; approvals' buttons go
                await self.backends.close()
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

    def open_session(self, session_id: str, new_window: bool = False,
                     at_message: str = "", link: Link | None = None) -> Window:
        """Shows a session: in the window already showing it (raised), else beside the main
        window's sidebar; `new_window` pops it out into a window of its own.  It is opened on
        its own backend's connection (`link`, else where the app saw it)."""
        link = link or self.link_of(session_id)
        if not new_window:
            for win in self.windows:
                if win.session_id == session_id:
                    win.bring_forward()
                    if at_message and win.current is not None:
                        spawn(win.current.show_message(at_message))
                    return win
            self.main.show_session(session_id, at_message, link)
            self.show_main()
            self._save_timer.start()
            return self.main
        win = SessionWindow(link, session_id)
        win.setWindowIcon(window_icon())
        win.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        win.closed.connect(lambda _sid, w=win: self._closed(w))
        win.requested.connect(self._window_asked)
        self.windows.append(win)
        before = self.windows[-2] if self.windows[:-1] else self.main if self.main.isVisible() else None
        if before is not None:
            win.move(cascaded(before.frameGeometry(), win.frameGeometry(), available(win)))
        show_on_screen(win)
        self._save_timer.start()
        return win

    def open_in_window(self, session_id: str) -> Window:
        """A sub-agent's session (a delegate card's Open): the window already showing it, or a
        window of its own, so the parent's conversation stays where it is."""
        for win in self.windows:
            if win.session_id == session_id:
                win.bring_forward()
                return win
        return self.open_session(session_id, new_window=True)

    def _window_asked(self, action: str, session_id: str) -> None:
        """A window's menus (see actions.APP_COMMANDS) and the sidebar's requests."""
        if action == "new":
            self.main.new_session()
        elif action in ("sessions", "find"):
            self.show_main()
            if action == "find":
                self.main.sidebar.focus_search()
        elif action == "settings":
            self.open_settings()
        elif action == "add_provider":
            self.add_provider()
        elif action == "schedules":
            self.open_schedules()
        elif action == "quit":
            self.quit()
        elif action == "remote":
            self.open_remote()
        elif action == "forget" and session_id:  # (here: a backend's key)
            self.forget_remote(session_id)
        elif action == "backends":  # a header's backend key, else the window's session, if any
            self.open_backends(self.backends.link(session_id) or self._backend_for(session_id))
        elif action == "pop_out" and session_id:
            self.open_session(session_id, new_window=True)
        elif action == "open_window" and session_id:
            self.open_in_window(session_id)
        elif action == "delete" and session_id:
            self.show_main()
            self.main.sidebar.confirm_delete(session_id)
        elif action in ("logs", "data"):
            self.open_folder(action)
        elif action == "layout":  # a window's changes panel opened or closed
            self._save_timer.start()

    # --- a remote backend --------------------------------------------------------------

    def open_remote(self) -> None:
        """File ▸ Connect to a remote backend…: one dialog, brought forward when open."""
        if self.remote_dialog is None:
            self.remote_dialog = RemoteDialog(self.add_remote, self.main)
            self.remote_dialog.finished.connect(lambda _: setattr(self, "remote_dialog", None))
        self.show_main()
        self.remote_dialog.show()
        self.remote_dialog.raise_()
        self.remote_dialog.activateWindow()

    async def add_remote(self, target: RemoteTarget, label: str = "") -> Link:
        """Pairs with the backend `target` names, beside the ones the app has: its sessions
        get a section of the sidebar, and the pairing is remembered (the token in the
        keyring).  Raises BackendNotFound (nothing kept) when that backend cannot be reached
        or refuses."""
        link = await self.backends.pair(target, label)
        if not self.backends.kept.get(link.key):
            self.main.show_message(f"No keyring works here, so {link.where} is paired for as "
                                   "long as Turnkey runs; pair again after a restart.")
        log.info("paired with the backend on %s:%d", target.host, target.port)
        return link

    def forget_remote(self, key: str) -> None:
        """A header's Remove…: asks, then closes that backend's windows and forgets it."""
        link = self.backends.link(key)
        if link is None or link is self.link:
            return
        box = QMessageBox(QMessageBox.Icon.Question, "Remove backend",
                          f"Remove {link.title}? Its sessions stay on that computer; this app "
                          "forgets the pairing and its token.",
                          QMessageBox.StandardButton.Cancel, self.main)
        remove = box.addButton("Remove", QMessageBox.ButtonRole.DestructiveRole)
        remove.setProperty("danger", True)
        box.buttonClicked.connect(
            lambda b: spawn(self.backends.remove(key), self.main.show_message)
            if box.buttonRole(b) == QMessageBox.ButtonRole.DestructiveRole else None)
        box.open()
        self.forget_box = box

    def link_of(self, session_id: str) -> Link:
        """The backend a session lives on: the sidebar's section, else where its events came
        from, else this computer's."""
        return self.main.sidebar.link_of(session_id) or self.backends.home(session_id)

    def _backend_added(self, link: Link) -> None:
        self.main.sidebar.add_backend(link)
        link.received.connect(self.main.on_event)  # its session deleted while shown there
        link.state.connect(lambda state, lk=link: self._remote_state(lk, state))

    def _remote_state(self, link: Link, state: str) -> None:
        if state == "connected":
            self._reopen_windows(link, self._reopen.pop(link.key, []))
            spawn(self._list_waiting(link))

    def _backend_removed(self, link: Link) -> None:
        """Its windows close (they spoke to a connection that is gone)."""
        view = self.fleet_views.pop(link.key, None)
        if view is not None:
            view.close()
            view.deleteLater()
        for win in list(self.windows):
            if win.current is not None and win.current.link is link:
                win.close()
        if self.main.current is not None and self.main.current.link is link:
            self.main.clear_session()
        for section in self.main.sidebar.sections:  # its turns no longer count in the tray
            if section.link is link:
                for session in section.rows.rows:
                    self.statuses.pop(session.session_id, None)
        self.main.sidebar.remove_backend(link)
        self._tray_state()
        for sid in [sid for sid, lk in self.approvals.items() if lk is link]:
            self.notifier.resolve(sid)
            self.approvals.pop(sid, None)
        for qid in [qid for qid, lk in self.questions.items() if lk is link]:
            self._answered(qid)
        self._save_timer.start()

    def _show_backend(self) -> None:
        host = self.link.remote_host
        self.main.sidebar.show_backend(host)
        self.main.refresh_title()

    def open_target(self, session_id: str, approval_id: str = "") -> None:
        if not session_id:
            self.show_main()
            return
        asking = (self.approvals.get(approval_id) or self.questions.get(approval_id)) \
            if approval_id else None
        win = self.open_session(session_id, link=asking)
        if approval_id:
            # The card appears once the conversation's snapshot is in; focus it then.
            QTimer.singleShot(0, win, lambda: win.show_approval(approval_id))

    def answer(self, approval_id: str, decision: str) -> None:
        """An approval decided from a notification's button ("once" or "deny")."""
        choice: p.Decision = "once" if decision == "once" else "deny"
        link = self.approvals.get(approval_id, self.link)
        spawn(link.call(ApprovalRespond(approval_id=approval_id, decision=choice)),
              lambda words: self.notifier.notify("The approval was not answered", words, ""))

    def reply(self, question_id: str, choice: int) -> None:
        """A question's choice picked from a notification's button or the tray's menu."""
        link = self.questions.get(question_id, self.link)
        spawn(link.call(ClarifyRespond(question_id=question_id, choice=choice)),
              lambda words: self.notifier.notify("The question was not answered", words, ""))

    def show_main(self) -> None:
        """The main window, brought forward; the first time after a hidden start, the saved
        windows open too."""
        if self.hidden:
            self.hidden = False
            show_on_screen(self.main)
            for link, entries in self._deferred:
                self._reopen_windows(link, entries)
            self._deferred.clear()
        self.main.bring_forward()

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
            self.main.show_message(f"No file manager could open {folder}.")
        return opened

    def open_settings(self, page: str = "") -> None:
        """The settings dialog (one, brought forward), at `page` ("Messaging", ...) when named."""
        from desktop.qt.settings import SettingsDialog

        if self.settings is None:
            dialog = SettingsDialog(self.link, self.data_dir, self.main,
                                    session_of=self._shown_here)
            dialog.messaging_page.open_requested.connect(
                lambda sid: self.open_session(sid, link=self.link))
            dialog.saved.connect(self._providers_saved)
            self.settings = dialog
        if page and isinstance(self.settings, SettingsDialog):
            self.settings.show_tab(page)
        self.settings.show()
        self.settings.raise_()

    def _shown_here(self) -> str | None:
        """The session the main window shows, when it is this computer's backend's (the
        settings' Skills page lists its folder's project skills)."""
        current = self.main.current
        return current.session_id if current is not None and current.link is self.link else None

    def open_backends(self, link: Link | None = None) -> FleetDialog:
        """The Backends view of `link`'s store (default: this computer's backend), one per
        backend, brought forward when open."""
        from desktop.qt.fleet import FleetDialog

        link = link or self.link
        view = self.fleet_views.get(link.key)
        if view is None:
            view = self.fleet_views[link.key] = FleetDialog(link, self.main)
        view.show()
        view.raise_()
        view.activateWindow()
        return view

    def _backend_for(self, session_id: str) -> Link:
        """A window's backend: its session's, else the sidebar's selected section's."""
        return self.link_of(session_id) if session_id else self.main.sidebar.selected_backend()

    def open_schedules(self) -> None:
        from desktop.qt.schedules import SchedulesDialog

        if self.schedules is None:
            dialog = SchedulesDialog(self.link, self.main)
            dialog.open_requested.connect(lambda sid: self.open_session(sid))
            self.schedules = dialog
        self.schedules.show()
        self.schedules.raise_()

    # --- notifications -------------------------------------------------------------

    def _visible_window(self, session_id: str) -> Window | None:
        for win in [self.main, *self.windows]:
            if win.session_id == session_id and win.isVisible() and win.isActiveWindow():
                return win
        return None

    def _on_event(self, link: Link, event: Incoming) -> None:
        """Every backend's broadcasts: approvals and finished turns become notifications (a
        remote backend's name them), and the tray says what runs."""
        if event.seq is not None:
            return  # the stored copies are for session windows
        data = event.data
        on = _on(link, self.link)
        if isinstance(data, p.ApprovalRequested):
            approval = data.approval
            self._waiting(link, approval)  # in the tray's menu, whatever else shows it
            if self._visible_window(approval.session_id) is None:
                _title, text = approval_words(approval, on)
                self.notifier.notify(f"Turnkey needs your approval{on}", text,
                                     approval.session_id, approval.approval_id)
        elif isinstance(data, p.ApprovalResolved):
            self.approvals.pop(data.approval.approval_id, None)
            self.notifier.resolve(data.approval.approval_id)
            if self.main.banner_target[1] == data.approval.approval_id:
                self.main.banner.hide()  # answered somewhere: the fallback banner goes too
        elif isinstance(data, p.QuestionEvent):
            self._question_event(link, data, on)
        elif isinstance(data, p.ScheduleChanged):
            fired = data.schedule
            if data.fired and fired is not None and fired.last_session_id and fired.last_fired_at:
                self.scheduled[fired.last_session_id] = fired.last_fired_at
        elif isinstance(data, p.SessionUpdated):
            session = data.session
            sid, status = session.session_id, session.status
            before = self.statuses.get(sid)
            self.statuses[sid] = status
            # (A sub-agent's end shows on its parent's card, whose own end is announced.)
            if (before == "running" or before in WAITING) and status == "idle" \
                    and not session.delegated_from:
                scheduled = self.scheduled.pop(sid, None) is not None
                if self._visible_window(sid) is None:
                    title = "Scheduled turn finished" if scheduled else "Turn finished"
                    self.notifier.notify(f"{title}{on}", session.title or "A session finished",
                                         sid)
        self._tray_state()

    def _question_event(self, link: Link, data: p.QuestionEvent, on: str) -> None:
        """A question asked: in the tray's menu, and a notification (its first choices as
        buttons where the server has them) unless a window in front shows its session; one
        closed: they go."""
        question = data.question
        if not isinstance(data, p.QuestionAsked) or question.status != "pending":
            self._answered(question.question_id)
            return
        if not self.asked.apply(data):
            return  # (already listed, or closed meanwhile)
        self._question_waiting(link, question)
        if self._visible_window(question.session_id) is None:
            title, text = questions.notification_words(question, self._title_of(question), on)
            self.notifier.notify(title, text, question.session_id, question.question_id,
                                 questions.notification_actions(question))

    def _title_of(self, question: p.Question) -> str:
        """The asking session's title, when the sidebar lists it."""
        for section in self.main.sidebar.sections:
            for session in section.rows.rows:
                if session.session_id == question.session_id:
                    return session.title or ""
        return ""

    def _tray_state(self) -> None:
        values = set(self.statuses.values())
        if self.link.current != "connected":
            state = "offline"
        elif values & WAITING:
            state = "approval"
        elif values & {"running", "queued"}:
            state = "working"
        else:
            state = "idle"
        self.notifier.set_state(state)

    def _on_state(self, state: str) -> None:
        self._tray_state()
        if state == "connected" and self._started:  # (the first time, start lists them)
            spawn(self._list_waiting(self.link))

    def _fallback(self, title: str, text: str, session_id: str, approval_id: str) -> None:
        """No tray here: say it in the main window's banner."""
        self.main.show_message(f"{title} — {text.splitlines()[0] if text else ''} (click to open)",
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
        flags = {"background_told": self.background_told,
                 "provider_form_shown": self.provider_form_shown}
        if self.hidden:  # never shown: the windows saved last time stay as they were saved
            self._write_layout(flags)
            return
        current = self.main.current
        data = {
            "main": _geometry(self.main),
            "main_docks": _docks(self.main),
            "splitter": base64.b64encode(bytes(self.main.splitter.saveState().data())).decode(),
            "grouping": self.main.sidebar.model.grouping,
            "current": self.main.session_id,
            "current_backend": current.link.key if current is not None else "local",
            "sessions": [{"session_id": w.session_id, "geometry": _geometry(w),
                          "backend": w.link.key, "docks": _docks(w)} for w in self.windows],
            **flags,
        }
        self._write_layout(data)

    def _write_layout(self, data: dict[str, Any]) -> None:
        try:  # (the pairings and any key not in `data` are kept as they are)
            pairings.write_settings(self.data_dir, data)
        except OSError as exc:
            log.warning("could not save the window layout: %s", exc)


def _on(link: Link, local: Link) -> str:
    """" on HOST" for a remote backend's notifications; "" for this computer's."""
    return f" on {link.where}" if link.where and link is not local else ""


def approval_words(approval: p.Approval, on: str = "") -> tuple[str, str]:
    """An approval in a notification: (a one-line title for the tray's menu, the text of the
    notification: what asks, then why)."""
    tool, origin = shown_name(approval.tool)
    named = f"{tool} ({origin})" if origin else tool
    summary = shown_summary(approval.tool, approval.summary)
    return f"{named}: {summary}{on}", f"{named}: {summary}\n{approval.reason}"


def _geometry(widget: QWidget) -> str:
    return base64.b64encode(bytes(widget.saveGeometry().data())).decode()


def _docks(win: QMainWindow) -> str:
    """The window's docks (the changes panel: open or closed, where, how wide)."""
    return base64.b64encode(bytes(win.saveState().data())).decode()


def _restore_docks(win: QMainWindow, saved: object) -> None:
    if isinstance(saved, str) and saved:
        try:
            win.restoreState(QByteArray(base64.b64decode(saved)))
        except ValueError:  # not base64: a hand-edited file; the panel stays closed
            pass
