"""The transcript as a virtualized list: a model over `Transcript` and a delegate that paints items.

Only the loaded page(s) are rows; the view lays out and paints only what is
visible.  Each item is drawn from a QTextDocument (markdown for messages,
generated HTML for tool cards and notes) cached by (key, version, width), so
a streaming message re-lays out only itself.
"""

from __future__ import annotations

import html
from collections import OrderedDict
from typing import Any

from PySide6.QtCore import QAbstractListModel, QModelIndex, QPersistentModelIndex, QRectF, QSize, Qt
from PySide6.QtGui import (
    QColor,
    QPainter,
    QPalette,
    QTextBlockFormat,
    QTextCursor,
    QTextDocument,
    QTextFormat,
)
from PySide6.QtWidgets import QAbstractItemView, QListView, QStyle, QStyledItemDelegate, QStyleOptionViewItem

from desktop.qt import theme
from desktop.qt.compat import emit
from desktop.state.transcript import AssistantItem, Item, NoteItem, ToolItem, Transcript, UserItem

ITEM_ROLE = Qt.ItemDataRole.UserRole + 1
PAD = 10
GAP = 6
CACHE_DOCS = 400
CACHE_HEIGHTS = 50_000
OUTPUT_LINES = 120

# A tool call's status: its words and the theme colour (a `theme.Colors` field) they take.
STATUS_TEXT = {
    "pending": ("queued", "muted"),
    "running": ("running", "accent"),
    "waiting_approval": ("needs approval", "warning"),
    "ok": ("done", "success"),
    "error": ("error", "danger"),
    "denied": ("denied", "danger"),
    "skipped": ("skipped", "muted"),
    "interrupted": ("interrupted", "warning"),
    "unknown": ("outcome unknown", "warning"),
}
NOTE_LABELS = {"summary": "Summary of earlier messages", "continued": "Continued in a new session",
               "recovered": "Recovered after a restart"}
NOTE_COLOR = {"failed": "danger", "interrupted": "warning", "recovered": "warning", "summary": "muted"}


def tone(name: str) -> str:
    """A `theme.Colors` field's colour in the current theme ("muted" -> "#5b616b")."""
    return str(getattr(theme.colors(), name))


Index = QModelIndex | QPersistentModelIndex


class TranscriptModel(QAbstractListModel):
    """Rows are `Transcript.items`; the transcript tells us before and after each change."""

    def __init__(self, transcript: Transcript) -> None:
        super().__init__()
        self.transcript = transcript
        transcript.listener = self

    def rowCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self.transcript.items)

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or index.row() >= len(self.transcript.items):
            return None
        item = self.transcript.items[index.row()]
        if role == ITEM_ROLE:
            return item
        if role == Qt.ItemDataRole.DisplayRole:
            return plain_text(item)
        return None

    # Listener
    def before_insert(self, index: int, count: int) -> None:
        self.beginInsertRows(QModelIndex(), index, index + count - 1)

    def after_insert(self) -> None:
        self.endInsertRows()

    def before_remove(self, index: int, count: int) -> None:
        self.beginRemoveRows(QModelIndex(), index, index + count - 1)

    def after_remove(self) -> None:
        self.endRemoveRows()

    def changed(self, index: int) -> None:
        i = self.index(index)
        emit(self.dataChanged, i, i)


def plain_text(item: Item) -> str:
    if isinstance(item, UserItem | AssistantItem | NoteItem):
        return item.text
    if isinstance(item, ToolItem):
        return f"{item.name}: {item.summary}\n{item.output or item.progress}".strip()
    return ""


class TranscriptDelegate(QStyledItemDelegate):
    def __init__(self, view: QListView) -> None:
        super().__init__(view)
        self.view = view
        self._docs: OrderedDict[tuple[str, int, int, bool], QTextDocument] = OrderedDict()
        # Heights outlive the documents: relaying out rows already measured (after a page is
        # added above, or a window resize back) costs a lookup, not a markdown render.
        self._heights: dict[tuple[str, int, int, bool], int] = {}

    # --- documents -------------------------------------------------------------

    def document(self, item: Item, width: int) -> QTextDocument:
        dark = self.view.palette().color(QPalette.ColorRole.Base).lightness() < 128
        key = (item.key, item.version, width, dark)
        doc = self._docs.get(key)
        if doc is not None:
            self._docs.move_to_end(key)
            return doc
        doc = QTextDocument()
        doc.setDocumentMargin(0)
        doc.setDefaultFont(self.view.font())
        self._fill(doc, item, dark)
        doc.setTextWidth(max(50, width))
        self._docs[key] = doc
        if len(self._docs) > CACHE_DOCS:
            self._docs.popitem(last=False)
        return doc

    def _fill(self, doc: QTextDocument, item: Item, dark: bool) -> None:
        text_color = self.view.palette().color(QPalette.ColorRole.Text).name()
        doc.setDefaultStyleSheet(f"body {{ color: {text_color}; }} pre {{ margin: 0; }}")
        if isinstance(item, UserItem | AssistantItem):
            body = item.text
            if isinstance(item, AssistantItem) and item.streaming:
                body += " ▍"
            doc.setMarkdown(body or (" " if isinstance(item, AssistantItem) else ""))
            _shade_code(doc, dark)
        elif isinstance(item, ToolItem):
            doc.setHtml(tool_html(item, dark))
        elif isinstance(item, NoteItem):
            color = tone(NOTE_COLOR.get(item.kind, "muted"))
            label = NOTE_LABELS.get(item.kind, item.kind.capitalize())
            doc.setHtml(f'<p style="color:{color}"><b>{esc(label)}</b> — {esc(item.text)}</p>')

    # --- geometry and painting ---------------------------------------------------

    def _content_width(self, item: Item) -> int:
        width = self.view.viewport().width() - 2 * PAD - 4
        if isinstance(item, UserItem):
            width = int(width * 0.8)
        return max(80, width - (2 * PAD if not isinstance(item, AssistantItem) else 0))

    def sizeHint(self, option: QStyleOptionViewItem, index: Index) -> QSize:
        item = index.data(ITEM_ROLE)
        if item is None:
            return QSize(0, 0)
        width = self._content_width(item)
        dark = self.view.palette().color(QPalette.ColorRole.Base).lightness() < 128
        key = (item.key, item.version, width, dark)
        height = self._heights.get(key)
        if height is None:
            height = int(self.document(item, width).size().height())
            if len(self._heights) > CACHE_HEIGHTS:
                self._heights.clear()
            self._heights[key] = height
        inner = PAD if not isinstance(item, AssistantItem) else 2
        return QSize(self.view.viewport().width() - 4, height + 2 * inner + GAP)

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: Index) -> None:
        item = index.data(ITEM_ROLE)
        if item is None:
            return
        pal = self.view.palette()
        width = self._content_width(item)
        doc = self.document(item, width)
        rect = option.rect.adjusted(PAD, GAP // 2, -PAD, -GAP // 2)
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        inner = PAD
        if isinstance(item, UserItem):
            bubble_w = min(rect.width(), int(doc.idealWidth()) + 2 * PAD + 2)
            rect.setLeft(rect.right() - bubble_w)
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(QColor(theme.colors().bubble_user))
            painter.drawRoundedRect(QRectF(rect), 10, 10)
        elif isinstance(item, ToolItem):
            color = QColor(tone(STATUS_TEXT.get(item.status, ("", "muted"))[1]))
            painter.setPen(color if item.status in ("unknown", "denied", "error")
                           else QColor(theme.colors().border))
            painter.setBrush(QColor(theme.colors().surface))
            painter.drawRoundedRect(QRectF(rect).adjusted(0.5, 0.5, -0.5, -0.5), 6, 6)
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(color)
            painter.drawRoundedRect(QRectF(rect.left(), rect.top(), 4, rect.height()), 2, 2)
        elif isinstance(item, AssistantItem):
            inner = 2
        if option.state & QStyle.StateFlag.State_Selected:
            painter.setPen(pal.color(QPalette.ColorRole.Highlight))
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.drawRoundedRect(QRectF(rect), 6, 6)
        painter.translate(rect.left() + (inner if not isinstance(item, AssistantItem) else 0),
                          rect.top() + inner)
        doc.drawContents(painter)
        painter.restore()


def tool_html(item: ToolItem, dark: bool) -> str:
    label, color_name = STATUS_TEXT.get(item.status, (item.status, "muted"))
    color, muted = tone(color_name), tone("muted")
    took = f" · {item.duration_ms / 1000:.1f} s" if item.duration_ms is not None else ""
    arrow = "▾" if item.expanded else "▸"
    head = (f'<p><span style="color:{muted}">{arrow}</span> <b>{esc(item.name or "tool")}</b> '
            f'<code>{esc(item.summary[:160])}</code> '
            f'<span style="color:{color}"><b>{esc(label)}</b>{took}</span></p>')
    parts = [head]
    if item.status == "unknown":
        parts.append(f'<p style="color:{tone("warning")}">Turnkey stopped while this ran; it may or may not '
                     'have finished. It was not run again.</p>')
    elif item.status == "denied":
        parts.append(f'<p style="color:{tone("danger")}">Not run: refused by you, a rule, or a timeout.</p>')
    if item.status in ("running", "waiting_approval") and item.progress:
        tail = "\n".join(item.progress.splitlines()[-8:])
        parts.append(f"<pre>{esc(tail)}</pre>")
    if item.expanded:
        if item.diff:
            parts.append(diff_html(item.diff, dark))
        body = item.output or item.progress
        if body:
            lines = body.splitlines()
            more = len(lines) - OUTPUT_LINES
            shown = "\n".join(lines[:OUTPUT_LINES])
            parts.append(f"<pre>{esc(shown)}</pre>")
            if more > 0:
                parts.append(f'<p style="color:{muted}">… {more} more lines</p>')
        if item.spilled_path:
            parts.append(f'<p style="color:{muted}">Full output: {esc(item.spilled_path)}</p>')
        if item.arguments and not item.diff:
            import json

            args = json.dumps(item.arguments, indent=2, ensure_ascii=False)
            parts.append(f'<p style="color:{muted}">Arguments</p><pre>{esc(args[:4000])}</pre>')
    elif item.diff:
        adds = sum(1 for ln in item.diff.splitlines() if ln.startswith("+") and not ln.startswith("+++"))
        dels = sum(1 for ln in item.diff.splitlines() if ln.startswith("-") and not ln.startswith("---"))
        parts.append(f'<p><span style="color:{tone("success")}">+{adds}</span> '
                     f'<span style="color:{tone("danger")}">−{dels}</span> '
                     f'<span style="color:{muted}">(click to see the diff)</span></p>')
    return "".join(parts)


def diff_html(diff: str, dark: bool) -> str:
    add_bg, del_bg = ("#1f3d2a", "#4a2226") if dark else ("#e6f7ea", "#fbe9ea")
    hunk = tone("accent")
    rows = []
    for line in diff.splitlines()[:400]:
        if line.startswith("+++") or line.startswith("---"):
            rows.append(f'<span style="color:{tone("muted")}">{esc(line)}</span>')
        elif line.startswith("@@"):
            rows.append(f'<span style="color:{hunk}">{esc(line)}</span>')
        elif line.startswith("+"):
            rows.append(f'<span style="background:{add_bg}">{esc(line)}</span>')
        elif line.startswith("-"):
            rows.append(f'<span style="background:{del_bg}">{esc(line)}</span>')
        else:
            rows.append(esc(line))
    return "<pre>" + "\n".join(rows) + "</pre>"


def _shade_code(doc: QTextDocument, dark: bool) -> None:
    """Gives fenced code blocks a background (Qt's markdown importer marks them, but plainly)."""
    shade = QColor(theme.colors().surface)
    block = doc.begin()
    while block.isValid():
        fmt = block.blockFormat()
        if fmt.hasProperty(QTextFormat.Property.BlockCodeFence) or \
                fmt.hasProperty(QTextFormat.Property.BlockCodeLanguage):
            cursor = QTextCursor(block)
            shaded = QTextBlockFormat()
            shaded.setBackground(shade)
            cursor.mergeBlockFormat(shaded)
        block = block.next()


def esc(text: object) -> str:
    """Text for Qt's rich text: markup characters escaped."""
    return html.escape(str(text), quote=False)


def make_view(model: TranscriptModel) -> QListView:
    view = QListView()
    view.setModel(model)
    view.setItemDelegate(TranscriptDelegate(view))
    view.setVerticalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)
    view.setResizeMode(QListView.ResizeMode.Adjust)
    view.setUniformItemSizes(False)
    view.setWordWrap(True)
    view.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
    view.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    view.setFrameShape(QListView.Shape.NoFrame)
    view.verticalScrollBar().setSingleStep(24)
    return view
