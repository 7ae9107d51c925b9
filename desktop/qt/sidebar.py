"""The main window's sessions sidebar: new, search with snippets, every session grouped by day
or by folder, with its live status and cost.

A click (or Enter) opens a session beside the sidebar; a search result opens at the message
that matched.  F2 renames, Delete deletes (after asking), the context menu also pops a session
out into a window of its own.  The list stays current from the backend's broadcasts.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import (
    QAbstractListModel,
    QEvent,
    QModelIndex,
    QObject,
    QPersistentModelIndex,
    QPoint,
    QPointF,
    QRect,
    QRectF,
    QSize,
    Qt,
    QTimer,
    Signal,
)
from PySide6.QtGui import (
    QAction,
    QColor,
    QFont,
    QFontMetrics,
    QKeyEvent,
    QKeySequence,
    QPainter,
    QPainterPath,
    QPalette,
    QPolygonF,
)
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListView,
    QMenu,
    QMessageBox,
    QPushButton,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from desktop.qt import theme
from desktop.qt.aio import spawn
from desktop.qt.compat import emit
from desktop.qt.doors import DoorWatch
from desktop.qt.doors_view import DoorStrip, plain_tooltip
from desktop.state import doors as door_words
from desktop.state.sessions import SessionRows, ago, cost, home_relative, status_label
from shared import protocol as p
from shared.client import ClientState, Incoming, RpcError, SessionBusy
from shared.methods import SessionDelete, SessionList, SessionUpdate

if TYPE_CHECKING:
    from desktop.link import Link

Index = QModelIndex | QPersistentModelIndex
PAGE = 100
GROUPINGS = (("day", "By day"), ("folder", "By folder"))
# Roles beyond Qt's own.
KIND = Qt.ItemDataRole.UserRole + 1  # "header" or "session"
SESSION = Qt.ItemDataRole.UserRole + 2  # the p.Session
MATCH = Qt.ItemDataRole.UserRole + 3  # the p.SearchMatch, when searching
GROUPING = Qt.ItemDataRole.UserRole + 4  # how the list is grouped now
SESSION_ID = Qt.ItemDataRole.UserRole
BACKEND = Qt.ItemDataRole.UserRole + 5  # the key of the backend a row belongs to
STATE = Qt.ItemDataRole.UserRole + 6  # a backend header's (words, tone)
DOORS = Qt.ItemDataRole.UserRole + 7  # a session's rooms: [(DoorStatus, DoorRoom)]
TONES = {"running": "accent", "queued": "accent", "waiting_approval": "warning", "unknown": "warning"}


@dataclass(frozen=True)
class Header:
    label: str


def day_group(stamp: str, today: date | None = None) -> str:
    """Today, Yesterday, Previous 7 days, Previous 30 days, or the month ("March 2026")."""
    try:
        when = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return "Older"
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    day = when.astimezone().date()
    today = today or datetime.now().astimezone().date()
    if day >= today:
        return "Today"
    if day == today - timedelta(days=1):
        return "Yesterday"
    if day > today - timedelta(days=7):
        return "Previous 7 days"
    if day > today - timedelta(days=30):
        return "Previous 30 days"
    return day.strftime("%B %Y")


@dataclass
class Section:
    """One backend's part of the list: its link and its sessions."""

    link: Link
    rows: SessionRows


@dataclass(frozen=True)
class BackendHeader:
    """The row naming a backend above its sessions (only while there is more than one)."""

    section: int


@dataclass(frozen=True)
class Note:
    """A muted line in a section with nothing to list ("No sessions yet")."""

    label: str


Entry = Header | BackendHeader | Note | tuple[int, int]  # (section, index into its rows)


def backend_state(link: Link) -> tuple[str, str]:
    """A backend's connection in words and its tone: ("Connected", "success"),
    ("Reconnecting…", "warning"), ("Refused: wrong certificate", "danger")."""
    if link.current == "connected":
        return "Connected", "success"
    if link.refusal:
        return f"Refused: {link.refusal}", "danger"
    if link.current in ("connecting", "starting"):
        return "Connecting…", "muted"
    return "Reconnecting…", "warning"


class SidebarModel(QAbstractListModel):
    """The sessions as a flat list with a header row before each group; with several
    backends, each backend's groups under a row naming it and its connection."""

    rename = Signal(str, str)  # session_id, new title

    def __init__(self, sections: list[Section]) -> None:
        super().__init__()
        self.sections = sections
        self.grouping = "day"
        self.matches: dict[str, p.SearchMatch] = {}
        self.entries: list[Entry] = []
        self.more: Any = None  # set by the sidebar: loads the next page
        for section in sections:
            self.watch(section)

    @property
    def sessions(self) -> SessionRows:
        """The first backend's sessions (the only ones while no remote is paired)."""
        return self.sections[0].rows

    def watch(self, section: Section) -> None:
        rows = section.rows

        def changed(i: int) -> None:
            self._row(rows, i)

        rows.on_reset = self.rebuild
        rows.on_row = changed

    def rebuild(self) -> None:
        self.beginResetModel()
        self.entries = self._entries()
        self.endResetModel()

    def _entries(self) -> list[Entry]:
        if len(self.sections) == 1:
            return self._groups(0)
        out: list[Entry] = []
        for n, section in enumerate(self.sections):
            out.append(BackendHeader(n))
            if section.rows.rows:
                out.extend(self._groups(n))
            elif section.link.refusal:
                out.append(Note("Pair again to list its sessions"))
            elif section.link.current != "connected":
                out.append(Note("Its sessions show once it answers"))
            elif section.rows.query:
                out.append(Note("Nothing matches"))
            else:
                out.append(Note("No sessions yet"))
        return out

    def _groups(self, n: int) -> list[Entry]:
        """One backend's sessions: grouped by day or folder, or ranked search results."""
        sessions = self.sections[n].rows
        rows = sessions.rows
        if sessions.query:  # ranked by the backend: one group, in its order
            return [Header(f"{len(rows)} result{'s' if len(rows) != 1 else ''}"
                           f"{'+' if sessions.next_cursor else ''}"),
                    *((n, i) for i in range(len(rows)))]
        out: list[Entry] = []
        if self.grouping == "folder":
            groups: dict[str, list[int]] = {}
            for i, s in enumerate(rows):  # folders in order of their latest session
                groups.setdefault(home_relative(s.cwd), []).append(i)
            for folder, members in groups.items():
                out.append(Header(folder))
                out.extend((n, i) for i in members)
            return out
        last = None
        for i, s in enumerate(rows):
            label = day_group(s.updated_at)
            if label != last:
                out.append(Header(label))
                last = label
            out.append((n, i))
        return out

    def _row(self, rows: SessionRows, i: int) -> None:
        n = next((k for k, s in enumerate(self.sections) if s.rows is rows), None)
        if n is None:
            return
        row = self.position((n, i))
        if row is not None:
            emit(self.dataChanged, self.index(row, 0), self.index(row, 0))

    def position(self, entry: Entry) -> int | None:
        """The row showing `entry` (None when it is not shown)."""
        for row, e in enumerate(self.entries):
            if e == entry:
                return row
        return None

    def refresh_all(self) -> None:
        """Every row's text again ("5 min ago" stays true)."""
        if self.entries:
            emit(self.dataChanged, self.index(0, 0), self.index(len(self.entries) - 1, 0))

    def refresh_backend(self, link: Link) -> None:
        """A backend's header says its connection anew."""
        n = next((k for k, s in enumerate(self.sections) if s.link is link), None)
        row = self.position(BackendHeader(n)) if n is not None else None
        if row is not None:
            emit(self.dataChanged, self.index(row, 0), self.index(row, 0))

    def locate(self, session_id: str) -> tuple[int, int] | None:
        """(section, index into its rows) of a listed session."""
        for n, section in enumerate(self.sections):
            i = section.rows.index(session_id)
            if i is not None:
                return n, i
        return None

    def row_of(self, session_id: str) -> int | None:
        where = self.locate(session_id)
        return self.position(where) if where is not None else None

    def session_at(self, row: int) -> p.Session | None:
        if not 0 <= row < len(self.entries):
            return None
        entry = self.entries[row]
        if not isinstance(entry, tuple):
            return None
        n, i = entry
        return self.sections[n].rows.rows[i]

    def section_at(self, row: int) -> Section | None:
        """The backend a row belongs to (its header, a group, a session)."""
        for entry in reversed(self.entries[:row + 1] if 0 <= row < len(self.entries) else []):
            if isinstance(entry, BackendHeader):
                return self.sections[entry.section]
            if isinstance(entry, tuple):
                return self.sections[entry[0]]
        return self.sections[0] if self.sections else None

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
        s = self.sections[n].rows.rows[i]
        if role in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.EditRole):
            return s.title or "New session"
        if role == Qt.ItemDataRole.AccessibleTextRole:
            where = f", on {self.sections[n].link.title}" if len(self.sections) > 1 else ""
            rooms = "".join(f", {door_words.bound_words(d, r)}" for d, r in self._rooms(n, s))
            return f"{s.title or 'New session'}, {status_label(s.status)}, {cost(s)}, " \
                   f"{ago(s.updated_at)}{where}{rooms}"
        if role == Qt.ItemDataRole.ToolTipRole:
            rooms = "".join(f"\n{door_words.bound_words(d, r)}" for d, r in self._rooms(n, s))
            tip = f"{s.title or 'New session'}\n{home_relative(s.cwd)} · {s.model}\n" \
                  f"{s.message_count} messages · {cost(s)} · {ago(s.updated_at)}{rooms}"
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

    @staticmethod
    def _backend_data(link: Link, role: int) -> Any:
        state, tone = backend_state(link)
        if role == Qt.ItemDataRole.DisplayRole:
            return link.title
        if role == Qt.ItemDataRole.AccessibleTextRole:
            return f"Backend {link.title}: {state}"
        if role == Qt.ItemDataRole.ToolTipRole:
            where = "this computer" if not link.remote_host else link.remote_host
            return f"Sessions on {where}; their tools run there.\n{state}"
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


class SessionDelegate(QStyledItemDelegate):
    """A header is a small muted label; a session is its title with cost, and beneath it its
    status and age (or, when searching, the words that matched)."""

    PAD = 10

    def sizeHint(self, option: QStyleOptionViewItem, index: Index) -> QSize:
        fm = QFontMetrics(option.font)
        kind = index.data(KIND)
        if kind in ("header", "note"):
            return QSize(200, fm.height() + 16)
        if kind == "backend":
            return QSize(200, fm.height() * 2 + 26)
        return QSize(200, fm.height() * 2 + 18)

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: Index) -> None:
        c = theme.colors()
        rect: QRect = option.rect
        font: QFont = option.font
        state = option.state
        palette: QPalette = option.palette
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        if index.data(KIND) == "backend":
            self._backend(painter, rect, font, index, c)
            painter.restore()
            return
        if index.data(KIND) == "note":  # where a session's title would be, smaller
            small = QFont(font)
            small.setPointSizeF(font.pointSizeF() * 0.9)
            painter.setFont(small)
            painter.setPen(QColor(c.muted))
            painter.drawText(rect.adjusted(self.PAD + 4, 0, -self.PAD, 0),
                             Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                             str(index.data(Qt.ItemDataRole.DisplayRole)))
            painter.restore()
            return
        if index.data(KIND) == "header":
            small = QFont(font)
            small.setPointSizeF(font.pointSizeF() * 0.85)
            small.setBold(True)
            painter.setFont(small)
            painter.setPen(QColor(c.muted))
            painter.drawText(rect.adjusted(self.PAD, 8, -self.PAD, 0),
                             Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                             str(index.data(Qt.ItemDataRole.DisplayRole)))
            painter.restore()
            return
        session: p.Session = index.data(SESSION)
        match: p.SearchMatch | None = index.data(MATCH)
        box = rect.adjusted(4, 1, -4, -1)
        selected = bool(state & QStyle.StateFlag.State_Selected)
        if selected or state & QStyle.StateFlag.State_MouseOver:
            fill = QColor(palette.color(QPalette.ColorRole.Highlight) if selected else QColor(c.text))
            fill.setAlpha(46 if selected else 16)
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(fill)
            painter.drawRoundedRect(box, 8, 8)
        if state & QStyle.StateFlag.State_HasFocus and state & QStyle.StateFlag.State_Active \
                and option.widget is not None and option.widget.hasFocus():
            pen = painter.pen()
            pen.setColor(QColor(c.accent))
            pen.setWidthF(2)
            painter.setPen(pen)
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.drawRoundedRect(box.adjusted(1, 1, -1, -1), 8, 8)
        fm = QFontMetrics(font)
        inner = box.adjusted(self.PAD, 6, -self.PAD, -6)
        line1 = QRect(inner.left(), inner.top(), inner.width(), fm.height())
        line2 = QRect(inner.left(), inner.top() + fm.height() + 2, inner.width(), fm.height())
        price = cost(session)
        small = QFont(font)
        small.setPointSizeF(font.pointSizeF() * 0.9)
        sfm = QFontMetrics(small)
        price_w = sfm.horizontalAdvance(price)
        painter.setFont(small)
        painter.setPen(QColor(c.muted))
        painter.drawText(line1, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter, price)
        title_font = QFont(font)
        title_font.setWeight(QFont.Weight.DemiBold if selected else QFont.Weight.Normal)
        painter.setFont(title_font)
        painter.setPen(QColor(c.text))
        title = QFontMetrics(title_font).elidedText(
            str(index.data(Qt.ItemDataRole.DisplayRole)), Qt.TextElideMode.ElideRight,
            line1.width() - price_w - 8)
        painter.drawText(line1, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, title)
        painter.setFont(small)
        x = line2.left()
        tone = TONES.get(session.status)
        if tone is not None:
            color = QColor(getattr(c, tone))
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(color)
            d = 7
            painter.drawEllipse(x, line2.center().y() - d // 2 + 1, d, d)
            x += d + 6
            painter.setPen(color)
            words = status_label(session.status)
            painter.drawText(QRect(x, line2.top(), line2.right() - x, line2.height()),
                             Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, words)
            x += sfm.horizontalAdvance(words) + 8
        right = line2.right()
        if index.data(DOORS):
            right = self._chat_mark(painter, line2, c) - 6
        rest = QRect(x, line2.top(), max(0, right - x), line2.height())
        if match is not None and match.snippet:
            self._snippet(painter, rest, small, match, c)
        else:
            painter.setPen(QColor(c.muted))
            when = ago(session.updated_at)
            if index.data(GROUPING) != "folder":
                when = f"{when} · {home_relative(session.cwd).rsplit('/', 1)[-1] or '/'}"
            painter.drawText(rest, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                             sfm.elidedText(when, Qt.TextElideMode.ElideRight, rest.width()))
        painter.restore()

    def _backend(self, painter: QPainter, rect: QRect, font: QFont, index: Index,
                 c: theme.Colors) -> None:
        """A backend's name in bold over a coloured dot and its connection state; a hairline
        above every one but the first."""
        if index.row() > 0:
            painter.setPen(QColor(c.border))
            painter.drawLine(rect.left() + self.PAD, rect.top() + 4, rect.right() - self.PAD,
                             rect.top() + 4)
        bold = QFont(font)
        bold.setWeight(QFont.Weight.DemiBold)
        fm = QFontMetrics(bold)
        inner = rect.adjusted(self.PAD, 12, -self.PAD, -4)
        line1 = QRect(inner.left(), inner.top(), inner.width(), fm.height())
        painter.setFont(bold)
        painter.setPen(QColor(c.text))
        painter.drawText(line1, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                         fm.elidedText(str(index.data(Qt.ItemDataRole.DisplayRole)),
                                       Qt.TextElideMode.ElideRight, line1.width()))
        words, tone = index.data(STATE)
        small = QFont(font)
        small.setPointSizeF(font.pointSizeF() * 0.9)
        sfm = QFontMetrics(small)
        line2 = QRect(inner.left(), line1.bottom() + 3, inner.width(), sfm.height())
        color = QColor(getattr(c, tone))
        d = 7
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(color)
        painter.drawEllipse(line2.left(), line2.center().y() - d // 2 + 1, d, d)
        painter.setFont(small)
        painter.setPen(color)
        text_rect = line2.adjusted(d + 6, 0, 0, 0)
        painter.drawText(text_rect, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                         sfm.elidedText(words, Qt.TextElideMode.ElideRight, text_rect.width()))

    @staticmethod
    def _chat_mark(painter: QPainter, line: QRect, c: theme.Colors) -> int:
        """A small speech bubble in the accent colour at the right of a session's second line:
        the session is also reached from a chat room (its tooltip names the room).  Returns
        the mark's left edge."""
        h = max(11, line.height() - 2)
        w = h + 4
        left = line.right() - w
        top = line.center().y() - h // 2
        accent = QColor(c.accent)
        fill = QColor(accent)
        fill.setAlpha(40)
        pen = painter.pen()
        pen.setColor(accent)
        pen.setWidthF(1.5)
        painter.setPen(pen)
        painter.setBrush(fill)
        body = QRectF(left + 0.75, top + 0.75, w - 1.5, h - 5.5)
        tail = QPolygonF([QPointF(left + 4, body.bottom() - 0.5), QPointF(left + 3.5, top + h),
                          QPointF(left + 9, body.bottom() - 0.5)])
        path = QPainterPath()
        path.addRoundedRect(body, 4, 4)
        path.addPolygon(tail)
        painter.drawPath(path.simplified())
        return left

    @staticmethod
    def _snippet(painter: QPainter, rect: QRect, font: QFont, match: p.SearchMatch,
                 c: theme.Colors) -> None:
        """The snippet in muted text with its matched words in the accent colour, elided; when
        the words before the first match would take more than a third of the line, they give
        way to an ellipsis from the left, so the match shows."""
        bold = QFont(font)
        bold.setBold(True)
        text = " ".join(match.snippet.split("\n"))
        spans: list[tuple[str, bool]] = []
        at = 0
        for start, end in sorted(match.highlights):
            if start < at or end > len(text):
                continue
            spans.append((text[at:start], False))
            spans.append((text[start:end], True))
            at = end
        spans.append((text[at:], False))
        lead = QFontMetrics(font)
        if len(spans) > 1 and lead.horizontalAdvance(spans[0][0]) > rect.width() // 3:
            spans[0] = (lead.elidedText(spans[0][0], Qt.TextElideMode.ElideLeft, rect.width() // 3), False)
        x = rect.left()
        for part, hit in spans:
            if not part:
                continue
            f = bold if hit else font
            fm = QFontMetrics(f)
            room = rect.right() - x
            if room <= 0:
                break
            shown = fm.elidedText(part, Qt.TextElideMode.ElideRight, room)
            painter.setFont(f)
            painter.setPen(QColor(c.accent if hit else c.muted))
            painter.drawText(QRect(x, rect.top(), room, rect.height()),
                             Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, shown)
            if shown != part:
                break
            x += fm.horizontalAdvance(part)


class Sidebar(QWidget):
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
        self.model.more = self._load_more
        self.model.rename.connect(self.rename)
        self._loading_more = False
        self._force_next: str | None = None  # a busy session the user asked to delete once already
        self._keep: str | None = None  # the current session across a model reset
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
        self.list = QListView()
        self.list.setObjectName("sessionList")
        self.list.setProperty("flat", True)
        self.list.setAccessibleName("Sessions")
        self.list.setAccessibleDescription(
            "Every session, most recent first: Enter opens one, F2 renames it, Delete deletes it")
        self.list.setModel(self.model)
        self.list.setItemDelegate(SessionDelegate(self.list))
        self.list.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.list.setEditTriggers(QAbstractItemView.EditTrigger.EditKeyPressed)
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.list.setVerticalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)
        self.list.setMouseTracking(True)
        self.list.setUniformItemSizes(False)
        self.list.setFrameShape(QListView.Shape.NoFrame)
        # `activated`: Enter on the current row, or a double click; `clicked`: a single click.
        self.list.activated.connect(self._open_index)
        self.list.clicked.connect(self._open_index)
        self.model.modelAboutToBeReset.connect(self._remember)
        self.model.modelReset.connect(self._restore)
        self.open_action = self._action("Open", None, self.open_selected)
        self.open_new_action = self._action("Open in new window", None, self.open_selected_new)
        self.rename_action = self._action("Rename…", "F2", self.rename_selected)
        self.delete_action = self._action("Delete…", QKeySequence.StandardKey.Delete,
                                          self.delete_selected)
        for a in (self.rename_action, self.delete_action):
            a.setShortcutContext(Qt.ShortcutContext.WidgetShortcut)  # the window's F2 is its own
        self.list.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.list.customContextMenuRequested.connect(self._context_menu)
        for a in (self.open_action, self.open_new_action, self.rename_action, self.delete_action):
            a.setProperty("palette_hidden", True)  # on the selected row: the window has its own
            self.list.addAction(a)
        self.empty = QLabel("No sessions yet.\nPress Ctrl+N to start one.")
        self.empty.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty.setProperty("muted", True)
        self.empty.setWordWrap(True)
        self.empty.hide()
        self.settings_button = QPushButton("Settings")
        self.settings_button.setObjectName("sidebarSettings")
        self.settings_button.setFlat(True)
        self.settings_button.setAccessibleDescription("Providers, models, approvals (Ctrl+,)")
        self.settings_button.setToolTip("Settings (Ctrl+,)")
        self.settings_button.clicked.connect(lambda: emit(self.settings_requested))
        # Beside Settings, under the sessions scheduled runs make: prompts sent later.
        self.schedules_button = QPushButton("Schedules")
        self.schedules_button.setObjectName("sidebarSchedules")
        self.schedules_button.setFlat(True)
        self.schedules_button.setAccessibleDescription("Prompts Turnkey sends later, once or on a repeat")
        self.schedules_button.setToolTip("Scheduled prompts")
        self.schedules_button.clicked.connect(lambda: emit(self.schedules_requested))
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
        bottom = QHBoxLayout()
        bottom.setSpacing(0)
        bottom.addWidget(self.schedules_button)
        bottom.addWidget(self.settings_button)
        bottom.addStretch(1)
        box.addLayout(bottom)

    def show_backend(self, host: str) -> None:
        """"On HOST" above the sessions for a remote backend; nothing for this computer's,
        nor while several backends each have a header of their own."""
        self.backend_label.setText(f"On {host}" if host else "")
        self.backend_label.setToolTip(f"These sessions live on the backend at {host}; their "
                                      "tools run there" if host else "")
        self.backend_label.setVisible(bool(host) and len(self.sections) == 1)

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

    def _listen(self, section: Section) -> None:
        link = section.link
        link.received.connect(lambda event: self._on_event(section, event))
        link.state.connect(lambda _state: self._backend_changed(section))
        link.refused.connect(lambda _why: self._backend_changed(section))
        DoorWatch.of(link).changed.connect(self.model.refresh_all)  # rooms bound, unbound

    def _backend_changed(self, section: Section) -> None:
        if section in self.sections and len(self.sections) > 1:
            if section.rows.rows:
                self.model.refresh_backend(section.link)
            else:  # its note ("No sessions yet", "…once it answers") changes too
                self.model.rebuild()

    def link_of(self, session_id: str) -> Link | None:
        """The backend of a listed session (None when it is not listed)."""
        where = self.model.locate(session_id)
        return self.sections[where[0]].link if where is not None else None

    def selected_backend(self) -> Link:
        """The backend of the section the current row is in (the first when none is)."""
        index = self.list.currentIndex()
        section = self.model.section_at(index.row()) if index.isValid() else None
        return section.link if section is not None else self.link

    def _context_menu(self, pos: QPoint) -> None:
        """A session's actions, or on a backend's header: a new session there, the backends on
        its store, and (for a remote one) removing its pairing."""
        index = self.list.indexAt(pos)
        menu = QMenu(self.list)
        if index.isValid() and index.data(KIND) == "session":
            self.list.setCurrentIndex(index)
            for action in (self.open_action, self.open_new_action, self.rename_action,
                           self.delete_action):
                menu.addAction(action)
        section = self.model.section_at(index.row()) if index.isValid() else None
        if section is not None and len(self.sections) > 1:  # (the keyboard's way there too)
            menu.addSeparator()
            link, name = section.link, section.link.title
            new = menu.addAction(f"New session on {name}…")
            new.triggered.connect(lambda _=False: emit(self.new_on_requested, link.key))
            store = menu.addAction(f"Backends on {name}'s store…")
            store.triggered.connect(lambda _=False: emit(self.backends_requested, link.key))
            if section is not self.sections[0]:
                forget = menu.addAction(f"Remove {name}…")
                forget.triggered.connect(lambda _=False: emit(self.forget_requested, link.key))
        if not menu.isEmpty():
            menu.popup(self.list.viewport().mapToGlobal(pos))
        self.context_menu = menu

    def _action(self, text: str, key: Any, slot: Any) -> QAction:
        action = QAction(text, self.list if key is not None else self)
        if key is not None:
            action.setShortcut(QKeySequence(key))
        action.triggered.connect(lambda _=False: slot())
        return action

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
        row = self.model.row_of(session_id) if session_id else None
        if row is None:
            self.list.clearSelection()
            return
        index = self.model.index(row, 0)
        self.list.setCurrentIndex(index)
        self.list.scrollTo(index)

    def _remember(self) -> None:
        self._keep = self.selected_id()

    def _restore(self) -> None:
        if self._keep:
            self.mark_current(self._keep)
        self._update_empty()

    # --- data ----------------------------------------------------------------------

    def reload(self) -> None:
        """Every connected backend's sessions afresh (a backend not connected is listed
        when it connects)."""
        for section in self.sections:
            if section is self.sections[0] or section.link.current == "connected":
                spawn(self._reload(section), lambda m: emit(self.message, m))

    async def _reload(self, section: Section | None = None) -> None:
        section = section or self.sections[0]
        query = self.search.text().strip()
        section.rows.loading()  # (what arrives meanwhile is applied again over the result)
        result = await section.link.call(SessionList(limit=PAGE, query=query or None))
        if query != self.search.text().strip() or section not in self.sections:
            return  # typed on meanwhile (the newer search wins), or the backend was removed
        others = {sid: m for sid, m in self.model.matches.items()
                  if self.link_of(sid) not in (None, section.link)}
        self.model.matches = {**others, **{m.session_id: m for m in result.matches}}
        section.rows.load(result.sessions, result.next_cursor, query)
        self._update_empty()

    def _load_more(self) -> None:
        waiting = [s for s in self.sections if s.rows.next_cursor]
        if self._loading_more or not waiting:
            return
        self._loading_more = True

        async def more() -> None:
            try:
                for section in waiting:
                    rows = section.rows
                    result = await section.link.call(SessionList(
                        limit=PAGE, cursor=rows.next_cursor, query=rows.query or None))
                    self.model.matches.update({m.session_id: m for m in result.matches})
                    rows.extend(result.sessions, result.next_cursor)
            finally:
                self._loading_more = False

        spawn(more(), lambda m: emit(self.message, m))

    def _update_empty(self) -> None:
        none = not self.sessions.rows and len(self.sections) == 1
        self.empty.setVisible(none)
        self.list.setVisible(not none)
        if none and self.sessions.query:
            self.empty.setText(f"Nothing matches “{self.sessions.query}”.")
        elif none:
            self.empty.setText("No sessions yet.\nPress Ctrl+N to start one.")

    def _on_event(self, section: Section, event: Incoming) -> None:
        if section not in self.sections:
            return  # a backend removed a moment ago
        data = event.data
        if isinstance(data, (p.SessionCreated, p.SessionDeletedEvent)) \
                or (isinstance(data, p.SessionUpdated) and event.seq is None):
            section.rows.apply(event)
            self._update_empty()
        elif isinstance(event.data, ClientState) and event.data.state == "connected":
            # What changed while we were away (the first backend: the app reloads it itself
            # once started).
            spawn(self._reload(section), lambda m: emit(self.message, m))

    def add(self, session: p.Session, link: Link | None = None) -> None:
        """A session this app just created (on `link`'s backend), listed before its
        broadcast arrives."""
        section = next((s for s in self.sections if s.link is link), self.sections[0])
        created = p.SessionCreated(session=session)
        section.rows.apply(Incoming(p.event_name(created), session.session_id, created))
        self._update_empty()

    # --- actions -------------------------------------------------------------------

    def selected_id(self) -> str | None:
        index = self.list.currentIndex()
        sid = index.data(SESSION_ID) if index.isValid() else None
        return str(sid) if sid else None

    def _open_index(self, index: QModelIndex) -> None:
        sid = index.data(SESSION_ID)
        if not sid:
            return
        match: p.SearchMatch | None = index.data(MATCH)
        emit(self.open_requested, str(sid), (match.message_id or "") if match else "")

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        """Down in the search field goes on to the list, at its first session."""
        if watched is self.search and isinstance(event, QKeyEvent) \
                and event.type() == QEvent.Type.KeyPress and event.key() == Qt.Key.Key_Down:
            first = self._first_index()
            if first is not None:
                self.list.setFocus(Qt.FocusReason.TabFocusReason)
                self.list.setCurrentIndex(first)
                return True
        return False

    def _first_index(self) -> QModelIndex | None:
        for row in range(self.model.rowCount()):
            index = self.model.index(row, 0)
            if index.data(KIND) == "session":
                return index
        return None

    def _first_result(self) -> None:
        """Enter in the search field opens the best match."""
        index = self._first_index()
        if index is not None:
            self.list.setCurrentIndex(index)
            self._open_index(index)

    def open_selected(self) -> None:
        index = self.list.currentIndex()
        if index.isValid():
            self._open_index(index)

    def open_selected_new(self) -> None:
        sid = self.selected_id()
        if sid:
            emit(self.open_new_requested, sid)

    def rename_selected(self) -> None:
        index = self.list.currentIndex()
        if index.isValid() and index.data(KIND) == "session":
            self.list.edit(index)

    def rename(self, session_id: str, title: str) -> None:
        link = self.link_of(session_id) or self.link
        spawn(link.call(SessionUpdate(session_id=session_id, title=title)),
              lambda m: emit(self.message, m))

    def delete_selected(self) -> None:
        sid = self.selected_id()
        if sid:
            self.confirm_delete(sid)

    def confirm_delete(self, sid: str) -> None:
        where = self.model.locate(sid)
        listed = self.sections[where[0]].rows.rows[where[1]] if where is not None else None
        title = (listed.title or "New session") if listed is not None else sid
        box = QMessageBox(QMessageBox.Icon.Warning, "Delete session",
                          f"Delete “{title}” and its whole transcript? This cannot be undone.",
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
                    emit(self.message, "That session is working right now. Stop it first, or "
                                       "delete again to interrupt it and delete.")
                    self._force_next = session_id
                    return
                raise

        if self._force_next == session_id:
            force = True
            self._force_next = None
        spawn(go(), lambda m: emit(self.message, m))
