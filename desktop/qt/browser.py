"""The session browser: every session with its live status, search, new, rename, delete, open."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QColor, QKeySequence
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QMainWindow,
    QMessageBox,
    QPushButton,
    QTableView,
    QToolBar,
    QVBoxLayout,
    QWidget,
)

from desktop.qt import palette
from desktop.qt.aio import spawn
from desktop.qt.compat import emit
from desktop.qt.transcript_view import esc
from desktop.state.sessions import SessionRows, ago, cost, status_label
from shared import protocol as p
from shared.client import ClientState, Incoming, RpcError
from shared.errors import ErrorCode
from shared.methods import SessionCreate, SessionDelete, SessionList, SessionUpdate

if TYPE_CHECKING:
    from desktop.link import Link

COLUMNS = ("Title", "Status", "Model", "Last activity", "Cost")
STATUS_COLORS = {"running": "#2f7de1", "waiting_approval": "#d68a00", "queued": "#2f7de1",
                 "unknown": "#b8860b"}
Index = QModelIndex | QPersistentModelIndex
PAGE = 100


class SessionTableModel(QAbstractTableModel):
    rename = Signal(str, str)  # session_id, new title

    def __init__(self, sessions: SessionRows) -> None:
        super().__init__()
        self.sessions = sessions
        self.more: Any = None  # set by the browser: loads the next page
        sessions.on_reset = self._reset
        sessions.on_row = self._row

    def _reset(self) -> None:
        self.beginResetModel()
        self.endResetModel()

    def _row(self, i: int) -> None:
        emit(self.dataChanged, self.index(i, 0), self.index(i, len(COLUMNS) - 1))

    def rowCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self.sessions.rows)

    def columnCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008
        return len(COLUMNS)

    def headerData(self, section: int, orientation: Qt.Orientation,
                   role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return COLUMNS[section]
        return None

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        s = self.sessions.rows[index.row()]
        col = index.column()
        if role in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.EditRole):
            if col == 0:
                return s.title or "New session"
            if col == 1:
                return status_label(s.status)
            if col == 2:
                return s.model
            if col == 3:
                return ago(s.updated_at)
            return cost(s)
        if role == Qt.ItemDataRole.ForegroundRole and col == 1:
            color = STATUS_COLORS.get(s.status)
            return QColor(color) if color else None
        if role == Qt.ItemDataRole.ToolTipRole:
            return f"{s.cwd}\n{s.message_count} messages"
        if role == Qt.ItemDataRole.UserRole:
            return s.session_id
        return None

    def flags(self, index: Index) -> Qt.ItemFlag:
        base = super().flags(index)
        return base | Qt.ItemFlag.ItemIsEditable if index.column() == 0 else base

    def setData(self, index: Index, value: Any, role: int = Qt.ItemDataRole.EditRole) -> bool:
        if role != Qt.ItemDataRole.EditRole or index.column() != 0:
            return False
        title = str(value).strip()
        if not title:
            return False
        emit(self.rename, self.sessions.rows[index.row()].session_id, title)
        return True

    def canFetchMore(self, parent: Index) -> bool:
        return not parent.isValid() and bool(self.sessions.next_cursor)

    def fetchMore(self, parent: Index) -> None:
        if self.more is not None:
            self.more()


class NewSessionDialog(QDialog):
    def __init__(self, folder: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("New session")
        form = QFormLayout(self)
        self.title = QLineEdit()
        self.title.setPlaceholderText("optional: named after your first message otherwise")
        self.folder = QLineEdit(folder)
        self.folder.setAccessibleName("Working folder")
        self.folder.setAccessibleDescription("Where the session's tools read and change files")
        pick = QPushButton("Choose…")
        pick.setAccessibleDescription("Choose the working folder")
        pick.clicked.connect(self._pick)
        row = QHBoxLayout()
        row.addWidget(self.folder, 1)
        row.addWidget(pick)
        form.addRow("Title", self.title)
        form.addRow("Working folder", row)
        hint = QLabel("Tools read and change files in this folder; changes elsewhere ask first.")
        hint.setStyleSheet("color: #8a8f98")
        form.addRow(hint)
        ok, cancel = QDialogButtonBox.StandardButton.Ok, QDialogButtonBox.StandardButton.Cancel
        buttons = QDialogButtonBox(ok | cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        form.addRow(buttons)

    def _pick(self) -> None:
        dialog = QFileDialog(self, "Working folder", self.folder.text())
        dialog.setFileMode(QFileDialog.FileMode.Directory)
        dialog.setOption(QFileDialog.Option.ShowDirsOnly)
        dialog.fileSelected.connect(self.folder.setText)
        dialog.open()


class BrowserWindow(QMainWindow):
    open_requested = Signal(str)  # session_id: its window, or a new one if none is open
    open_new_requested = Signal(str)  # session_id: always another window
    settings_requested = Signal()
    quit_requested = Signal()
    folder_requested = Signal(str)  # "logs" or "data"

    def __init__(self, link: Link, default_folder: str) -> None:
        super().__init__()
        self.link = link
        self.default_folder = default_folder
        self.sessions = SessionRows()
        self.model = SessionTableModel(self.sessions)
        self.model.more = self._load_more
        self.model.rename.connect(self.rename)
        self._loading_more = False
        self._force_next: str | None = None  # a busy session the user asked to delete once already
        self.setWindowTitle("Turnkey")
        self.resize(900, 560)
        self._build()
        link.received.connect(self._on_event)
        link.state.connect(self._on_link_state)
        self._search_timer = QTimer(self, singleShot=True, interval=250)
        self._search_timer.timeout.connect(self.reload)
        self._age_timer = QTimer(self, interval=30_000)  # "5 min ago" stays true
        self._age_timer.timeout.connect(self.model._reset)
        self._age_timer.start()

    def _build(self) -> None:
        central = QWidget()
        box = QVBoxLayout(central)
        self.search = QLineEdit()
        self.search.setAccessibleName("Search sessions")
        self.search.setAccessibleDescription("Finds sessions by title and by what was said in them")
        self.search.setPlaceholderText("Search titles and messages (Ctrl+F)")
        self.search.setClearButtonEnabled(True)
        self.search.textChanged.connect(lambda _: self._search_timer.start())
        self.banner = QLabel()
        self.banner.setWordWrap(True)
        self.banner.setStyleSheet("background: #d68a00; color: white; padding: 6px; border-radius: 4px")
        self.banner.hide()
        self.banner_target = ("", "")
        self.banner.mousePressEvent = lambda _e: self._banner_clicked()  # type: ignore[method-assign]
        self.sandbox_note = QLabel()  # stays: it is true for as long as the backend runs
        self.sandbox_note.setWordWrap(True)
        self.sandbox_note.setStyleSheet(
            "background: rgba(214, 138, 0, 0.15); border: 1px solid #d68a00; padding: 6px;"
            "border-radius: 4px")
        self.sandbox_note.hide()
        self.table = QTableView()
        self.table.setAccessibleName("Sessions")
        self.table.setAccessibleDescription(
            "Every session, most recent first: Enter opens one, F2 renames it, Delete deletes it")
        self.table.horizontalHeader().setAccessibleName("Session columns")
        self.table.setModel(self.model)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.EditKeyPressed)
        self.table.verticalHeader().hide()
        self.table.setShowGrid(False)
        self.table.setAlternatingRowColors(True)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        for col in range(1, len(COLUMNS)):
            header.setSectionResizeMode(col, QHeaderView.ResizeMode.ResizeToContents)
        # `activated` is a double click, or Enter/Return on the current row (a single click
        # where the desktop asks for that); one signal, so a double click opens once.
        self.table.activated.connect(
            lambda i: emit(self.open_requested, i.data(Qt.ItemDataRole.UserRole)))
        self.empty = QLabel("No sessions yet. Press Ctrl+N to start one.")
        self.empty.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty.setStyleSheet("color: #8a8f98")
        box.addWidget(self.banner)
        box.addWidget(self.sandbox_note)
        box.addWidget(self.search)
        box.addWidget(self.table, 1)
        box.addWidget(self.empty)
        self.setCentralWidget(central)

        bar = QToolBar("Sessions")
        bar.setMovable(False)
        self.addToolBar(bar)
        self.new_action = self._action("New session", QKeySequence.StandardKey.New, self.new_session)
        self.open_action = self._action("Open", QKeySequence("Ctrl+O"), self.open_selected)
        self.open_new_action = self._action("Open in new window", QKeySequence("Ctrl+Shift+O"),
                                            self.open_selected_new)
        self.rename_action = self._action("Rename", QKeySequence("F2"), self.rename_selected)
        self.delete_action = self._action("Delete", QKeySequence.StandardKey.Delete, self.delete_selected)
        # Explicit keys: the platform's StandardKey for these is empty on many Linux desktops.
        self.settings_action = self._action("Settings", QKeySequence("Ctrl+,"),
                                            lambda: emit(self.settings_requested))
        self.quit_action = self._action("Quit", QKeySequence("Ctrl+Q"),
                                        lambda: emit(self.quit_requested))
        find = self._action("Search", QKeySequence.StandardKey.Find, self._focus_search)
        for a in (self.new_action, self.open_action, self.rename_action, self.delete_action):
            bar.addAction(a)
        bar.addSeparator()
        bar.addAction(self.settings_action)
        self.addAction(find)
        self.addAction(self.quit_action)
        menu = self.menuBar().addMenu("&File")
        for a in (self.new_action, self.open_action, self.open_new_action, self.rename_action,
                  self.delete_action):
            menu.addAction(a)
        self.table.setContextMenuPolicy(Qt.ContextMenuPolicy.ActionsContextMenu)
        for a in (self.open_action, self.open_new_action, self.rename_action, self.delete_action):
            self.table.addAction(a)
        menu.addSeparator()
        menu.addAction(self.settings_action)
        menu.addSeparator()
        menu.addAction(self.quit_action)
        help_menu = self.menuBar().addMenu("&Help")
        help_menu.addAction(palette.install(self))
        help_menu.addSeparator()
        self.logs_action = QAction("Open logs folder", self)
        self.logs_action.triggered.connect(lambda _=False: emit(self.folder_requested, "logs"))
        self.data_action = QAction("Open data folder", self)
        self.data_action.triggered.connect(lambda _=False: emit(self.folder_requested, "data"))
        help_menu.addAction(self.logs_action)
        help_menu.addAction(self.data_action)
        self.conn_label = QLabel()
        self.statusBar().addPermanentWidget(self.conn_label)

    def _action(self, text: str, key: Any, slot: Any) -> QAction:
        action = QAction(text, self)
        action.setShortcut(QKeySequence(key))
        action.triggered.connect(lambda _=False: slot())
        return action

    def _focus_search(self) -> None:
        self.search.setFocus()
        self.search.selectAll()

    # --- data ----------------------------------------------------------------------

    def reload(self) -> None:
        spawn(self._reload(), self.show_message)

    async def _reload(self) -> None:
        query = self.search.text().strip()
        result = await self.link.call(SessionList(limit=PAGE, query=query or None))
        if query != self.search.text().strip():
            return  # typed on meanwhile; the newer search wins
        self.sessions.load(result.sessions, result.next_cursor, query)
        self._update_empty()

    def _load_more(self) -> None:
        if self._loading_more or not self.sessions.next_cursor:
            return
        self._loading_more = True

        async def more() -> None:
            try:
                result = await self.link.call(SessionList(
                    limit=PAGE, cursor=self.sessions.next_cursor, query=self.sessions.query or None))
                self.sessions.extend(result.sessions, result.next_cursor)
            finally:
                self._loading_more = False

        spawn(more(), self.show_message)

    def _update_empty(self) -> None:
        none = not self.sessions.rows
        self.empty.setVisible(none)
        if none and self.sessions.query:
            self.empty.setText(f"Nothing matches “{self.sessions.query}”.")
        elif none:
            self.empty.setText("No sessions yet. Press Ctrl+N to start one.")

    def _on_event(self, event: Incoming) -> None:
        if event.type in ("session.created", "session.updated", "session.deleted") \
                and (event.seq is None or event.type != "session.updated"):
            self.sessions.apply(event)
            self._update_empty()
        elif isinstance(event.data, ClientState) and event.data.state == "connected":
            self.reload()  # what changed while we were away

    def _on_link_state(self, state: str) -> None:
        text = {"connected": "", "reconnecting": "⟳ Reconnecting to the Turnkey service…",
                "starting": "Starting the Turnkey service…", "connecting": "Connecting…"}
        self.conn_label.setText(text.get(state, state))

    # --- actions -------------------------------------------------------------------

    def selected_id(self) -> str | None:
        rows = self.table.selectionModel().selectedRows()
        return rows[0].data(Qt.ItemDataRole.UserRole) if rows else None

    def open_selected(self) -> None:
        sid = self.selected_id()
        if sid:
            emit(self.open_requested, sid)

    def open_selected_new(self) -> None:
        sid = self.selected_id()
        if sid:
            emit(self.open_new_requested, sid)

    def new_session(self) -> None:
        dialog = NewSessionDialog(self.default_folder, self)
        dialog.accepted.connect(
            lambda: self.create_session(dialog.title.text().strip(), dialog.folder.text().strip()))
        dialog.open()

    def create_session(self, title: str, folder: str) -> None:
        async def go() -> None:
            if folder:
                self.default_folder = folder
            result = await self.link.call(SessionCreate(title=title or None, cwd=folder or None))
            session = result.session
            self.sessions.apply(Incoming("session.created", session.session_id,
                                         p.SessionEvent(session=session)))
            emit(self.open_requested, session.session_id)

        spawn(go(), self.show_message)

    def rename_selected(self) -> None:
        rows = self.table.selectionModel().selectedRows()
        if rows:
            self.table.edit(rows[0])

    def rename(self, session_id: str, title: str) -> None:
        spawn(self.link.call(SessionUpdate(session_id=session_id, title=title)), self.show_message)

    def delete_selected(self) -> None:
        sid = self.selected_id()
        if not sid:
            return
        i = self.sessions.index(sid)
        title = self.sessions.rows[i].title if i is not None else sid
        box = QMessageBox(QMessageBox.Icon.Warning, "Delete session",
                          f"Delete “{title}” and its whole transcript? This cannot be undone.",
                          QMessageBox.StandardButton.Cancel, self)
        box.addButton("Delete", QMessageBox.ButtonRole.DestructiveRole)
        box.buttonClicked.connect(
            lambda b: self.delete(sid) if box.buttonRole(b) == QMessageBox.ButtonRole.DestructiveRole
            else None)
        box.open()

    def delete(self, session_id: str, force: bool = False) -> None:
        async def go() -> None:
            try:
                await self.link.call(SessionDelete(session_id=session_id, force=force))
            except RpcError as exc:
                if exc.code == ErrorCode.SESSION_BUSY:
                    self.show_message("That session is working right now. Stop it first, or delete "
                                      "again to interrupt it and delete.")
                    self._force_next = session_id
                    return
                raise

        if self._force_next == session_id:
            force = True
            self._force_next = None
        spawn(go(), self.show_message)

    def show_message(self, text: str, session_id: str = "", approval_id: str = "") -> None:
        self.banner.setText(text)
        self.banner_target = (session_id, approval_id)
        self.banner.show()
        if not session_id:
            QTimer.singleShot(10_000, self.banner.hide)

    def show_sandbox_warning(self, reason: str) -> None:
        self.sandbox_note.setText(
            f"<b>Commands run without a sandbox</b>: {esc(reason)}. Every command that is not plainly "
            "read-only asks you first.")
        self.sandbox_note.show()

    def _banner_clicked(self) -> None:
        sid, _aid = self.banner_target
        self.banner.hide()
        if sid:
            emit(self.open_requested, sid)
