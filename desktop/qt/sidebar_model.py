"""The sessions sidebar's list model: the rows of `desktop.state.sidebar.SidebarRows` as a Qt
list model, each row's words and data under the roles below, renaming in place, and the next
page fetched when the view scrolls to the end."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QAbstractListModel, QModelIndex, QPersistentModelIndex, Qt, Signal

from desktop.qt.compat import emit
from desktop.qt.doors import DoorWatch
from desktop.qt.doors_view import plain_tooltip
from desktop.state import doors as door_words
from desktop.state import sidebar as words
from desktop.state.sessions import SessionRows
from desktop.state.sidebar import BackendHeader, Entry, Header, Note, Section, SidebarRows
from shared import protocol as p

if TYPE_CHECKING:
    from desktop.link import Link

Index = QModelIndex | QPersistentModelIndex
# Roles beyond Qt's own.
KIND = Qt.ItemDataRole.UserRole + 1  # "header", "note", "backend" or "session"
SESSION = Qt.ItemDataRole.UserRole + 2  # the p.Session
MATCH = Qt.ItemDataRole.UserRole + 3  # the p.SearchMatch, when searching
GROUPING = Qt.ItemDataRole.UserRole + 4  # how the list is grouped now
SESSION_ID = Qt.ItemDataRole.UserRole
BACKEND = Qt.ItemDataRole.UserRole + 5  # the key of the backend a row belongs to
STATE = Qt.ItemDataRole.UserRole + 6  # a backend header's (words, tone)
DOORS = Qt.ItemDataRole.UserRole + 7  # a session's rooms: [(DoorStatus, DoorRoom)]


class SidebarModel(QAbstractListModel):
    """The sessions as a flat list with a header row before each group; with several
    backends, each backend's groups under a row naming it and its connection."""

    rename = Signal(str, str)  # session_id, new title

    def __init__(self, sections: list[Section[Link]]) -> None:
        super().__init__()
        self.state = SidebarRows(sections)
        self.sections = sections
        self.more: Callable[[], None] | None = None  # set by the sidebar: loads the next page
        for section in sections:
            self.watch(section)

    # --- the list's state (desktop.state.sidebar.SidebarRows) ----------------------------

    @property
    def sessions(self) -> SessionRows:
        """The first backend's sessions (the only ones while no remote is paired)."""
        return self.sections[0].rows

    @property
    def grouping(self) -> str:
        return self.state.grouping

    @grouping.setter
    def grouping(self, key: str) -> None:
        self.state.grouping = key

    @property
    def matches(self) -> dict[str, p.SearchMatch]:
        return self.state.matches

    @property
    def entries(self) -> list[Entry]:
        return self.state.entries

    def position(self, entry: Entry) -> int | None:
        """The row showing `entry` (None when it is not shown)."""
        return self.state.position(entry)

    def locate(self, session_id: str) -> tuple[int, int] | None:
        """(section, index into its rows) of a listed session."""
        return self.state.locate(session_id)

    def row_of(self, session_id: str) -> int | None:
        return self.state.row_of(session_id)

    def session_at(self, row: int) -> p.Session | None:
        return self.state.session_at(row)

    def section_at(self, row: int) -> Section[Link] | None:
        """The backend a row belongs to (its header, a group, a session)."""
        return self.state.section_at(row)

    # --- telling the view ----------------------------------------------------------------

    def watch(self, section: Section[Link]) -> None:
        rows = section.rows

        def changed(i: int) -> None:
            self._row(rows, i)

        rows.on_reset = self.rebuild
        rows.on_row = changed

    def rebuild(self) -> None:
        self.beginResetModel()
        self.state.rebuild()
        self.endResetModel()

    def _row(self, rows: SessionRows, i: int) -> None:
        n = self.state.index_of_rows(rows)
        row = self.position((n, i)) if n is not None else None
        if row is not None:
            emit(self.dataChanged, self.index(row, 0), self.index(row, 0))

    def refresh_all(self) -> None:
        """Every row's text again ("5 min ago" stays true)."""
        if self.entries:
            emit(self.dataChanged, self.index(0, 0), self.index(len(self.entries) - 1, 0))

    def refresh_backend(self, link: Link) -> None:
        """A backend's header says its connection anew."""
        n = self.state.index_of_link(link)
        row = self.position(BackendHeader(n)) if n is not None else None
        if row is not None:
            emit(self.dataChanged, self.index(row, 0), self.index(row, 0))

    # --- Qt's model ----------------------------------------------------------------------

    def rowCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self.entries)

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or index.row() >= len(self.entries):
            return None
        entry = self.entries[index.row()]
        if isinstance(entry, BackendHeader):
            return self._backend_data(self.sections[entry.section].link, role)
        if isinstance(entry, Header | Note):
            if role in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.AccessibleTextRole):
                return entry.label
            return ("header" if isinstance(entry, Header) else "note") if role == KIND else None
        n, i = entry
        return self._session_data(n, self.sections[n].rows.rows[i], role)

    def _session_data(self, n: int, s: p.Session, role: int) -> Any:
        if role in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.EditRole):
            return words.title(s)
        if role == Qt.ItemDataRole.AccessibleTextRole:
            where = self.sections[n].link.title if len(self.sections) > 1 else ""
            return words.session_words(s, where, self._room_words(n, s))
        if role == Qt.ItemDataRole.ToolTipRole:
            rooms = self._room_words(n, s)
            tip = words.session_tip(s, rooms)
            return plain_tooltip(tip) if rooms else tip  # (a room's name is not ours)
        if role == DOORS:
            return self._rooms(n, s)
        if role == SESSION_ID:
            return s.session_id
        if role == KIND:
            return "session"
        if role == SESSION:
            return s
        if role == MATCH:
            return self.matches.get(s.session_id)
        if role == GROUPING:
            return self.grouping
        if role == BACKEND:
            return self.sections[n].link.key
        return None

    def _rooms(self, n: int, s: p.Session) -> list[tuple[p.DoorStatus, p.DoorRoom]]:
        """The chat rooms (messaging doors) bound to a listed session."""
        return DoorWatch.of(self.sections[n].link).rooms_of(s.session_id)

    def _room_words(self, n: int, s: p.Session) -> list[str]:
        return [door_words.bound_words(d, r) for d, r in self._rooms(n, s)]

    @staticmethod
    def _backend_data(link: Link, role: int) -> Any:
        state, tone = words.backend_state(link)
        if role == Qt.ItemDataRole.DisplayRole:
            return link.title
        if role == Qt.ItemDataRole.AccessibleTextRole:
            return f"Backend {link.title}: {state}"
        if role == Qt.ItemDataRole.ToolTipRole:
            return words.backend_tip(link)
        if role == KIND:
            return "backend"
        if role == BACKEND:
            return link.key
        if role == STATE:
            return state, tone
        return None

    def flags(self, index: Index) -> Qt.ItemFlag:
        if not index.isValid() or not isinstance(self.entries[index.row()], tuple):
            return Qt.ItemFlag.NoItemFlags  # never selected, skipped by the arrow keys
        return Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable | Qt.ItemFlag.ItemIsEditable

    def setData(self, index: Index, value: Any, role: int = Qt.ItemDataRole.EditRole) -> bool:
        s = self.session_at(index.row()) if index.isValid() else None
        title = str(value).strip()
        if role != Qt.ItemDataRole.EditRole or s is None or not title:
            return False
        emit(self.rename, s.session_id, title)
        return True

    def canFetchMore(self, parent: Index) -> bool:
        return not parent.isValid() and any(s.rows.next_cursor for s in self.sections)

    def fetchMore(self, parent: Index) -> None:
        if self.more is not None:
            self.more()
