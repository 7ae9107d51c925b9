"""What waits under a conversation's transcript: approval cards and queued messages.

Each sits on a `Shelf`, a column that takes at most a bounded share of the conversation's
height and scrolls beyond it, so the transcript keeps most of the window however many cards
and queued messages there are (the conversation sets the bounds as it resizes).  Nothing here
forces the window wide: the card's answers wrap onto a second line (`FlowRow`), long words are
cut (`Elided`, labels that may shrink), and a file preview is as tall as its lines, up to a
bound, not a fixed box.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import UTC, datetime

from PySide6.QtCore import QEvent, QObject, QPoint, QRect, QSize, Qt, Signal
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QLayout,
    QLayoutItem,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from desktop.qt import theme
from desktop.qt.compat import emit
from desktop.qt.transcript_view import esc
from desktop.state.attachments import queued_line
from shared import protocol as p
from shared.mcp_names import shown_name

DECISIONS: tuple[tuple[p.Decision, str, str], ...] = (
    ("once", "Allow once", "allow"), ("session", "Allow for this session", ""),
    ("always", "Always allow", ""), ("deny", "Deny", "deny"),
)
PREVIEW_LINES = 400  # of a file write awaiting approval; the rest is counted
PREVIEW_MAX_PX = 220  # a longer preview scrolls inside this
SHELF_FLOOR_PX = 96  # a shelf squeezed by a short window still shows this much (a card's answers)


def shrinkable(label: QLabel) -> QLabel:
    """A label that never sets the window's minimum width: it wraps at spaces, and a word
    longer than the room it is given (a path, a command) is cut instead."""
    label.setWordWrap(True)
    label.setMinimumWidth(1)  # (a set minimum wins over the label's minimumSizeHint)
    return label


class Elided(QLabel):
    """One line of text, cut with "…" to the width it is given; the whole of it in the tooltip."""

    def __init__(self, text: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setTextFormat(Qt.TextFormat.PlainText)
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.full = ""
        self.set_full(text)

    def set_full(self, text: str) -> None:
        self.full = text
        self.setToolTip(text)
        self._elide()

    def sizeHint(self) -> QSize:
        return QSize(self.fontMetrics().horizontalAdvance(self.full) + 4, super().sizeHint().height())

    def minimumSizeHint(self) -> QSize:
        return QSize(40, super().minimumSizeHint().height())

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._elide()

    def _elide(self) -> None:
        self.setText(self.fontMetrics().elidedText(self.full, Qt.TextElideMode.ElideRight,
                                                   max(10, self.width())))


class FlowRow(QLayout):
    """Widgets in a row that wraps onto the next line when the width runs out; a `trailing`
    widget keeps to the right end of the last line when it fits there."""

    def __init__(self, parent: QWidget | None = None, spacing: int = 8) -> None:
        super().__init__(parent)
        self._items: list[QLayoutItem] = []
        self._trailing: set[int] = set()  # ids of the widgets added with trailing=True
        self.setSpacing(spacing)
        self.setContentsMargins(0, 0, 0, 0)

    def add(self, widget: QWidget, trailing: bool = False) -> None:
        self.addWidget(widget)
        if trailing:
            self._trailing.add(id(widget))

    def addItem(self, item: QLayoutItem) -> None:
        self._items.append(item)

    def count(self) -> int:
        return len(self._items)

    def itemAt(self, index: int) -> QLayoutItem | None:
        return self._items[index] if 0 <= index < len(self._items) else None

    def takeAt(self, index: int) -> QLayoutItem | None:
        return self._items.pop(index) if 0 <= index < len(self._items) else None

    def expandingDirections(self) -> Qt.Orientation:
        return Qt.Orientation(0)

    def hasHeightForWidth(self) -> bool:
        return True

    def heightForWidth(self, width: int) -> int:
        return self._place(QRect(0, 0, width, 0), move=False)

    def setGeometry(self, rect: QRect) -> None:
        super().setGeometry(rect)
        self._place(rect, move=True)

    def sizeHint(self) -> QSize:
        shown = [i.sizeHint() for i in self._shown()]
        width = sum(s.width() for s in shown) + self.spacing() * max(0, len(shown) - 1)
        return QSize(width, max((s.height() for s in shown), default=0))

    def minimumSize(self) -> QSize:
        widest = QSize()
        for item in self._shown():
            widest = widest.expandedTo(item.minimumSize())
        return widest

    def _shown(self) -> list[QLayoutItem]:
        return [i for i in self._items if not i.isEmpty()]

    def _place(self, rect: QRect, move: bool) -> int:
        """Lays the items out in `rect` (when `move`); returns the height they take."""
        x, y, line = rect.x(), rect.y(), 0
        right = rect.right()
        for item in self._shown():
            hint = item.sizeHint()
            if line and x + hint.width() - 1 > right:
                x, y, line = rect.x(), y + line + self.spacing(), 0
            at = x
            widget = item.widget()
            if widget is not None and id(widget) in self._trailing:
                at = max(x, right - hint.width() + 1)
            if move:
                item.setGeometry(QRect(QPoint(at, y), hint))
            x = at + hint.width() + self.spacing()
            line = max(line, hint.height())
        return y + line - rect.y()


class Preview(QTextBrowser):
    """A file change awaiting approval: as tall as its lines (a one-line file is one line, not
    a box), up to PREVIEW_MAX_PX, then it scrolls."""

    def __init__(self, html_text: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.cap = PREVIEW_MAX_PX  # lowered by its card, so the card's answers stay in view
        self.setObjectName("approvalPreview")
        self.setAccessibleName("What would be written")
        self.setOpenLinks(False)
        self.setOpenExternalLinks(False)
        self.setLineWrapMode(QTextBrowser.LineWrapMode.NoWrap)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setMinimumWidth(60)
        self.setHtml(html_text)
        self.fit()

    def fit(self) -> None:
        doc = self.document()
        wide = doc.idealWidth() > max(1, self.viewport().width())
        bar = self.horizontalScrollBar().sizeHint().height() if wide else 0
        height = math.ceil(doc.size().height()) + 2 * self.frameWidth() + bar
        self.setFixedHeight(min(height, max(self.least(), min(PREVIEW_MAX_PX, self.cap))))

    def least(self) -> int:
        """Never shorter than this (two lines), however little room its card has."""
        return 2 * self.fontMetrics().lineSpacing() + 2 * self.frameWidth() \
            + 2 * int(self.document().documentMargin())

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        if event.size().width() != event.oldSize().width():
            self.fit()  # (wider or narrower: a horizontal scroll bar comes or goes)


class ApprovalCard(QFrame):
    """One pending approval with its four answers and the time left."""

    reflowed = Signal()  # its width changed: the height it needs may have too

    def __init__(self, approval: p.Approval, answer: Callable[[str, p.Decision], None],
                 preview: tuple[str, str] | None = None) -> None:
        super().__init__()
        self.approval = approval
        self.setObjectName("approvalCard")
        tool, origin = shown_name(approval.tool)
        named = f"{tool} ({origin})" if origin else tool
        self.setAccessibleName(f"Approval for {named}")
        self.limit = 0  # the most it may take (its shelf's bound): its preview gives way
        self.box = box = QVBoxLayout(self)
        box.setContentsMargins(12, 8, 12, 10)
        box.setSpacing(4)
        head = QHBoxLayout()
        icon = QLabel()
        icon.setPixmap(theme.icon("warning").pixmap(18, 18))
        muted = theme.colors().muted
        source = f' <small style="color:{muted}">{esc(origin)}</small>' if origin else ""
        title = shrinkable(QLabel(f"<b>{esc(tool)}</b>{source} needs your approval"))
        self.left = QLabel()
        self.left.setProperty("muted", True)
        head.addWidget(icon)
        head.addWidget(title, 1)
        head.addWidget(self.left)
        what = shrinkable(QLabel(esc(approval.summary)))
        what.setObjectName("approvalCommand")
        what.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        why = shrinkable(QLabel(esc(approval.reason)))
        why.setProperty("muted", True)
        row = FlowRow()
        self.buttons: dict[str, QPushButton] = {}
        for decision, text, icon_name in DECISIONS:
            b = QPushButton(text)
            if icon_name:
                b.setIcon(theme.icon(icon_name))
            if decision == "once":
                b.setProperty("primary", True)
            elif decision == "deny":
                b.setProperty("danger", True)
            b.setAccessibleDescription(f"{text} for {named}: {approval.summary}")
            b.setAutoDefault(True)  # Enter answers with the focused button, as Space does
            b.clicked.connect(lambda _=False, d=decision: answer(approval.approval_id, d))
            self.buttons[decision] = b
            row.add(b, trailing=decision == "deny")
        box.addLayout(head)
        self.preview: Preview | None = None
        if preview is None:
            box.addWidget(what)
        else:  # (its caption names the file: the summary would say it twice)
            caption, html_text = preview
            note = shrinkable(QLabel(esc(caption)))
            note.setProperty("muted", True)
            note.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            self.preview = Preview(html_text)
            box.addWidget(note)
            box.addWidget(self.preview)
        box.addWidget(why)
        box.addLayout(row)
        self.tick()

    def fit(self, limit: int) -> None:
        """At most `limit` px tall when it can be: its preview is shortened (to two lines at
        least), so the answers under it stay in view without scrolling."""
        self.limit = limit
        if self.preview is None or limit <= 0:
            return
        self.preview.cap = limit - (self._height() - self.preview.height())
        self.preview.fit()

    def least_height(self) -> int:
        """Its height at its width with its preview at its shortest: the whole card, answers
        included, is never given less room than this."""
        full = self._height()
        if self.preview is None:
            return full
        return full - self.preview.height() + min(self.preview.height(), self.preview.least())

    def _height(self) -> int:
        width = self.width()
        if self.box.hasHeightForWidth() and width > 0:
            return self.box.totalHeightForWidth(width)
        return self.sizeHint().height()

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        if event.size().width() != event.oldSize().width():
            emit(self.reflowed)  # (narrower, its words and answers wrap taller)

    def tick(self) -> None:
        try:
            end = datetime.fromisoformat(self.approval.expires_at.replace("Z", "+00:00"))
        except ValueError:
            return
        left = int((end - datetime.now(UTC)).total_seconds())
        self.left.setText(f"{max(0, left) // 60}:{max(0, left) % 60:02d} left" if left > 0 else "expiring…")

    def busy(self, on: bool) -> None:
        for b in self.buttons.values():
            b.setEnabled(not on)


def change_preview(name: str, arguments: dict[str, object]) -> tuple[str, str] | None:
    """What a file-changing call asks to write, for its approval card: a caption and the lines
    as HTML (escaped: the model wrote them), added lines tinted, removed lines tinted."""
    c = theme.tokens()
    dark = theme.current() == "dark"
    add_bg, del_bg = ("#1f3d2a", "#4a2226") if dark else ("#e6f7ea", "#fbe9ea")
    path = str(arguments.get("path", ""))
    if name == "write_file" and isinstance(arguments.get("content"), str):
        lines = str(arguments["content"]).splitlines() or [""]
        caption = f"The whole new content of {path} ({len(lines):,} line{'s' if len(lines) != 1 else ''}):"
        rows = [(f"+{line}", add_bg) for line in lines]
    elif name == "patch" and isinstance(arguments.get("old"), str) and isinstance(arguments.get("new"), str):
        every = " (every occurrence)" if arguments.get("replace_all") else ""
        caption = f"The change to {path}{every}:"
        rows = [(f"-{line}", del_bg) for line in str(arguments["old"]).splitlines()]
        rows += [(f"+{line}", add_bg) for line in str(arguments["new"]).splitlines()]
    else:
        return None
    more = len(rows) - PREVIEW_LINES
    body = "\n".join(f'<span style="background:{bg}">{esc(text)}</span>'
                     for text, bg in rows[:PREVIEW_LINES])
    if more > 0:
        body += f'\n<span style="color:{c.muted}">… {more:,} more lines</span>'
    return caption, f'<pre style="margin:0; color:{c.text}">{body}</pre>'


class QueueRow(QFrame):
    def __init__(self, receipt: p.Receipt, text: str, cancel: Callable[[str], None]) -> None:
        super().__init__()
        self.setObjectName("queueRow")
        row = QHBoxLayout(self)
        row.setContentsMargins(10, 4, 6, 4)
        icon = QLabel()
        icon.setPixmap(theme.icon("queue").pixmap(16, 16))
        first = queued_line(text, receipt.attachments)
        # A steer waits for the running turn's next step; a queued message for its end.
        label = Elided(f"Steering at the next step: {first}" if receipt.steer else f"Queued: {first}")
        label.setProperty("muted", True)
        self.label = label
        self.cancel = QPushButton("Cancel")
        self.cancel.setAccessibleDescription(
            f"Cancel the {'steer' if receipt.steer else 'queued message'}: {text[:80]}")
        self.cancel.clicked.connect(lambda: cancel(receipt.admission_id))
        row.addWidget(icon)
        row.addWidget(label, 1)
        row.addWidget(self.cancel)


class Shelf(QScrollArea):
    """A column of cards or rows as tall as they are, up to the bound the conversation sets
    (`bound`), then scrolling; hidden while empty."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.setObjectName(name)
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Maximum)
        self.setStyleSheet(f"QScrollArea#{name}, QWidget#{name}Inner {{ background: transparent; }}")
        self.viewport().setAutoFillBackground(False)
        self.inner = QWidget()
        self.inner.setObjectName(f"{name}Inner")
        self.box = QVBoxLayout(self.inner)
        self.box.setContentsMargins(0, 0, 0, 0)
        self.box.setSpacing(8)
        self.setWidget(self.inner)
        self.inner.installEventFilter(self)
        self.hide()

    def add(self, widget: QWidget) -> None:
        self.box.addWidget(widget)
        self._changed()

    def remove(self, widget: QWidget) -> None:
        self.box.removeWidget(widget)
        widget.hide()
        self._changed()

    def count(self) -> int:
        return self.box.count()

    def bound(self, height: int) -> None:
        """At most `height` px tall (never under SHELF_FLOOR_PX); it scrolls beyond."""
        self.setMaximumHeight(max(SHELF_FLOOR_PX, height))

    def content_height(self) -> int:
        width = self.viewport().width() if self.isVisible() else self.width()
        if self.inner.hasHeightForWidth() and width > 0:
            return self.inner.heightForWidth(width)
        return self.inner.sizeHint().height()

    def sizeHint(self) -> QSize:
        return QSize(self.inner.sizeHint().width(), self.content_height() + 2 * self.frameWidth())

    def minimumSizeHint(self) -> QSize:
        return QSize(self.inner.minimumSizeHint().width(),
                     min(self.sizeHint().height(), SHELF_FLOOR_PX))

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is getattr(self, "inner", None) and event.type() == QEvent.Type.LayoutRequest:
            self.updateGeometry()  # a card came, went or changed: as tall as they now are
        return super().eventFilter(watched, event)  # (QScrollArea follows its widget's size)

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        if event.size().width() != event.oldSize().width():
            self.updateGeometry()  # wrapped text takes another height at another width

    def _changed(self) -> None:
        self.setVisible(self.box.count() > 0)
        self.updateGeometry()


class QueuePanel(QWidget):
    """The queued messages: up to OPEN_ROWS shown as they are; more fold into one line
    ("5 messages queued", Show), which opens them on a shelf of a few rows' height."""

    OPEN_ROWS = 2
    toggled = Signal(bool)

    def __init__(self) -> None:
        super().__init__()
        self.setObjectName("queuePanel")
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(4)
        self.summary = QFrame()
        self.summary.setObjectName("queueRow")
        line = QHBoxLayout(self.summary)
        line.setContentsMargins(10, 4, 6, 4)
        icon = QLabel()
        icon.setPixmap(theme.icon("queue").pixmap(16, 16))
        self.count_label = QLabel()
        self.count_label.setProperty("muted", True)
        self.toggle = QPushButton("Show")
        self.toggle.setCheckable(True)
        self.toggle.setAccessibleName("Show the queued messages")
        self.toggle.toggled.connect(self._toggled)
        line.addWidget(icon)
        line.addWidget(self.count_label, 1)
        line.addWidget(self.toggle)
        lay.addWidget(self.summary)
        self.shelf = Shelf("queueShelf")
        lay.addWidget(self.shelf)
        self.summary.hide()
        self.hide()

    @property
    def folded(self) -> bool:
        return self.shelf.count() > self.OPEN_ROWS and not self.toggle.isChecked()

    def add(self, row: QueueRow) -> None:
        self.shelf.add(row)
        self._show()

    def remove(self, row: QueueRow) -> None:
        self.shelf.remove(row)
        self._show()

    def row_height(self) -> int:
        first = self.shelf.box.itemAt(0)
        widget = first.widget() if first is not None else None
        return (widget.sizeHint().height() if widget is not None else 30) + self.shelf.box.spacing()

    def _show(self) -> None:
        n = self.shelf.count()
        many = n > self.OPEN_ROWS
        self.summary.setVisible(many)
        self.count_label.setText(f"{n} messages queued" if many else "")
        self.shelf.setVisible(n > 0 and not self.folded)
        self.setVisible(n > 0)
        self.updateGeometry()

    def _toggled(self, on: bool) -> None:
        self.toggle.setText("Hide" if on else "Show")
        self.toggle.setAccessibleName(f"{'Hide' if on else 'Show'} the queued messages")
        self._show()
        emit(self.toggled, on)
