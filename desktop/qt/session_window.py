"""The app's windows: the main window (sessions sidebar beside a conversation) and a session
popped out into a window of its own.

Every window has the same menu bar and shortcuts (File, Edit, View, Session, Help) and the
command palette over all of them; what concerns the whole app (a new session, settings, quit,
popping out) is asked of the controller through `requested`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QAction, QCloseEvent, QKeySequence, QShowEvent
from PySide6.QtWidgets import (
    QApplication,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMainWindow,
    QPushButton,
    QSplitter,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from desktop.qt import palette, theme
from desktop.qt.actions import APP_COMMANDS, CONVERSATION_COMMANDS, MENUS, Key
from desktop.qt.aio import spawn
from desktop.qt.changes import ChangesDock
from desktop.qt.compat import emit
from desktop.qt.conversation import Conversation
from desktop.qt.sidebar import Sidebar
from desktop.qt.transcript_view import esc
from desktop.state.sidebar import GROUPINGS
from shared import protocol as p
from shared.client import Incoming
from shared.folders import folder_warning
from shared.methods import SessionCreate

if TYPE_CHECKING:
    from desktop.link import Link



class NewSessionDialog(QDialog):
    def __init__(self, folder: str, parent: QWidget | None = None, remote_host: str = "",
                 backends: Sequence[Link] = (), chosen: Link | None = None,
                 folders: dict[str, str] | None = None) -> None:
        """`remote_host`: the folder is on that computer, so it is typed, not chosen here.
        `backends`: with more than one, the person picks where the session lives (`chosen`
        first); `folders` holds the last folder used on each backend, by its key."""
        super().__init__(parent)
        self.setWindowTitle("New session")
        self.setMinimumWidth(480)
        self.local_folder = folder
        self.folders = dict(folders or {})
        form = QFormLayout(self)
        form.setSpacing(10)
        self.backends = list(backends)
        self.backend = QComboBox()
        self.backend.setAccessibleName("Backend")
        self.backend.setAccessibleDescription("The computer the session lives on; its tools run there")
        for link in self.backends:
            self.backend.addItem(link.title, link.key)
        self.title = QLineEdit()
        self.title.setAccessibleName("Title")
        self.title.setPlaceholderText("optional: named after your first message otherwise")
        self.folder = QLineEdit(folder)
        self.folder.setAccessibleName("Working folder")
        self.folder.setAccessibleDescription("Where the session's tools read and change files")
        self.pick = QPushButton("Choose…")
        self.pick.setIcon(theme.icon("folder"))
        self.pick.setAccessibleDescription("Choose the working folder")
        self.pick.clicked.connect(self._pick)
        row = QHBoxLayout()
        row.addWidget(self.folder, 1)
        row.addWidget(self.pick)
        if len(self.backends) > 1:
            form.addRow("Backend", self.backend)
        form.addRow("Title", self.title)
        form.addRow("Working folder", row)
        self.hint = QLabel()
        self.hint.setProperty("muted", True)
        self.hint.setWordWrap(True)
        form.addRow(self.hint)
        self.warning = QLabel()  # the folder holds all your files: what the session will say
        self.warning.setObjectName("folderWarning")
        self.warning.setProperty("banner", "warning")
        self.warning.setTextFormat(Qt.TextFormat.PlainText)
        self.warning.setWordWrap(True)
        self.warning.hide()
        form.addRow(self.warning)
        self.remote_host = remote_host
        self.folder.textChanged.connect(self._check_folder)
        ok, cancel = QDialogButtonBox.StandardButton.Ok, QDialogButtonBox.StandardButton.Cancel
        buttons = QDialogButtonBox(ok | cancel)
        start = buttons.button(ok)
        start.setText("Start session")
        start.setProperty("primary", True)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        form.addRow(buttons)
        if chosen is not None and chosen in self.backends:
            self.backend.setCurrentIndex(self.backends.index(chosen))
        self._where(remote_host)
        self.backend.currentIndexChanged.connect(self._backend_changed)

    @property
    def chosen(self) -> Link | None:
        """The backend picked (None when there was only one to pick)."""
        i = self.backend.currentIndex()
        return self.backends[i] if 0 <= i < len(self.backends) else None

    def _backend_changed(self, _index: int) -> None:
        link = self.chosen
        host = link.where if link is not None else ""
        self.folder.setText(self.folders.get(link.key, "") if link is not None and host
                            else self.local_folder)
        self._where(host)

    def _where(self, remote_host: str) -> None:
        """A folder on another computer is typed (a file dialog would show this one's)."""
        self.remote_host = remote_host
        self.pick.setVisible(not remote_host)
        self.folder.setPlaceholderText(f"a folder on {remote_host} (empty: its default)"
                                       if remote_host else "")
        self.hint.setText(f"Tools run on {remote_host} and read and change files in this "
                          "folder there; changes elsewhere ask first." if remote_host else
                          "Tools read and change files in this folder; changes elsewhere ask first.")
        self._check_folder()

    def _check_folder(self) -> None:
        """Says, before the session exists, that the sandbox protects nothing in the home folder
        or / (the words its summary will carry).  Only this computer's folders are judged: a
        remote backend's home is its own, and its sessions' summaries say it there."""
        folder = os.path.expanduser(self.folder.text().strip() or "~")  # empty: the home folder
        words = folder_warning(folder) if not self.remote_host and os.path.isabs(folder) else None
        self.warning.setText(words or "")
        self.warning.setVisible(words is not None)

    def _pick(self) -> None:
        dialog = QFileDialog(self, "Working folder", self.folder.text())
        dialog.setFileMode(QFileDialog.FileMode.Directory)
        dialog.setOption(QFileDialog.Option.ShowDirsOnly)
        dialog.fileSelected.connect(self.folder.setText)
        dialog.open()


class Window(QMainWindow):
    """What every window has: menus, shortcuts, the palette, and a conversation to show."""

    # An APP_COMMANDS name (actions.py; or "open_window": a sub-agent's session from a delegate card) and
    # the session it concerns ("" if none).
    requested = Signal(str, str)

    # The actions of actions.CONVERSATION_COMMANDS, by name (made in _menus).
    rename_action: QAction
    stop_action: QAction
    approval_action: QAction
    regenerate_action: QAction
    previous_answer_action: QAction
    next_answer_action: QAction
    edit_action: QAction
    original_action: QAction
    undo_action: QAction
    composer_action: QAction
    latest_action: QAction

    def __init__(self, link: Link) -> None:
        super().__init__()
        self.link = link
        self.current: Conversation | None = None  # the conversation shown
        theme.tidy_window(self)
        self.statusBar().hide()
        # The files the session changed, by turn: closed at first, so it takes no room.
        self.changes = ChangesDock(self)
        self.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, self.changes)
        self.changes.hide()
        self.changes.visibilityChanged.connect(self._changes_shown)

    @property
    def conversation(self) -> Conversation:
        """The conversation shown; LookupError when the window shows none."""
        if self.current is None:
            raise LookupError("this window shows no session")
        return self.current

    @property
    def session_id(self) -> str:
        return self.current.session_id if self.current is not None else ""

    def _menus(self, main: bool) -> None:
        """The window's actions and menus, from the one table every window shares (actions.py):
        the command palette lists the same actions."""
        self.app_actions: dict[str, QAction] = {}
        for command in APP_COMMANDS:
            action = self._action(command.text, command.keys)
            action.triggered.connect(lambda _=False, n=command.name: self._app_action(n))
            self.app_actions[command.name] = action
        self.conversation_actions: dict[str, QAction] = {}
        for spec in CONVERSATION_COMMANDS:
            action = self._action(spec.text, spec.keys)
            action.triggered.connect(lambda _=False, run=spec.run: self._on_conversation(run))
            self.conversation_actions[spec.name] = action
            setattr(self, f"{spec.name}_action", action)  # (self.stop_action, self.undo_action, …)
        close = self._action("&Close window", (QKeySequence.StandardKey.Close,))
        close.triggered.connect(lambda _=False: self.close())
        own = {"close": close, "changes": self.changes.toggleViewAction(),
               "palette": palette.install(self)}
        actions = {**self.app_actions, **self.conversation_actions, **own}
        for title, names in MENUS:
            menu = self.menuBar().addMenu(title)
            for name in names:
                menu.addSeparator() if name is None else menu.addAction(actions[name])
            if title == "&View":
                self.view_menu = menu

    def _action(self, text: str, keys: tuple[Key, ...]) -> QAction:
        action = QAction(text, self)
        if keys:
            action.setShortcuts([QKeySequence(k) for k in keys])
        return action

    def _on_conversation(self, run: Callable[[Conversation], object]) -> None:
        if self.current is not None:
            run(self.current)

    def _app_action(self, name: str) -> None:
        emit(self.requested, name, self.session_id)

    def _enable(self) -> None:
        """Each command enabled as the conversation shown allows (the table's `can`)."""
        has = self.current is not None
        for command in APP_COMMANDS:
            if command.needs_session:
                self.app_actions[command.name].setEnabled(has)
        for spec in CONVERSATION_COMMANDS:
            self.conversation_actions[spec.name].setEnabled(
                self.current is not None and spec.can(self.current))

    def _changed(self) -> None:
        """The conversation shown changed (its title, its status, its session after a
        compression): the title, Stop and the changes panel follow."""
        self._title()
        self._enable()
        self.changes.follow(self.current)

    def _changes_shown(self, visible: bool) -> None:
        """The changes panel opened or closed: the window's layout is saved (not while the
        window itself opens or closes); closed, the focus it held goes to the message box."""
        focused = QApplication.focusWidget()
        if not visible and self.current is not None and focused is not None \
                and self.changes.isAncestorOf(focused):
            self.current.focus_composer()
        if self.isVisible():
            emit(self.requested, "layout", self.session_id)

    def app_title(self) -> str:
        """"Turnkey", or "Turnkey on build-box" while the session shown (else the window's
        backend) lives on another computer."""
        link = self.current.link if self.current is not None else self.link
        return f"Turnkey on {link.where}" if link.where else "Turnkey"

    def refresh_title(self) -> None:
        """After the app moved to another backend: the title names it."""
        self._title()

    def _title(self) -> None:
        c = self.current
        self.setWindowTitle(f"{c.state.title} — {self.app_title()}" if c is not None
                            else self.app_title())

    def show_approval(self, approval_id: str) -> None:
        """Brings the window forward with the approval's card in view (a notification click)."""
        self.showNormal()
        self.raise_()
        self.activateWindow()
        if self.current is not None:
            self.current.focus_approval(approval_id)

    def bring_forward(self) -> None:
        self.showNormal()
        self.raise_()
        self.activateWindow()


class SessionWindow(Window):
    """One session in a window of its own (popped out, or reopened from the saved layout)."""

    closed = Signal(str)  # session_id

    def __init__(self, link: Link, session_id: str) -> None:
        super().__init__(link)
        self.current = self._conversation(link, session_id)
        self.setCentralWidget(self.current)
        self.changes.follow(self.current)
        self._menus(main=False)
        self._enable()
        self._shown = False
        self.setWindowTitle(self.app_title())
        self.resize(860, 720)

    def _conversation(self, link: Link, session_id: str, at_message: str = "") -> Conversation:
        c = Conversation(link, session_id, at_message or None)
        c.changed.connect(self._changed)
        c.open_requested.connect(lambda sid: emit(self.requested, "open_window", sid))
        c.switch_requested.connect(lambda sid, at: self.show_session(sid, at))
        c.add_provider_requested.connect(lambda: emit(self.requested, "add_provider", ""))
        return c

    def show_session(self, session_id: str, at_message: str = "") -> None:
        """Another session in this window (a branch just made, or a branch's original), over
        the same backend's connection."""
        old = self.current
        if old is not None and old.session_id == session_id:
            if at_message:
                spawn(old.show_message(at_message))
            return
        if old is not None:
            old.close_conversation()
        self.current = self._conversation(self.link, session_id, at_message)
        self.setCentralWidget(self.current)  # (the old one is deleted with it, later)
        self._enable()
        self._title()
        self.current.focus_composer()

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        if not self._shown and self.current is not None:
            self._shown = True
            self.current.focus_composer()  # type right away

    def closeEvent(self, event: QCloseEvent) -> None:
        sid = self.session_id
        if self.current is not None:
            self.current.close_conversation()
        emit(self.closed, sid)
        super().closeEvent(event)


class MainWindow(Window):
    """The sessions sidebar and, beside it, the conversation chosen there."""

    closed = Signal()

    def __init__(self, link: Link, default_folder: str) -> None:
        super().__init__(link)
        self.setObjectName("mainWindow")
        self.default_folder = default_folder
        self.remote_folder = ""  # the last folder used on a remote backend (its own paths)
        self.remote_folders: dict[str, str] = {}  # the same, per paired backend's key
        # The backend a session lives on, for a session opened by id alone (a notification, the
        # saved layout); the controller knows every backend's.
        self.home_of: Callable[[str], Link] = lambda _sid: self.link
        self.sidebar = Sidebar(link)
        self.sidebar.setMinimumWidth(220)
        self.sidebar.open_requested.connect(lambda sid, at: self.show_session(sid, at))
        self.sidebar.open_new_requested.connect(lambda sid: emit(self.requested, "pop_out", sid))
        self.sidebar.new_requested.connect(self.new_session)
        self.sidebar.new_on_requested.connect(self._new_on)
        self.sidebar.forget_requested.connect(lambda key: emit(self.requested, "forget", key))
        self.sidebar.backends_requested.connect(lambda key: emit(self.requested, "backends", key))
        self.sidebar.settings_requested.connect(lambda: emit(self.requested, "settings", ""))
        self.sidebar.schedules_requested.connect(lambda: emit(self.requested, "schedules", ""))
        self.sidebar.message.connect(lambda m: self.show_message(m))
        self.banner = QLabel()
        self.banner.setObjectName("noticeBanner")
        self.banner.setProperty("banner", "warning")
        self.banner.setWordWrap(True)
        self.banner.setCursor(Qt.CursorShape.PointingHandCursor)
        self.banner.hide()
        self.banner_target = ("", "")
        self.banner.mousePressEvent = lambda _e: self._banner_clicked()  # type: ignore[method-assign]
        self.sandbox_note = QLabel()  # stays: it is true for as long as the backend runs
        self.sandbox_note.setObjectName("sandboxNote")
        self.sandbox_note.setProperty("banner", "warning")
        self.sandbox_note.setWordWrap(True)
        self.sandbox_note.hide()
        self.conn_label = QLabel()
        self.conn_label.setProperty("tone", "warning")
        self.conn_label.hide()
        self.stack = QStackedWidget()
        self.empty = self._empty_page()
        self.stack.addWidget(self.empty)
        right = QWidget()
        column = QVBoxLayout(right)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(0)
        for note in (self.conn_label, self.banner, self.sandbox_note):
            column.addWidget(note)
        column.addWidget(self.stack, 1)
        self.splitter = QSplitter()
        self.splitter.setChildrenCollapsible(False)
        self.splitter.addWidget(self.sidebar)
        self.splitter.addWidget(right)
        self.splitter.setStretchFactor(1, 1)
        self.splitter.setSizes([290, 890])
        self.setCentralWidget(self.splitter)
        self._menus(main=True)
        self._view_menu()
        self._enable()
        self._title()
        self.resize(1180, 760)
        link.state.connect(self._on_link_state)
        link.received.connect(self.on_event)

    def _empty_page(self) -> QWidget:
        page = QWidget()
        page.setObjectName("emptyPage")
        box = QVBoxLayout(page)
        box.addStretch(2)
        title = QLabel("What shall we work on?")
        title.setObjectName("emptyTitle")
        title.setAlignment(Qt.AlignmentFlag.AlignCenter)
        hint = QLabel("Start a new session, or pick one from the sidebar.\n"
                      "Ctrl+N new session · Ctrl+F search · Ctrl+K every command")
        hint.setProperty("muted", True)
        hint.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.start_button = QPushButton("New session")
        self.start_button.setProperty("primary", True)
        self.start_button.setAccessibleDescription("Start a new session (Ctrl+N)")
        self.start_button.clicked.connect(self.new_session)
        row = QHBoxLayout()
        row.addStretch(1)
        row.addWidget(self.start_button)
        row.addStretch(1)
        box.addWidget(title)
        box.addSpacing(6)
        box.addWidget(hint)
        box.addSpacing(14)
        box.addLayout(row)
        box.addStretch(3)
        return page

    def _view_menu(self) -> None:
        self.sidebar_action = QAction("Show &sidebar", self, checkable=True)
        self.sidebar_action.setShortcut(QKeySequence("Ctrl+Shift+S"))
        self.sidebar_action.setChecked(True)
        self.sidebar_action.toggled.connect(self.sidebar.setVisible)
        self.view_menu.insertAction(self.view_menu.actions()[0], self.sidebar_action)
        for key, _text in GROUPINGS:
            self.view_menu.addAction(self.sidebar.group_actions[key])
        self.view_menu.insertSeparator(self.sidebar.group_actions[GROUPINGS[0][0]])

    def _app_action(self, name: str) -> None:
        if name == "find":
            self.sidebar_action.setChecked(True)
            self.sidebar.focus_search()
        elif name == "new":
            self.new_session()
        elif name == "delete" and self.current is not None:
            self.sidebar.confirm_delete(self.session_id)
        else:
            super()._app_action(name)

    # --- the conversation beside the sidebar --------------------------------------

    def show_session(self, session_id: str, at_message: str = "",
                     link: Link | None = None) -> Conversation:
        """Shows a session beside the sidebar (at a message, for a search match), over its own
        backend's connection (`link`, else where the sidebar or the app saw it); its message
        box takes the focus."""
        link = link or self.sidebar.link_of(session_id) or self.home_of(session_id)
        c = self.current
        if c is not None and c.session_id == session_id and c.link is link:
            if at_message:
                spawn(c.show_message(at_message))
        else:
            if c is not None:
                self.stack.removeWidget(c)
                c.close_conversation()
                c.deleteLater()
            c = Conversation(link, session_id, at_message or None)
            c.changed.connect(self._changed)
            c.moved.connect(lambda _old, new: self.sidebar.mark_current(new))
            c.open_requested.connect(lambda sid: emit(self.requested, "open_window", sid))
            c.add_provider_requested.connect(lambda: emit(self.requested, "add_provider", ""))
            c.switch_requested.connect(
                lambda sid, at, link=link: self.show_session(sid, at, link))
            self.current = c
            self.stack.addWidget(c)
            self.stack.setCurrentWidget(c)
            self._enable()
            self.changes.follow(c)
        self.sidebar.mark_current(session_id)
        c.focus_composer()
        self._title()
        return c

    def clear_session(self) -> None:
        c = self.current
        if c is None:
            return
        self.current = None
        self.sidebar.mark_current(None)
        self.changes.follow(None)
        self.stack.removeWidget(c)
        c.close_conversation()
        c.deleteLater()
        self.stack.setCurrentWidget(self.empty)
        self._enable()
        self._title()

    def on_event(self, event: Incoming) -> None:
        """A backend's broadcast: the session shown was deleted (anywhere), so it goes."""
        if isinstance(event.data, p.SessionDeletedEvent) and event.session_id == self.session_id:
            self.clear_session()

    # --- new sessions -------------------------------------------------------------

    def new_session(self, link: Link | None = None) -> None:
        """The new-session dialog; with several backends it asks which one, `link` (else the
        selected section's) first."""
        self.bring_forward()
        backends = [section.link for section in self.sidebar.sections]
        link = link or self.sidebar.selected_backend()
        remote = link.where
        last = self.remote_folder if link is self.link else ""  # (the app launched on it)
        folder = self.remote_folders.get(link.key, last) if remote else self.default_folder
        dialog = NewSessionDialog(folder, self, remote, backends, link, self.remote_folders)
        dialog.local_folder = self.default_folder
        dialog.accepted.connect(
            lambda: self.create_session(dialog.title.text().strip(), dialog.folder.text().strip(),
                                        dialog.chosen or link))
        dialog.open()
        self.new_dialog = dialog

    def _new_on(self, key: str) -> None:
        link = next((s.link for s in self.sidebar.sections if s.link.key == key), None)
        self.new_session(link)

    def create_session(self, title: str, folder: str, link: Link | None = None) -> None:
        link = link or self.link

        async def go() -> None:
            if folder and link.remote_host:
                self.remote_folder = folder
                self.remote_folders[link.key] = folder
            elif folder:
                self.default_folder = folder
            result = await link.call(SessionCreate(title=title or None, cwd=folder or None))
            self.sidebar.add(result.session, link)
            self.show_session(result.session.session_id, link=link)

        spawn(go(), self.show_message)

    # --- notices ------------------------------------------------------------------

    def show_message(self, text: str, session_id: str = "", approval_id: str = "") -> None:
        self.banner.setText(text)
        self.banner_target = (session_id, approval_id)
        self.banner.show()
        if not session_id:
            QTimer.singleShot(10_000, self, self.banner.hide)

    def show_sandbox_warning(self, reason: str) -> None:
        self.sandbox_note.setText(
            f"<b>Commands run without a sandbox</b>: {esc(reason)}. Every command that is not plainly "
            "read-only asks you first.")
        self.sandbox_note.show()

    def _banner_clicked(self) -> None:
        sid, aid = self.banner_target
        self.banner.hide()
        if sid:
            self.show_session(sid)
            if aid and self.current is not None:
                self.current.focus_approval(aid)

    def _on_link_state(self, state: str) -> None:
        text = {"connected": "", "reconnecting": "⟳ Reconnecting to the Turnkey service…",
                "starting": "Starting the Turnkey service…", "connecting": "Connecting…"}
        words = text.get(state, state)
        self.conn_label.setText(words)
        self.conn_label.setVisible(bool(words))

    def closeEvent(self, event: QCloseEvent) -> None:
        emit(self.closed)
        super().closeEvent(event)

