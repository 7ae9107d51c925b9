"""The main window's sessions sidebar: new, search with snippets, every session grouped by day
or by folder, with its live status and cost.

A click (or Enter) opens a session beside the sidebar; a search result opens at the message
that matched.  F2 renames, Delete deletes (after asking), the context menu also pops a session
out into a window of its own.  The list stays current from the backend's broadcasts.  The rows
are `sidebar_model.SidebarModel`'s, shown by `sidebar_view.SessionListView` (which holds the
row's actions) and painted by `sidebar_delegate.SessionDelegate`; what they hold and say, and
what the sidebar lists and asks, is `desktop/state/sidebar.py`'s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QEvent, QObject, QPoint, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QKeyEvent
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMenu,
    QMessageBox,
    QPushButton,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from desktop.qt import theme
from desktop.qt.aio import spawn
from desktop.qt.compat import emit
from desktop.qt.doors import DoorWatch
from desktop.qt.doors_view import DoorStrip
from desktop.qt.sidebar_model import SidebarModel
from desktop.qt.sidebar_view import SessionListView
from desktop.state import sidebar as words
from desktop.state.sessions import SessionRows
from desktop.state.sidebar import GROUPINGS, PAGE, Section
from shared import protocol as p
from shared.client import ClientState, Incoming, RpcError, SessionBusy
from shared.methods import SessionDelete, SessionList, SessionUpdate

if TYPE_CHECKING:
    from desktop.link import Link


class Sidebar(QWidget):
    """New session, the search, the sessions of every backend, the doors, Schedules and
    Settings, top to bottom."""

    open_requested = Signal(str, str)  # session_id, the message to open at ("" for the end)
    open_new_requested = Signal(str)  # session_id: in a window of its own
    new_requested = Signal()
    settings_requested = Signal()
    schedules_requested = Signal()
    message = Signal(str)  # something went wrong: the window says it
    new_on_requested = Signal(str)  # a backend's key: a new session there (its header's menu)
    forget_requested = Signal(str)  # a remote backend's key: remove its pairing (asked first)
    backends_requested = Signal(str)  # a backend's key: the Backends view of its store

    def __init__(self, link: Link) -> None:
        super().__init__()
        self.setObjectName("sidebar")
        self.link = link
        self.sections = [Section(link, SessionRows())]
        self.sessions = self.sections[0].rows  # this computer's (or `--remote`'s) sessions
        self.model = SidebarModel(self.sections)
        self.state = self.model.state  # the rows and what they say (desktop.state.sidebar)
        self.model.more = self._load_more
        self.model.rename.connect(self.rename)
        self._loading_more = False
        self._keep: str | None = None  # the current session across a model reset
        # The session shown beside the sidebar: marked once listed, when it was shown first
        # (a start shows the saved session before the first listing arrives).
        self._marked: str | None = None
        self._build()
        self._listen(self.sections[0])
        self.doors.watch(link)
        self._search_timer = QTimer(self, singleShot=True, interval=250)
        self._search_timer.timeout.connect(self.reload)
        self._age_timer = QTimer(self, interval=30_000)
        self._age_timer.timeout.connect(self.model.refresh_all)
        self._age_timer.start()
        theme.changed.connect(self._restyle)
        self._restyle()

    def _build(self) -> None:
        box = QVBoxLayout(self)
        box.setContentsMargins(10, 10, 10, 10)
        box.setSpacing(8)
        top = self._top()
        self._search_field()
        self._session_list()
        self.empty = QLabel(words.EMPTY)
        self.empty.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty.setProperty("muted", True)
        self.empty.setWordWrap(True)
        self.empty.hide()
        bottom = self._bottom()
        # Says which backend the sessions live on, while it is not this computer's.
        self.backend_label = QLabel()
        self.backend_label.setObjectName("backendLabel")
        self.backend_label.setProperty("muted", True)
        self.backend_label.setTextFormat(Qt.TextFormat.PlainText)
        self.backend_label.setAccessibleName("Backend")
        self.backend_label.hide()
        box.addLayout(top)
        box.addWidget(self.backend_label)
        box.addWidget(self.search)
        box.addWidget(self.list, 1)
        box.addWidget(self.empty, 1)
        # Each backend's messaging doors (Matrix), when it has one: state at a glance.
        self.doors: DoorStrip = DoorStrip(self)
        box.addWidget(self.doors)
        box.addLayout(bottom)

    def _top(self) -> QHBoxLayout:
        """New session, and beside it the options: how the sessions are grouped."""
        self.new_button = QPushButton("New session")
        self.new_button.setObjectName("newSession")
        self.new_button.setAccessibleDescription("Start a new session (Ctrl+N)")
        self.new_button.setToolTip("New session (Ctrl+N)")
        self.new_button.clicked.connect(lambda: emit(self.new_requested))
        self.options = QToolButton()
        self.options.setObjectName("sidebarOptions")
        self.options.setAccessibleName("Sidebar options")
        self.options.setAccessibleDescription("Group the sessions by day or by folder")
        self.options.setToolTip("Group sessions")
        self.options.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.group_actions: dict[str, QAction] = {}
        menu = QMenu(self.options)
        for key, text in GROUPINGS:
            action = QAction(f"Group {text.lower()}", self, checkable=True)
            action.setChecked(key == self.model.grouping)
            action.triggered.connect(lambda _=False, k=key: self.set_grouping(k))
            self.group_actions[key] = action
            menu.addAction(action)
        self.options.setMenu(menu)
        top = QHBoxLayout()
        top.setSpacing(6)
        top.addWidget(self.new_button, 1)
        top.addWidget(self.options)
        return top

    def _search_field(self) -> None:
        self.search = QLineEdit()
        self.search.setAccessibleName("Search sessions")
        self.search.setAccessibleDescription("Finds sessions by title and by what was said in them")
        self.search.setPlaceholderText("Search (Ctrl+F)")
        self.search.setClearButtonEnabled(True)
        self.search.textChanged.connect(lambda _: self._search_timer.start())
        self.search.returnPressed.connect(self._first_result)
        self.search.installEventFilter(self)
        self._search_icon = self.search.addAction(theme.icon("search"),
                                                  QLineEdit.ActionPosition.LeadingPosition)
        self._search_icon.setText("Search")
        self._search_icon.triggered.connect(lambda _=False: self.focus_search())
        for button in self.search.findChildren(QToolButton):  # the icon and the clear button
            action = button.defaultAction()
            button.setAccessibleName("Search" if action is self._search_icon else "Clear the search")

    def _session_list(self) -> None:
        self.list = SessionListView(self.model)
        self.open_action, self.open_new_action = self.list.open_action, self.list.open_new_action
        self.rename_action, self.delete_action = self.list.rename_action, self.list.delete_action
        for mine, its in ((self.open_requested, self.list.open_requested),
                          (self.open_new_requested, self.list.open_new_requested),
                          (self.new_on_requested, self.list.new_on_requested),
                          (self.forget_requested, self.list.forget_requested),
                          (self.backends_requested, self.list.backends_requested)):
            its.connect(mine)
        self.list.delete_requested.connect(self.confirm_delete)
        self.list.customContextMenuRequested.connect(self._context_menu)
        self.model.modelAboutToBeReset.connect(self._remember)
        self.model.modelReset.connect(self._restore)

    def _bottom(self) -> QHBoxLayout:
        """Schedules and Settings, under the sessions scheduled runs make."""
        self.settings_button = QPushButton("Settings")
        self.settings_button.setObjectName("sidebarSettings")
        self.settings_button.setFlat(True)
        self.settings_button.setAccessibleDescription("Providers, models, approvals (Ctrl+,)")
        self.settings_button.setToolTip("Settings (Ctrl+,)")
        self.settings_button.clicked.connect(lambda: emit(self.settings_requested))
        self.schedules_button = QPushButton("Schedules")
        self.schedules_button.setObjectName("sidebarSchedules")
        self.schedules_button.setFlat(True)
        self.schedules_button.setAccessibleDescription("Prompts Turnkey sends later, once or on a repeat")
        self.schedules_button.setToolTip("Scheduled prompts")
        self.schedules_button.clicked.connect(lambda: emit(self.schedules_requested))
        bottom = QHBoxLayout()
        bottom.setSpacing(0)
        bottom.addWidget(self.schedules_button)
        bottom.addWidget(self.settings_button)
        bottom.addStretch(1)
        return bottom

    def show_backend(self, host: str) -> None:
        """"On HOST" above the sessions for a remote backend; nothing for this computer's,
        nor while several backends each have a header of their own."""
        text, tip, shown = self.state.backend_label(host)
        self.backend_label.setText(text)
        self.backend_label.setToolTip(tip)
        self.backend_label.setVisible(shown)

    # --- backends ------------------------------------------------------------------

    def add_backend(self, link: Link) -> None:
        """A section for another backend: its sessions listed under a header naming it."""
        section = Section(link, SessionRows())
        self.sections.append(section)
        self.model.watch(section)
        self._listen(section)
        self.doors.watch(link)
        self.backend_label.hide()
        self.model.rebuild()
        self._update_empty()
        if link.current == "connected":
            spawn(self._reload(section), lambda m: emit(self.message, m))

    def remove_backend(self, link: Link) -> None:
        self.sections[:] = [s for s in self.sections if s.link is not link]
        self.doors.forget(link)
        self.show_backend(self.link.remote_host)
        self.model.rebuild()
        self._update_empty()

    def _listen(self, section: Section[Link]) -> None:
        link = section.link
        link.received.connect(lambda event: self._on_event(section, event))
        link.state.connect(lambda _state: self._backend_changed(section))
        link.refused.connect(lambda _why: self._backend_changed(section))
        DoorWatch.of(link).changed.connect(self.model.refresh_all)  # rooms bound, unbound

    def _backend_changed(self, section: Section[Link]) -> None:
        redraws = self.state.redraws(section)
        if redraws == "header":
            self.model.refresh_backend(section.link)
        elif redraws == "all":  # its note ("No sessions yet", "…once it answers") changes too
            self.model.rebuild()

    def link_of(self, session_id: str) -> Link | None:
        """The backend of a listed session (None when it is not listed)."""
        return self.state.link_of(session_id)

    def selected_backend(self) -> Link:
        """The backend of the section the current row is in (the first when none is)."""
        index = self.list.currentIndex()
        section = self.model.section_at(index.row()) if index.isValid() else None
        return section.link if section is not None else self.link

    def _context_menu(self, pos: QPoint) -> None:
        self.context_menu = self.list.menu_at(pos)

    def _restyle(self, _scheme: str = "") -> None:
        self.new_button.setIcon(theme.icon("new"))
        self.options.setIcon(theme.icon("more"))
        self.settings_button.setIcon(theme.icon("settings"))
        self.schedules_button.setIcon(theme.icon("schedule"))
        self._search_icon.setIcon(theme.icon("search"))
        self.list.viewport().update()

    def focus_search(self) -> None:
        self.search.setFocus(Qt.FocusReason.ShortcutFocusReason)
        self.search.selectAll()

    def set_grouping(self, key: str) -> None:
        self.model.grouping = key
        for k, action in self.group_actions.items():
            action.setChecked(k == key)
        self.model.rebuild()

    # --- the current session -------------------------------------------------------

    def mark_current(self, session_id: str | None) -> None:
        """Shows `session_id` as the current row (the session beside the sidebar)."""
        self._marked = session_id
        self.list.mark_current(session_id)

    def _remember(self) -> None:
        self._keep = self.selected_id()

    def _restore(self) -> None:
        if self._keep or self._marked:
            self.mark_current(self._keep or self._marked)
        self._update_empty()

    # --- data ----------------------------------------------------------------------

    def reload(self) -> None:
        """Every connected backend's sessions afresh (a backend not connected is listed
        when it connects)."""
        for section in self.state.to_reload():
            spawn(self._reload(section), lambda m: emit(self.message, m))

    async def _reload(self, section: Section[Link] | None = None) -> None:
        section = section or self.sections[0]
        query = self.search.text().strip()
        section.rows.loading()  # (what arrives meanwhile is applied again over the result)
        result = await section.link.call(SessionList(limit=PAGE, query=query or None))
        if query != self.search.text().strip() or section not in self.sections:
            return  # typed on meanwhile (the newer search wins), or the backend was removed
        self.state.listed(section, result.matches)
        section.rows.load(result.sessions, result.next_cursor, query)
        self._update_empty()

    def _load_more(self) -> None:
        waiting = self.state.waiting()
        if self._loading_more or not waiting:
            return
        self._loading_more = True

        async def more() -> None:
            try:
                for section in waiting:
                    rows = section.rows
                    result = await section.link.call(SessionList(
                        limit=PAGE, cursor=rows.next_cursor, query=rows.query or None))
                    self.state.matches.update({m.session_id: m for m in result.matches})
                    rows.extend(result.sessions, result.next_cursor)
            finally:
                self._loading_more = False

        spawn(more(), lambda m: emit(self.message, m))

    def _update_empty(self) -> None:
        empty = self.state.empty_words()
        self.empty.setVisible(empty is not None)
        self.list.setVisible(empty is None)
        if empty is not None:
            self.empty.setText(empty)

    def _on_event(self, section: Section[Link], event: Incoming) -> None:
        if section not in self.sections:
            return  # a backend removed a moment ago
        if self.state.lists(event):
            section.rows.apply(event)
            self._update_empty()
        elif isinstance(event.data, ClientState) and event.data.state == "connected":
            # What changed while we were away (the first backend: the app reloads it itself
            # once started).
            spawn(self._reload(section), lambda m: emit(self.message, m))

    def add(self, session: p.Session, link: Link | None = None) -> None:
        """A session this app just created (on `link`'s backend), listed before its
        broadcast arrives."""
        section = self.state.section_of(link)
        created = p.SessionCreated(session=session)
        section.rows.apply(Incoming(p.event_name(created), session.session_id, created))
        self._update_empty()

    # --- actions -------------------------------------------------------------------

    def selected_id(self) -> str | None:
        return self.list.selected_id()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        """Down in the search field goes on to the list, at its first session."""
        if watched is self.search and isinstance(event, QKeyEvent) \
                and event.type() == QEvent.Type.KeyPress and event.key() == Qt.Key.Key_Down:
            first = self.list.first_index()
            if first is not None:
                self.list.setFocus(Qt.FocusReason.TabFocusReason)
                self.list.setCurrentIndex(first)
                return True
        return False

    def _first_result(self) -> None:
        """Enter in the search field opens the best match."""
        index = self.list.first_index()
        if index is not None:
            self.list.setCurrentIndex(index)
            self.list.open_index(index)

    def rename(self, session_id: str, title: str) -> None:
        link = self.link_of(session_id) or self.link
        spawn(link.call(SessionUpdate(session_id=session_id, title=title)),
              lambda m: emit(self.message, m))

    def confirm_delete(self, sid: str) -> None:
        box = QMessageBox(QMessageBox.Icon.Warning, "Delete session",
                          words.delete_question(self.state.listed_title(sid)),
                          QMessageBox.StandardButton.Cancel, self)
        delete = box.addButton("Delete", QMessageBox.ButtonRole.DestructiveRole)
        delete.setProperty("danger", True)
        box.buttonClicked.connect(
            lambda b: self.delete(sid) if box.buttonRole(b) == QMessageBox.ButtonRole.DestructiveRole
            else None)
        box.open()
        self.delete_box = box

    def delete(self, session_id: str, force: bool = False) -> None:
        async def go() -> None:
            try:
                link = self.link_of(session_id) or self.link
                await link.call(SessionDelete(session_id=session_id, force=force))
            except RpcError as exc:
                if isinstance(exc, SessionBusy):
                    emit(self.message, words.BUSY_DELETE)
                    self.state.busy(session_id)
                    return
                raise

        force = self.state.forcing(session_id, force)
        spawn(go(), lambda m: emit(self.message, m))
