"""The transcript as a virtualized list: a model over `Transcript`, a delegate that paints items,
and the view that makes them readable (selection, copy, links, a context menu).

Only the loaded page(s) are rows; the view lays out and paints only what is
visible.  Each item is drawn from a QTextDocument cached by (key, version, width, ...), so
a streaming message re-lays out only itself.  Its HTML comes from `markdown.py` for the
assistant's messages (rendered once per version), from `user_html` for the user's (plain
text as typed, a long paste collapsed), and from `tool_html` for tool cards.  Qt asks every
row's size on each relayout (a page added above, a streamed row grown), so a row measured
before answers from its cached height without a call back into Qt; and once the view has not
painted for a moment, the rows a screen above and below it are rendered ahead, a few ms at a
time, so that scrolling to them only draws them.

Painted rows are pictures, and the view selects in them itself: a drag selects from the press to
the pointer across as many rows as it spans (`copying.Selection`: a row and a character offset at
each end, measured in the rows' documents), the delegate paints the selected part of each row, and
Ctrl+C copies it.  A click never scrolls the view.  For the keyboard, Enter opens a `Reader` over
the current row, a read-only text browser showing the same document in the same place.
"""

from __future__ import annotations

import html
import itertools
import time
import weakref
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any

import shiboken6
from PySide6.QtCore import (
    QAbstractListModel,
    QEvent,
    QModelIndex,
    QPersistentModelIndex,
    QPoint,
    QPointF,
    QRect,
    QRectF,
    QSize,
    Qt,
    QTimer,
    QUrl,
    Signal,
)
from PySide6.QtGui import (
    QAbstractTextDocumentLayout,
    QColor,
    QContextMenuEvent,
    QDesktopServices,
    QFontDatabase,
    QGuiApplication,
    QKeyEvent,
    QKeySequence,
    QMouseEvent,
    QPainter,
    QPaintEvent,
    QPalette,
    QShortcut,
    QTextCharFormat,
    QTextCursor,
)
from PySide6.QtWidgets import (
    QAbstractItemView,
    QListView,
    QMenu,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QWidget,
)

from desktop.qt import delegate_card, markdown, theme
from desktop.qt.attachment_viewing import Thumbnails, add_thumbnails, attachments_html
from desktop.qt.compat import emit
from desktop.qt.drag_select import DragSelect
from desktop.qt.reader import Reader, SafeDocument
from desktop.state.answers import AnswerBar, is_prompt
from desktop.state.copying import exchange_markdown, exchange_rows
from desktop.state.delegation import is_delegate
from desktop.state.sessions import local_time
from desktop.state.transcript import (
    TOOL_STATUS_WORDS,
    AssistantItem,
    Item,
    NoteItem,
    ToolItem,
    Transcript,
    UserItem,
)
from shared.mcp_names import shown_name, shown_summary

ITEM_ROLE = Qt.ItemDataRole.UserRole + 1
PAD = 10
GAP = 6
COLUMN = 980  # px: the widest the conversation's column gets (longer lines are hard to read)
CACHE_DOCS = 400
CACHE_HEIGHTS = 50_000
OUTPUT_LINES = 120
# A user's message longer than this shows its first PREVIEW_LINES (at most PREVIEW_CHARS) and
# a "Show all" link.
LONG_LINES = 25
LONG_CHARS = 4_000
PREVIEW_LINES = 12
PREVIEW_CHARS = 1_500
COPIED_MS = 1_500  # a code block's link says "Copied" this long
# Once the view has not painted for WARM_AFTER_MS (the reader stopped scrolling), the rows a
# screen above and below it are rendered ahead (code coloured), at most WARM_MS at a time, so
# scrolling to them next only draws them.  While it scrolls, nothing is added between frames.
WARM_AFTER_MS = 100
WARM_MS = 4
# A tool call's status: the theme colour (a `theme.Colors` field) its words take.
STATUS_TONE = {
    "pending": "muted",
    "running": "accent",
    "waiting_approval": "warning",
    "waiting_answer": "warning",
    "ok": "success",
    "error": "danger",
    "denied": "danger",
    "skipped": "muted",
    "interrupted": "warning",
    "unknown": "warning",
}
STATUS_TEXT = {status: (TOOL_STATUS_WORDS[status], color) for status, color in STATUS_TONE.items()}
NOTE_LABELS = {"summary": "Summary of earlier messages", "continued": "Continued in a new session",
               "recovered": "Outcome unknown", "notice": "Note", "review": "Memory",
               "hook": "Hook"}
# The app's own links in a prompt's bubble and an answer bar (markdown.action_of reads them).
PREV, NEXT = f"{markdown.ACTION}:prev", f"{markdown.ACTION}:next"
REGENERATE = f"{markdown.ACTION}:regenerate"
BRANCH = f"{markdown.ACTION}:branch"
ATTACHMENT = f"{markdown.ACTION}:attachment"  # /N: the prompt's Nth file, to open
UNDO_REVIEW = f"{markdown.ACTION}:undo_review"  # a review note's Undo (review.undo)
NOTE_COLOR = {"failed": "danger", "interrupted": "warning", "recovered": "warning", "summary": "muted",
              "notice": "warning", "hook": "warning"}


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
    if isinstance(item, AnswerBar):  # (what a screen reader says of the row)
        return f"Answer {item.shown + 1} of {len(item.turns)}: Left and Right show the others"
    if isinstance(item, ToolItem):
        name, origin = shown_name(item.name)
        name = f"{name} ({origin})" if origin else name
        return f"{name}: {item.summary}\n{item.output or item.progress}".strip()
    return ""


def is_long(text: str) -> bool:
    """A message long enough to be collapsed (a paste, usually)."""
    return len(text) > LONG_CHARS or text.count("\n") >= LONG_LINES


def user_html(text: str, expanded: bool, branches: int = 0, files: str = "") -> str:
    """The user's message as typed: its files first (`files`, their HTML), then its words
    escaped (never markdown), line breaks and indentation kept; a long one shows its first
    lines and a link to show all of it (or less again); one edited into new branches
    (`session.fork`) links to each."""
    shown = text
    long = is_long(text)
    if long and not expanded:
        shown = "\n".join(text.split("\n")[:PREVIEW_LINES])[:PREVIEW_CHARS].rstrip()
    parts = [files] if files else []
    if shown or not files:
        parts.append(f'<p style="white-space:pre-wrap; margin:0px; line-height:125%">{esc(shown)}</p>')
    if long:
        lines = text.count("\n") + 1
        size = f"{lines:,} lines" if lines > 1 else f"{len(text):,} characters"
        label = "Show less" if expanded else f"Show all ({size})"
        parts.append(f'<p style="margin-top:8px; margin-bottom:0px"><a href="{markdown.ACTION}:expand" '
                     f'style="color:{tone("accent")}; text-decoration:none; font-weight:600">{label}</a></p>')
    if branches:
        names = [f"branch {n + 1}" for n in range(branches)] if branches > 1 else ["open it"]
        links = " · ".join(f'<a href="{BRANCH}/{n}" style="color:{tone("accent")}; '
                           f'text-decoration:none">{name}</a>' for n, name in enumerate(names))
        where = "in a new branch" if branches == 1 else f"in {branches} branches"
        parts.append(f'<p style="margin-top:6px; margin-bottom:0px; color:{tone("muted")}">'
                     f'↳ Edited {where}: {links}</p>')
    return "".join(parts)


def bar_html(bar: AnswerBar) -> str:
    """Under an answer with siblings: ‹ 2 / 3 › to page through them (and, under the last
    prompt's, Regenerate)."""
    accent, muted = tone("accent"), tone("muted")

    def arrow(sign: str, href: str, enabled: bool) -> str:
        if not enabled:
            return f'<span style="color:{muted}">{sign}</span>'
        return f'<a href="{href}" style="color:{accent}; text-decoration:none; font-weight:600">{sign}</a>'

    parts = [arrow("‹", PREV, bar.shown > 0), f'<span style="color:{muted}"> {bar.words} </span>',
             arrow("›", NEXT, bar.shown < len(bar.turns) - 1)]
    if bar.last:
        parts.append(f'<span style="color:{muted}">  ·  </span><a href="{REGENERATE}" '
                     f'style="color:{accent}; text-decoration:none">Regenerate</a>')
    return f'<p style="margin:0px">{"".join(parts)}</p>'


def note_html(item: NoteItem) -> str:
    """A note in one line; a failure's raw detail behind "Details" (a click or Enter)."""
    color = tone(NOTE_COLOR.get(item.kind, "muted"))
    label = NOTE_LABELS.get(item.kind, item.kind.capitalize())
    words = f'<p style="color:{color}"><b>{esc(label)}</b> — {esc(item.text)}</p>'
    if item.kind == "review":  # quiet, with its Undo (or that it was undone)
        muted, accent = tone("muted"), tone("accent")
        words += (f'<p style="color:{muted}">Undone</p>' if item.undone else
                  f'<p><a href="{UNDO_REVIEW}" style="color:{accent}; text-decoration:none">'
                  'Undo</a></p>')
    if not item.detail:
        return words
    muted = tone("muted")
    arrow = "▾" if item.expanded else "▸"
    words += f'<p style="color:{muted}">{arrow} Details</p>'
    if item.expanded:
        words += f'<pre style="color:{muted}">{esc(item.detail)}</pre>'
    return words


@cache
def mono_family() -> str:
    """The system's fixed-pitch font, for code."""
    return QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont).family()


def look(dark: bool, font_pt: float) -> markdown.Look:
    """The colours markdown takes in a theme (code blocks a shade off the conversation's base)."""
    t = theme.THEMES["dark" if dark else "light"]
    return markdown.Look(
        dark=dark, text=t.text, muted=t.muted, link=t.accent, border=t.border,
        code_bg="#111214" if dark else "#f7f8fa", code_head="#202125" if dark else "#eceef1",
        inline_code_bg="#2b2d31" if dark else "#eef0f3", quote_bar=t.border_strong, quote_bg=t.alt_base,
        table_head=t.surface, font_pt=font_pt, mono=mono_family())


RenderKey = tuple[str, int, bool, int]  # what a rendering depends on: key, version, dark, state
Stamp = tuple[str, int, bool, int, int]  # ... and its layout: the width too


class TranscriptDelegate(QStyledItemDelegate):
    """Paints items from cached documents, and makes the `Reader` a row opens as."""

    def __init__(self, view: TranscriptView) -> None:
        super().__init__(view)
        self.view = view
        # A document per rendering (and whether its code is coloured), laid out again, not
        # parsed again, at another width.
        self._docs: OrderedDict[RenderKey, tuple[SafeDocument, bool]] = OrderedDict()
        # Heights outlive the documents: relaying out rows already measured (after a page is
        # added above, or a window resize back) costs a lookup, not a markdown render.
        self._heights: dict[Stamp, int] = {}
        self._latest: dict[str, RenderKey] = {}  # each item's newest document
        # The theme's darkness, read from the palette once (a relayout asks every row's size):
        # forgotten when the view's palette or style changes (`forget_look`).
        self._dark_now: bool | None = None
        self._bar_width: int | None = None  # the scroll bar's, for the style in use
        self.transcript = view.model().transcript  # the rows, read without a call into Qt

    # --- renderings ----------------------------------------------------------------------

    def _dark(self) -> bool:
        if self._dark_now is None:
            self._dark_now = self.view.palette().color(QPalette.ColorRole.Base).lightness() < 128
        return self._dark_now

    def forget_look(self) -> None:
        """The palette, style or font changed: rows are rendered and measured again."""
        self._dark_now = None
        self._bar_width = None

    def _state(self, item: Item) -> int:
        """What else than its version an item's rendering shows: a long message expanded (1),
        the code block whose Copy link says "Copied" (its number), or nothing (-1)."""
        if isinstance(item, UserItem):
            return int(item.key in self.view.expanded)
        copied = self.view.copied
        return copied[1] if copied is not None and copied[0] == item.key else -1

    def render_key(self, item: Item) -> RenderKey:
        return (item.key, item.version, self._dark(), self._state(item))

    def stamp(self, item: Item, width: int) -> Stamp:
        return (*self.render_key(item), width)

    def rendered(self, item: Item, colored: bool = True) -> markdown.Rendered:
        """The item's HTML (and code blocks); `colored` False leaves code unhighlighted (the
        same layout, cheaper: for measuring).  Markdown renderings are cached (markdown.py)."""
        _, _, dark, state = self.render_key(item)
        if isinstance(item, AssistantItem):
            return markdown.render(item.text or " ", look(dark, self.view.font().pointSizeF()),
                                   streaming=item.streaming, copied=state, colored=colored)
        if isinstance(item, UserItem):
            files = attachments_html(item.attachments, ATTACHMENT, tone("accent"),
                                     tone("muted")) if item.attachments else ""
            return markdown.Rendered(user_html(item.text, state == 1, len(item.branches), files))
        if isinstance(item, AnswerBar):
            return markdown.Rendered(bar_html(item))
        if isinstance(item, ToolItem):
            if is_delegate(item):  # its answer is markdown, rendered as answers are
                label, took = _status_words(item)
                return delegate_card.card(item, label, took,
                                          look(dark, self.view.font().pointSizeF()), state)
            return markdown.Rendered(tool_html(item, dark))
        if isinstance(item, NoteItem):
            return markdown.Rendered(note_html(item))
        return markdown.Rendered("")

    def new_document(self, item: Item, width: int, colored: bool = True) -> SafeDocument:
        return self._new_document(item, width, self.rendered(item, colored))

    def _new_document(self, item: Item, width: int, rendered: markdown.Rendered) -> SafeDocument:
        doc = SafeDocument()
        doc.setDefaultFont(self.view.font())
        text_color = self.view.palette().color(QPalette.ColorRole.Text).name()
        doc.setDefaultStyleSheet(f"body {{ color: {text_color}; }} pre {{ margin: 0; }}")
        if isinstance(item, UserItem) and item.attachments:
            add_thumbnails(doc, item.attachments, self.view.thumbnails)
        doc.setHtml(rendered.html)
        doc.setTextWidth(max(50, width))
        return doc

    def ready(self, item: Item) -> bool:
        """Whether the item's newest rendering is cached as it is painted (code coloured)."""
        found = self._docs.get(self.render_key(item))
        return found is not None and found[1]

    def document(self, item: Item, width: int, colored: bool = False) -> SafeDocument:
        """The item's document laid out at `width`; with `colored`, its code highlighted (a row
        only measured never needs that: rows above the view are not highlighted until seen)."""
        key = self.render_key(item)
        found = self._docs.get(key)
        if found is not None and (found[1] or not colored):
            self._docs.move_to_end(key)
            doc = found[0]
            if doc.textWidth() != max(50, width):
                doc.setTextWidth(max(50, width))
            return doc
        rendered = self.rendered(item, colored)
        doc = self._new_document(item, width, rendered)
        # Only code is coloured: without any, the measured document is the painted one.
        self._docs[key] = (doc, colored or not isinstance(item, AssistantItem) or not rendered.code)
        self._docs.move_to_end(key)
        before = self._latest.get(item.key)
        if before is not None and before != key:
            self._docs.pop(before, None)  # an older version (a streaming answer's last delta)
        self._latest[item.key] = key
        if len(self._docs) > CACHE_DOCS:
            self._docs.popitem(last=False)
        return doc

    # --- geometry and painting ---------------------------------------------------

    def column(self) -> int:
        """The width of the conversation's column: the view's, up to COLUMN."""
        return self._widths()[1]

    def _widths(self) -> tuple[int, int]:
        """(a row's width, the conversation column's)."""
        row = self.view.viewport().width() - 4
        width = row
        bar = self.view.verticalScrollBar()
        if not bar.isVisible():
            # As if the scroll bar were there: when it appears (a long page just loaded), the
            # rows keep their layout instead of all being laid out again, narrower.
            if self._bar_width is None:
                self._bar_width = bar.sizeHint().width()  # (the style's metrics: not cheap)
            width -= self._bar_width
        return row, min(width, COLUMN)

    def content_width(self, item: Item, column: int | None = None) -> int:
        width = (self.column() if column is None else column) - 2 * PAD
        if isinstance(item, UserItem):
            width = int(width * 0.8)
        return max(80, width - (2 * PAD if not isinstance(item, AssistantItem) else 0))

    def _frame(self, item: Item, row: QRect, doc: SafeDocument) -> QRect:
        """The item's card or bubble inside its row (in the column, centred)."""
        column = self.column()
        left = row.left() + max(0, (row.width() - column) // 2)
        rect = QRect(left, row.top(), column, row.height()).adjusted(PAD, GAP // 2, -PAD, -GAP // 2)
        if isinstance(item, UserItem):
            bubble_w = min(rect.width(), int(doc.idealWidth()) + 2 * PAD + 2)
            rect.setLeft(rect.right() - bubble_w)
        return rect

    def text_rect(self, item: Item, row: QRect, doc: SafeDocument) -> QRect:
        """Where the item's document is drawn (and its reader goes)."""
        frame = self._frame(item, row, doc)
        inner = 2 if isinstance(item, AssistantItem) else PAD
        left = frame.left() + (0 if isinstance(item, AssistantItem) else inner)
        return QRect(left, frame.top() + inner, int(doc.textWidth()), int(doc.size().height()) + 1)

    def placed(self, index: Index) -> tuple[SafeDocument, QRect] | None:
        """The row's document, laid out, and where it is drawn (viewport coordinates)."""
        item = index.data(ITEM_ROLE)
        if item is None:
            return None
        doc = self.document(item, self.content_width(item))
        return doc, self.text_rect(item, self.view.visualRect(index), doc)

    def anchor_at(self, index: Index, pos: QPoint) -> str:
        """The link under `pos` (viewport coordinates) in a painted row, or ""."""
        found = self.placed(index)
        if found is None:
            return ""
        doc, rect = found
        return str(doc.documentLayout().anchorAt(QPointF(pos - rect.topLeft())))

    def offset_at(self, index: Index, pos: QPoint) -> int:
        """The offset of the character boundary nearest `pos` (viewport coordinates) in the row's
        text: above or beside the text, the nearest line's."""
        found = self.placed(index)
        if found is None:
            return 0
        doc, rect = found
        hit = doc.documentLayout().hitTest(QPointF(pos - rect.topLeft()), Qt.HitTestAccuracy.FuzzyHit)
        return max(0, hit)

    def sizeHint(self, option: QStyleOptionViewItem, index: Index) -> QSize:
        # Asked of every row on each relayout (a page added above, a streamed line): a row
        # measured before costs a lookup, its item read straight from the transcript.
        items = self.transcript.items
        row = index.row()
        if not 0 <= row < len(items):
            return QSize(0, 0)
        item = items[row]
        row_width, column = self._widths()
        inner = PAD if not isinstance(item, AssistantItem) else 2
        return QSize(row_width, self._height(item, column) + 2 * inner + GAP)

    def measure(self, item: Item) -> None:
        """Measures `item` as the next relayout will (its height cached): a row about to be
        added, so that adding it costs that relayout a lookup."""
        self._height(item, self._widths()[1])

    def _height(self, item: Item, column: int) -> int:
        width = self.content_width(item, column)
        key = (item.key, item.version, self._dark(), self._state(item), width)
        height = self._heights.get(key)
        if height is None:
            height = int(self.document(item, width).size().height())
            if len(self._heights) > CACHE_HEIGHTS:
                self._heights.clear()
            self._heights[key] = height
        return height

    def _check_height(self, item: Item, width: int, doc: SafeDocument, index: Index) -> None:
        """A row measured uncoloured is painted coloured: the same height, unless a font
        surprises us; then the row is measured again."""
        stamp = self.stamp(item, width)
        height = int(doc.size().height())
        if self._heights.get(stamp, height) != height:
            self._heights[stamp] = height
            emit(self.sizeHintChanged, self.view.model().index(index.row(), 0))

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: Index) -> None:
        row = index.row()
        if not 0 <= row < len(self.transcript.items):
            return
        item = self.transcript.items[row]
        pal = self.view.palette()
        width = self.content_width(item)
        doc = self.document(item, width, colored=_code_colours.ready(self.view))
        self._check_height(item, width, doc, index)
        rect = self._frame(item, option.rect, doc)
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        if isinstance(item, UserItem):
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(QColor(theme.colors().bubble_user))
            painter.drawRoundedRect(QRectF(rect), 12, 12)
        elif isinstance(item, ToolItem):
            color = QColor(tone(STATUS_TEXT.get(item.status, ("", "muted"))[1]))
            painter.setPen(color if item.status in ("unknown", "denied", "error")
                           else QColor(theme.colors().border))
            painter.setBrush(QColor(theme.colors().surface))
            painter.drawRoundedRect(QRectF(rect).adjusted(0.5, 0.5, -0.5, -0.5), 6, 6)
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(color)
            painter.drawRoundedRect(QRectF(rect.left(), rect.top(), 4, rect.height()), 2, 2)
        if option.state & QStyle.StateFlag.State_Selected and self.view.hasFocus():
            painter.setPen(pal.color(QPalette.ColorRole.Highlight))
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.drawRoundedRect(QRectF(rect).adjusted(-2.5, -2.5, 2.5, 2.5), 8, 8)
        if not self.view.reading(index):  # (else the reader shows the text, over the row)
            at = self.text_rect(item, option.rect, doc).topLeft()
            painter.translate(at)
            seen = QRectF(self.view.viewport().rect().translated(-at))  # (of a long row, a part)
            self._draw(painter, doc, seen, self.view.selecting.pieces(index.row(), doc))
        painter.restore()

    def _draw(self, painter: QPainter, doc: SafeDocument, seen: QRectF, selected: list[QTextCursor]) -> None:
        """The part `seen` of the document, the text `selected` in it (if any) in the colours of
        selected text (a text field's: the view's own selection colour is a row's, too close to
        a bubble's)."""
        selected = [cursor for cursor in selected if cursor.hasSelection()]
        if not selected:
            doc.drawContents(painter, seen)
            return
        look = QTextCharFormat()
        look.setBackground(QColor(theme.tokens().primary))
        look.setForeground(QColor(theme.tokens().on_accent))
        chosen = []
        for cursor in selected:
            one = QAbstractTextDocumentLayout.Selection()
            one.cursor = cursor
            one.format = look
            chosen.append(one)
        context = QAbstractTextDocumentLayout.PaintContext()  # (as drawContents makes it)
        context.selections = chosen
        context.clip = seen
        painter.setClipRect(seen)
        doc.documentLayout().draw(painter, context)

    # --- the reader ----------------------------------------------------------------------

    def createEditor(self, parent: QWidget, option: QStyleOptionViewItem, index: Index) -> QWidget:
        reader = Reader(parent)
        reader.setFont(self.view.font())
        self.view.adopt(reader)
        return reader

    def setEditorData(self, editor: QWidget, index: Index) -> None:
        item = index.data(ITEM_ROLE)
        if isinstance(editor, Reader) and item is not None:
            width = self.content_width(item)
            stamp = self.stamp(item, width)
            if stamp != editor.stamp:
                editor.show_document(stamp, self.new_document(item, width))

    def updateEditorGeometry(self, editor: QWidget, option: QStyleOptionViewItem, index: Index) -> None:
        item = index.data(ITEM_ROLE)
        if item is not None:
            self.setEditorData(editor, index)  # (a new width is a new layout)
            doc = self.document(item, self.content_width(item))
            editor.setGeometry(self.text_rect(item, option.rect, doc))

    def setModelData(self, editor: QWidget, model: Any, index: Index) -> None:
        pass  # read-only

    def eventFilter(self, watched: Any, event: Any) -> bool:
        return False  # not the item-editor keys (Enter commits, Tab moves on): a reader reads


class _CodeColours:
    """Whether painted rows show their code highlighted: not in the process's first transcript
    frame, from the next turn of the event loop on.

    The first highlight loads Pygments and its lexer (40–100 ms, more than the rest of the
    first page's painting), so the window a launch opens on shows its code plain in its first
    frame, with the same layout (highlighting only colours text), and coloured right after."""

    def __init__(self) -> None:
        self.on = False
        self._plain: weakref.WeakSet[QWidget] = weakref.WeakSet()  # viewports painted plain

    def ready(self, view: QListView) -> bool:
        if not self.on:
            if not self._plain:
                QTimer.singleShot(0, self._colour)  # after this frame is on screen
            self._plain.add(view.viewport())
        return self.on

    def _colour(self) -> None:
        self.on = True
        for viewport in list(self._plain):
            if shiboken6.isValid(viewport):
                viewport.update()
        self._plain.clear()


_code_colours = _CodeColours()


class TranscriptView(QListView):
    """The transcript's list.  A drag selects text, across messages too; Ctrl+C copies the
    selection, or else the current item's whole text; a context menu offers Copy, Copy as
    Markdown (the message, or its whole exchange) and Quote in reply.  A click on a tool card
    expands it; Enter or Space expands a card or a long message, or opens a message as a `Reader`
    (the one reader closes when another row becomes current)."""

    quote_requested = Signal(str)  # "Quote in reply": the text to quote in the message box
    open_session_requested = Signal(str)  # a sub-agent's session to open (its card's Open)
    # A prompt's answers and branches: page its bar (row, -1 or +1), answer the last prompt
    # again, edit a prompt into a new branch (its row), open a branch made at a prompt.
    page_requested = Signal(int, int)
    regenerate_requested = Signal()
    review_undo_requested = Signal(str)  # a review note's message_id: put its changes back
    edit_requested = Signal(int)
    branch_requested = Signal(str)
    link_clicked = Signal(QUrl)  # a link in a message (http, https or mailto) was clicked
    attachment_requested = Signal(object)  # a prompt's file (MessageAttachment) to open

    def __init__(self, model: TranscriptModel) -> None:
        super().__init__()
        self.setModel(model)
        self.delegate = TranscriptDelegate(self)
        self.setItemDelegate(self.delegate)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setVerticalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)
        self.setResizeMode(QListView.ResizeMode.Adjust)
        self.setUniformItemSizes(False)
        self.setWordWrap(True)
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setFrameShape(QListView.Shape.NoFrame)
        self.verticalScrollBar().setSingleStep(24)
        self.setMouseTracking(True)  # links under the pointer show a hand, text an I-beam
        self.expanded: set[str] = set()  # long user messages shown in full, by item key
        self.thumbnails: Thumbnails | None = None  # the prompts' images (the conversation's)
        self.copied: tuple[str, int] | None = None  # (item key, code block) just copied
        self.selecting = DragSelect(self)  # the text selected with the mouse
        self._reading: QPersistentModelIndex | None = None
        self._pressed_link = ""  # the link under a left press: a release on it follows it
        self._uncopy = QTimer(self, singleShot=True, interval=COPIED_MS)
        self._uncopy.timeout.connect(self._copied_done)
        self._warm = QTimer(self, singleShot=True, interval=WARM_AFTER_MS)  # `_warm_rows`
        self._warm.timeout.connect(self._warm_rows)
        for key in (Qt.Key.Key_Return, Qt.Key.Key_Enter, Qt.Key.Key_Space):
            # A shortcut, not a key handler: the follower sends keys the list gets to the
            # message box (follow.py), and Enter on a focused row means the row.
            shortcut = QShortcut(QKeySequence(key), self)
            shortcut.setContext(Qt.ShortcutContext.WidgetShortcut)
            shortcut.activated.connect(self.activate_current)
        self.selectionModel().currentChanged.connect(self._current_changed)
        self.link_clicked.connect(open_link)
        # The rows of answers not shown stay in the model, hidden (state/answers.py).
        model.rowsInserted.connect(lambda _parent, first, last: self._sync_hidden(first, last))
        model.dataChanged.connect(lambda top, bottom, _roles=(): self._sync_hidden(top.row(), bottom.row()))
        model.modelReset.connect(lambda: self._sync_hidden(0, model.rowCount() - 1))

    def _sync_hidden(self, first: int, last: int) -> None:
        items = self.model().transcript.items
        for row in range(max(0, first), min(last, len(items) - 1) + 1):
            if self.isRowHidden(row) != items[row].hidden:
                self.setRowHidden(row, items[row].hidden)

    def paintEvent(self, e: QPaintEvent) -> None:
        super().paintEvent(e)
        self._warm.start(WARM_AFTER_MS)  # (again: from this paint on)

    def _warm_rows(self) -> None:
        """Renders the documents of the rows just out of sight, nearest first, WARM_MS at a
        time (the timer comes back for the rest: input and paints go between)."""
        deadline = time.perf_counter() + WARM_MS / 1000
        items = self.model().transcript.items
        for row in self._near_rows():
            item = items[row]
            if self.delegate.ready(item):
                continue
            if time.perf_counter() > deadline:
                self._warm.start(0)  # (the rest after whatever came meanwhile)
                return
            self.delegate.document(item, self.delegate.content_width(item), colored=True)

    def _near_rows(self) -> list[int]:
        """The rows a screen above and below the visible ones, nearest first (hidden ones not)."""
        count = self.model().rowCount()
        if not count:
            return []
        area = self.viewport().rect()
        first = self.indexAt(QPoint(area.center().x(), area.top())).row()
        last = self.indexAt(QPoint(area.center().x(), area.bottom())).row()
        first = 0 if first < 0 else first
        last = count - 1 if last < 0 else last
        reach = last - first + 2
        below = range(last + 1, min(count, last + 1 + reach))
        above = range(first - 1, max(-1, first - 1 - reach), -1)
        near = [row for pair in itertools.zip_longest(below, above) for row in pair if row is not None]
        return [row for row in near if not self.isRowHidden(row)]

    def model(self) -> TranscriptModel:
        found = super().model()
        assert isinstance(found, TranscriptModel)
        return found

    def item(self, index: Index) -> Item | None:
        found = index.data(ITEM_ROLE) if index.isValid() else None
        return found if isinstance(found, Item) else None

    def document(self, index: Index) -> SafeDocument | None:
        """The document the row at `index` is painted from (what a reader of it shows), laid out."""
        item = self.item(index)
        if item is None:
            return None
        doc = self.delegate.document(item, self.delegate.content_width(item), colored=True)
        doc.size()  # (layout is lazy: now its lines exist)
        return doc

    @contextmanager
    def _unscrolled(self) -> Iterator[None]:
        """Qt's own handling of a press (or a current row set) without its scrolling: a view
        scrolls the pressed row into sight, at once or when a double click can no longer come,
        which for a row taller than the view jumps to its top and loses the reader's place."""
        auto = self.hasAutoScroll()
        self.setAutoScroll(False)
        try:
            yield
        finally:
            self.setAutoScroll(auto)

    # --- the reader ----------------------------------------------------------------------

    def open_reader(self, index: Index) -> Reader | None:
        """Opens the message at `index` for reading (a tool card has no reader: None)."""
        if not isinstance(self.item(index), UserItem | AssistantItem | NoteItem):
            return None
        if not self.reading(index):
            self.close_reader()
            self.selecting.clear()  # (one selection at a time: the reader's now)
            if self.currentIndex().row() != index.row():
                self.setCurrentIndex(self.model().index(index.row(), 0))  # the reader is the current row's
            self.openPersistentEditor(index)
            self._reading = QPersistentModelIndex(index)
        return self.reader()

    def reader(self) -> Reader | None:
        """The open reader, if any."""
        if self._reading is None or not self._reading.isValid():
            return None
        found = self.indexWidget(self.model().index(self._reading.row(), 0))
        return found if isinstance(found, Reader) else None

    def reading(self, index: Index) -> bool:
        return self._reading is not None and self._reading.isValid() and self._reading.row() == index.row()

    def close_reader(self) -> None:
        reading, self._reading = self._reading, None
        if reading is not None and reading.isValid():
            self.closePersistentEditor(self.model().index(reading.row(), 0))

    def adopt(self, reader: Reader) -> None:
        """Connects a reader the delegate just made."""
        reader.anchor.connect(self._reader_anchor)
        reader.copy_asked.connect(self.copy_current)
        reader.menu_asked.connect(self._reader_menu)
        reader.leave.connect(self._leave_reader)

    def _leave_reader(self) -> None:
        self.close_reader()
        self.setFocus(Qt.FocusReason.ShortcutFocusReason)

    def _current_changed(self, current: QModelIndex, _previous: QModelIndex) -> None:
        if self._reading is not None and not self.reading(current):
            self.close_reader()

    # --- actions -------------------------------------------------------------------------

    def activate_current(self) -> None:
        """Enter or Space on a row: a tool card or a long message expands (or collapses); a
        message opens for reading, the keyboard in it."""
        index = self.currentIndex()
        item = self.item(index)
        if isinstance(item, ToolItem) or (isinstance(item, NoteItem) and item.detail):
            self.model().transcript.toggle(index.row())
            return
        if isinstance(item, UserItem) and is_long(item.text):
            self.toggle_expanded(index)
        reader = self.open_reader(index)
        if reader is not None:
            reader.setFocus(Qt.FocusReason.ShortcutFocusReason)

    def toggle_expanded(self, index: Index) -> None:
        item = self.item(index)
        if item is None:
            return
        self.expanded.symmetric_difference_update({item.key})
        self.model().changed(index.row())
        if item.key not in self.expanded:
            self.scrollTo(self.model().index(index.row(), 0))  # (collapsed: keep it in sight)

    def selected_text(self) -> str:
        """The selection: the open reader's, else the transcript's ("" when there is none)."""
        reader = self.reader()
        return (reader.selected_text() if reader is not None else "") or self.selecting.text()

    def copy_current(self) -> None:
        """Ctrl+C: the selected text, else the current item's whole text."""
        item = self.item(self.currentIndex())
        text = self.selected_text() or (plain_text(item) if item is not None else "")
        if text:
            QGuiApplication.clipboard().setText(text)

    def exchange_markdown(self, index: Index) -> str:
        """The exchange the row at `index` is part of, as markdown (see `copying`)."""
        items = self.model().transcript.items
        rows = exchange_rows(items, index.row())
        return exchange_markdown(items[rows.start:rows.stop])

    def message_menu(self, index: Index) -> QMenu:
        """The context menu of the row at `index` (the caller shows it, then drops it)."""
        item = self.item(index)
        menu = QMenu(self)
        if item is None:
            return menu
        clipboard = QGuiApplication.clipboard()
        selected = self.selected_text()
        copy = menu.addAction("Copy selection\tCtrl+C" if selected else "Copy\tCtrl+C")
        copy.triggered.connect(lambda: clipboard.setText(selected or plain_text(item)))
        if isinstance(item, ToolItem) and item.child_session_id:
            child = item.child_session_id
            opener = menu.addAction("Open sub-agent session")
            opener.triggered.connect(lambda: emit(self.open_session_requested, child))
        if isinstance(item, UserItem | AssistantItem | NoteItem):
            source = menu.addAction("Copy as Markdown")
            source.triggered.connect(lambda: clipboard.setText(item.text))
        exchange = self.exchange_markdown(index)
        whole = menu.addAction("Copy exchange as Markdown")
        whole.setToolTip("The prompt, its answers and tool calls, as markdown")
        whole.triggered.connect(lambda: clipboard.setText(exchange))
        if isinstance(item, UserItem | AssistantItem | NoteItem):
            quote = menu.addAction("Quote in reply")
            quote.triggered.connect(lambda: emit(self.quote_requested, selected or item.text))
        self._answer_actions(menu, index, item)
        return menu

    def _answer_actions(self, menu: QMenu, index: Index, item: Item) -> None:
        """Edit a prompt into a branch; page a prompt's answers; answer the last one again."""
        row = index.row()
        transcript = self.model().transcript
        if is_prompt(item) and not item.key.startswith("prompt:"):
            menu.addSeparator()
            edit = menu.addAction("Edit and branch…\tCtrl+E")
            edit.setToolTip("Edit this message and send it in a new session branched here")
            edit.triggered.connect(lambda: emit(self.edit_requested, row))
        bar = transcript.bar_of(row)
        if bar is not None:
            menu.addSeparator()
            back = menu.addAction("Previous answer\tAlt+Left")
            back.setEnabled(bar.shown > 0)
            back.triggered.connect(lambda: emit(self.page_requested, row, -1))
            on = menu.addAction("Next answer\tAlt+Right")
            on.setEnabled(bar.shown < len(bar.turns) - 1)
            on.triggered.connect(lambda: emit(self.page_requested, row, 1))
        if not isinstance(item, UserItem) and self.in_last_exchange(row):
            again = menu.addAction("Regenerate answer\tCtrl+Shift+R")
            again.triggered.connect(lambda: emit(self.regenerate_requested))

    def in_last_exchange(self, row: int) -> bool:
        """Whether the row is part of the last prompt's exchange (its answer can be
        regenerated)."""
        items = self.model().transcript.items
        return not any(is_prompt(it) for it in items[row + 1:]) \
            and any(is_prompt(it) for it in items[:row])

    def _show_menu(self, index: Index, where: QPoint) -> None:
        menu = self.message_menu(index)
        if not menu.isEmpty():
            menu.exec(where)
        menu.deleteLater()

    def _reader_menu(self, where: QPoint) -> None:
        if self._reading is not None and self._reading.isValid():
            self._show_menu(self.model().index(self._reading.row(), 0), where)

    def _reader_anchor(self, url: QUrl) -> None:
        if self._reading is not None and self._reading.isValid():
            self.follow(self.model().index(self._reading.row(), 0), url.toString())

    def follow(self, index: Index, href: str) -> None:
        """A link clicked in a row (painted, or in its reader): the app's own (Copy, Show all,
        a sub-agent's Open), or the model's (web and mail links only)."""
        action = markdown.action_of(href)
        if action is None:
            url = QUrl(href)
            if url.scheme() in ("http", "https", "mailto"):
                emit(self.link_clicked, url)
            return
        item = self.item(index)
        what, n = action
        if what in ("prev", "next"):
            emit(self.page_requested, index.row(), -1 if what == "prev" else 1)
        elif what == "regenerate":
            emit(self.regenerate_requested)
        elif what == "undo_review" and isinstance(item, NoteItem) and not item.undone:
            emit(self.review_undo_requested, item.key)
        elif what == "branch" and isinstance(item, UserItem) and n < len(item.branches):
            emit(self.branch_requested, item.branches[n])
        elif what == "expand":
            self.toggle_expanded(index)
        elif what == "attachment" and isinstance(item, UserItem) and n < len(item.attachments):
            emit(self.attachment_requested, item.attachments[n])
        elif href == delegate_card.OPEN_CHILD and isinstance(item, ToolItem) and item.child_session_id:
            emit(self.open_session_requested, item.child_session_id)
        elif what == "copy" and item is not None:
            code = self.delegate.rendered(item, colored=False).code
            if n < len(code):
                QGuiApplication.clipboard().setText(code[n])
                self.copied = (item.key, n)
                self._uncopy.start()
                self.model().changed(index.row())

    def _copied_done(self) -> None:
        copied, self.copied = self.copied, None
        row = self.model().transcript.find(copied[0]) if copied is not None else None
        if row is not None:
            self.model().changed(row)

    # --- events --------------------------------------------------------------------------

    def mousePressEvent(self, e: QMouseEvent) -> None:
        if e.button() != Qt.MouseButton.LeftButton:
            with self._unscrolled():
                super().mousePressEvent(e)  # (the row becomes current; a selection stays)
            return
        self.close_reader()
        with self._unscrolled():
            super().mousePressEvent(e)
        pos = e.position().toPoint()
        index = self.indexAt(pos)
        self._pressed_link = self.delegate.anchor_at(index, pos) if index.isValid() else ""
        self.selecting.press(pos)

    def mouseDoubleClickEvent(self, e: QMouseEvent) -> None:
        with self._unscrolled():
            super().mouseDoubleClickEvent(e)
        if e.button() == Qt.MouseButton.LeftButton:
            self.selecting.word(e.position().toPoint())

    def mouseMoveEvent(self, e: QMouseEvent) -> None:
        pos = e.position().toPoint()
        if e.buttons() & Qt.MouseButton.LeftButton:
            self.selecting.drag(pos)
            return  # (not Qt's drag, which selects rows and scrolls to them)
        super().mouseMoveEvent(e)
        index = self.indexAt(pos)
        found = self.delegate.placed(index) if index.isValid() else None
        message = isinstance(self.item(index), UserItem | AssistantItem | NoteItem)
        if found is not None and self.delegate.anchor_at(index, pos):
            self.viewport().setCursor(Qt.CursorShape.PointingHandCursor)
        elif found is not None and message and found[1].contains(pos):
            self.viewport().setCursor(Qt.CursorShape.IBeamCursor)
        else:
            self.viewport().unsetCursor()

    def mouseReleaseEvent(self, e: QMouseEvent) -> None:
        if e.button() != Qt.MouseButton.LeftButton:
            super().mouseReleaseEvent(e)
            return
        pos = e.position().toPoint()
        index = self.indexAt(pos)
        link = self.delegate.anchor_at(index, pos) if index.isValid() else ""
        selected = self.selecting.release()
        follows = not selected and bool(link) and link == self._pressed_link
        if selected or follows:
            # A release that ends a selection or follows a link is not a click: the card under
            # it stays as it is (Qt's own release still runs, its signals held).
            self.blockSignals(True)
            try:
                super().mouseReleaseEvent(e)
            finally:
                self.blockSignals(False)
        else:
            super().mouseReleaseEvent(e)
        if follows:
            self.follow(index, link)

    def keyPressEvent(self, e: QKeyEvent) -> None:
        if e.matches(QKeySequence.StandardKey.Copy):
            self.copy_current()  # (Qt's own would copy the current row's text, selection or not)
            return
        row = self.currentIndex().row()
        if e.key() in (Qt.Key.Key_Left, Qt.Key.Key_Right) and not e.modifiers() \
                and isinstance(self.item(self.currentIndex()), AnswerBar):
            emit(self.page_requested, row, -1 if e.key() == Qt.Key.Key_Left else 1)
            return
        super().keyPressEvent(e)

    def contextMenuEvent(self, e: QContextMenuEvent) -> None:
        index = self.indexAt(e.pos())
        if index.isValid():
            with self._unscrolled():
                self.setCurrentIndex(index)
            self._show_menu(index, e.globalPos())

    def changeEvent(self, e: QEvent) -> None:
        if e.type() in (QEvent.Type.PaletteChange, QEvent.Type.FontChange, QEvent.Type.StyleChange):
            self.delegate.forget_look()  # (before Qt lays the rows out again)
        super().changeEvent(e)
        if e.type() in (QEvent.Type.PaletteChange, QEvent.Type.FontChange):
            self.close_reader()  # (its document has the old theme's colours)


def open_link(url: QUrl) -> None:
    """A link the model wrote, clicked: opened by the desktop (web and mail links only)."""
    if url.scheme() in ("http", "https", "mailto"):
        QDesktopServices.openUrl(url)


def denied_words(item: ToolItem) -> str:
    """Who refused the call, and when: "Not run: denied by you at 14:02." """
    when = local_time(item.decided_at, unknown="") if item.decided_at else ""
    at = f" at {when}" if when else ""
    if item.decided_by == "user":
        return f"Not run: denied by you{at}."
    if item.decided_by == "timeout":
        waited = f" {int(item.timeout_s // 60)} min" if item.timeout_s and item.timeout_s >= 60 else ""
        return f"Not run: nobody answered within{waited or ' the time allowed'}, so it was denied{at}."
    if item.decided_by == "stopped":
        return f"Not run: the turn stopped before it was answered{at}."
    if item.decided_by == "policy":
        return "Not run: Turnkey never runs this (a built-in rule)."
    if item.decided_by == "hook":
        return f"Not run: blocked by your hook {item.hook or '(unnamed)'}{at}."
    return "Not run: it was refused."


ALLOWED_AS = {"once": "once", "session": "for this session", "always": "always"}


def allowed_words(item: ToolItem) -> str:
    """Who let an asked-about call run: "Allowed by you (once) at 14:02." """
    if item.decided_by == "rule":
        return "Allowed by one of your “always allow” rules."
    when = local_time(item.decided_at, unknown="") if item.decided_at else ""
    how = ALLOWED_AS.get(item.decision or "", "")
    return f"Allowed by you{f' ({how})' if how else ''}{f' at {when}' if when else ''}."


def _status_words(item: ToolItem) -> tuple[str, str]:
    """A call's status in words, and how long it ran (" · 3.2 s"; "" when it never ran)."""
    label, _ = STATUS_TEXT.get(item.status, (item.status, "muted"))
    never_ran = item.status in ("denied", "skipped")  # (its duration is 0: it did not run)
    took = f" · {item.duration_ms / 1000:.1f} s" if item.duration_ms is not None and not never_ran else ""
    return label, took


def undone_mark(item: ToolItem) -> str:
    """" · undone" after the status of a call whose change `session.undo` put back."""
    if not item.undone:
        return ""
    return f' <span style="color:{tone("warning")}">· undone</span>'


def question_lines(item: ToolItem) -> list[str]:
    """A `clarify` call's card: the question (as plain text: the model wrote it) and, once
    it closed, the answer or that nobody gave one."""
    question = item.arguments.get("question") if item.name == "clarify" else None
    if not isinstance(question, str):
        return []
    lines = [f'<p>{esc(question)}</p>'.replace("\n", "<br>")]
    if item.outcome:
        lines.append(f'<p style="color:{tone("muted")}">{esc(item.outcome)}</p>')
    return lines


BLOCKED_WORDS = {
    "write": "The sandbox blocked a change outside the session folder: this command did not do "
             "all it was asked to.",
    "network": "The sandbox blocked the network: this command did not do all it was asked to.",
}


def tool_html(item: ToolItem, dark: bool) -> str:
    label, color_name = STATUS_TEXT.get(item.status, (item.status, "muted"))
    if item.sandbox_blocked:
        label, color_name = "blocked by the sandbox", "danger"
    color, muted = tone(color_name), tone("muted")
    took = _status_words(item)[1]
    if is_delegate(item):
        return delegate_card.card_html(item, label, took)
    arrow = "▾" if item.expanded else "▸"
    name, origin = shown_name(item.name or "tool")
    source = f'<small style="color:{muted}">{esc(origin)}</small> ' if origin else ""
    asked = question_lines(item)  # (a question is said whole below: not again in the head)
    summary = "" if asked else shown_summary(item.name, item.summary)[:160]
    head = (f'<p><span style="color:{muted}">{arrow}</span> <b>{esc(name)}</b> {source}'
            f'<code>{esc(summary)}</code> '
            f'<span style="color:{color}"><b>{esc(label)}</b>{took}</span>'
            f'{undone_mark(item)}</p>')
    parts = [head]
    if item.status == "unknown":
        parts.append(f'<p style="color:{tone("warning")}">Turnkey stopped while this ran; it may or may not '
                     'have finished. It was not run again.</p>')
    elif item.status == "denied":
        parts.append(f'<p style="color:{tone("danger")}">{esc(denied_words(item))}</p>')
    elif item.decided_by in ("user", "rule"):
        parts.append(f'<p style="color:{muted}">{esc(allowed_words(item))}</p>')
    parts += asked
    if item.sandbox_blocked:
        words = BLOCKED_WORDS.get(item.sandbox_blocked, BLOCKED_WORDS["write"])
        parts.append(f'<p style="color:{tone("danger")}">{esc(words)}</p>')
    if item.sandbox_note:
        note = item.sandbox_note[0].upper() + item.sandbox_note[1:]
        parts.append(f'<p style="color:{tone("warning")}">{esc(note)}.</p>')
    if item.status in ("running", "waiting_approval", "waiting_answer") and item.progress:
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


def esc(text: object) -> str:
    """Text for Qt's rich text: markup characters escaped."""
    return html.escape(str(text), quote=False)



def make_view(model: TranscriptModel) -> TranscriptView:
    return TranscriptView(model)
