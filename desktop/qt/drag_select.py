"""Text selected with the mouse across the transcript's painted rows.

The rows are pictures (the delegate paints each from its document), so the view selects in them
itself: a press puts the selection's anchor at the character under the pointer, a drag moves its
focus (`copying.Selection`), across as many rows as it spans; past the view's top or bottom edge
the view scrolls on and the selection follows.  The delegate paints each row's part
(`pieces`), Ctrl+C takes `text()`.  Offsets are positions in the rows' documents, so a row that
streams on or is laid out again keeps what was selected; rows added or removed above move it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QModelIndex, QObject, QPoint, QTimer
from PySide6.QtGui import QClipboard, QGuiApplication, QTextBlock, QTextCursor

from desktop.qt.reader import SafeDocument
from desktop.state.copying import Selection, Spot, joined
from desktop.state.transcript import AssistantItem, NoteItem, UserItem

if TYPE_CHECKING:
    from desktop.qt.transcript_view import TranscriptView

EDGE_MS = 40  # while a drag is past the view's top or bottom, it scrolls this often
EDGE_STEP = 60  # px at most each time (less when the pointer is just past the edge)


def _cell_of(block: QTextBlock) -> tuple[int, int] | None:
    """The table cell a block is in (the innermost: a quote is a table too) as the positions
    where its text starts and ends, or None."""
    cursor = QTextCursor(block)
    table = cursor.currentTable()
    if table is None:
        return None
    cell = table.cellAt(cursor)
    return cell.firstCursorPosition().position(), cell.lastCursorPosition().position()


class DragSelect(QObject):
    """The view's mouse selection: the view hands it its left button's press, moves and release."""

    def __init__(self, view: TranscriptView) -> None:
        super().__init__(view)
        self.view = view
        self.selection: Selection | None = None
        self._dragging = False  # a press selects, until its release
        self._pressed_at = QPoint()
        self._pointer = QPoint()  # where the drag is
        self._edge = QTimer(self, interval=EDGE_MS)
        self._edge.timeout.connect(self._edge_scroll)
        model = view.model()
        model.rowsInserted.connect(self._rows_inserted)
        model.rowsAboutToBeRemoved.connect(self._rows_removed)
        model.modelReset.connect(self.clear)

    def select(self, selection: Selection | None) -> None:
        if selection != self.selection:
            self.selection = selection
            self.view.viewport().update()

    def clear(self) -> None:
        self.select(None)

    def pieces(self, row: int, doc: SafeDocument) -> list[QTextCursor]:
        """The selected text of the row painted from `doc`, as cursors over it (none when
        nothing of it is selected): one per stretch of text outside tables or inside one table
        cell, because Qt widens a selection that crosses a table's edge to the whole table (a
        drag from inside a code block on into the next paragraph would take all of the code)."""
        part = self.selection.part(row, doc.characterCount() - 1) if self.selection else None
        if part is None:
            return []
        start, end = part
        stretches: list[tuple[int, int]] = []
        block = doc.findBlock(start)
        where = _cell_of(block)
        last = block
        while block.isValid() and block.position() < end:
            here = _cell_of(block)
            if here != where:
                stretches.append((start, last.position() + last.length() - 1))
                start, where = block.position(), here
            if here is not None:  # (on to the cell's last block: a code block's lines are one cell)
                block = doc.findBlock(here[1])
            last, block = block, block.next()
        stretches.append((start, end))
        cursors = []
        for lo, hi in stretches:  # (an empty one too: the blank line after a table, in a copy)
            cursor = QTextCursor(doc)
            cursor.setPosition(lo)
            cursor.setPosition(hi, QTextCursor.MoveMode.KeepAnchor)
            cursors.append(cursor)
        return cursors

    def text(self) -> str:
        """The selected text: each row's part as shown, in order, a blank line between two
        items ("" when nothing is selected)."""
        chosen = self.selection
        if chosen is None or chosen.empty:
            return ""
        parts = []
        for row in chosen.rows:
            index = self.view.model().index(row, 0)
            item, doc = self.view.item(index), self._doc(index)
            if item is None or doc is None or item.hidden:
                continue  # (a hidden row, an answer not shown, is not on screen)
            if isinstance(item, UserItem) and chosen.whole(row, doc.characterCount() - 1):
                parts.append(item.text)  # as typed, all of it (a long one shows its start only)
                continue
            parts.append("\n".join(c.selection().toPlainText() for c in self.pieces(row, doc)))
        return joined(parts)

    def _doc(self, index: QModelIndex) -> SafeDocument | None:
        """The row's document, laid out (its offsets are the selection's)."""
        found = self.view.delegate.placed(index)
        return found[0] if found is not None else None

    def spot_at(self, pos: QPoint) -> Spot | None:
        """The place in the text nearest `pos` (viewport coordinates): in the row under it, or,
        past the view's top or bottom edge, in the row at that edge; below the last row, the end
        of it.  None when there are no rows."""
        view = self.view
        rows = view.model().rowCount()
        if rows == 0:
            return None
        area = view.viewport().rect()
        inside = QPoint(min(max(pos.x(), 0), area.right() - 4), min(max(pos.y(), 0), area.bottom()))
        index = view.indexAt(inside)
        if not index.isValid():  # (the space below the last row)
            doc = self._doc(view.model().index(rows - 1, 0))
            return Spot(rows - 1, doc.characterCount() - 1 if doc is not None else 0)
        return Spot(index.row(), view.delegate.offset_at(index, inside))

    # --- the mouse -----------------------------------------------------------------------

    def press(self, pos: QPoint) -> None:
        """The left button went down at `pos`: the selection starts there, empty."""
        spot = self.spot_at(pos)
        self.select(Selection(spot, spot) if spot is not None else None)
        self._dragging = spot is not None
        self._pressed_at = self._pointer = pos

    def drag(self, pos: QPoint) -> None:
        """The pointer moved to `pos` with the button down: the selection follows it, once it is
        a few pixels from the press (a hand that shakes while it clicks a card selects nothing)."""
        if not self._dragging:
            return
        far = (pos - self._pressed_at).manhattanLength() \
            >= QGuiApplication.styleHints().startDragDistance()
        if far or not (self.selection is None or self.selection.empty):
            self._drag_to(pos)

    def release(self) -> bool:
        """The button went up: True when text is selected (by the drag, or a double click), which
        is then also the primary selection where there is one (X11: a middle click pastes it)."""
        dragging, self._dragging = self._dragging, False
        self._edge.stop()
        if self.selection is None or self.selection.empty:
            if dragging:
                self.clear()
            return False
        if dragging:
            self._to_primary()
        return True

    def word(self, pos: QPoint) -> None:
        """A double click at `pos`: the word under it, in a message, is selected."""
        view = self.view
        index = view.indexAt(pos)
        doc, spot = self._doc(index), self.spot_at(pos)
        message = isinstance(view.item(index), UserItem | AssistantItem | NoteItem)
        if doc is None or spot is None or not message:
            return
        cursor = QTextCursor(doc)
        cursor.setPosition(min(spot.offset, doc.characterCount() - 1))
        cursor.select(QTextCursor.SelectionType.WordUnderCursor)
        if cursor.hasSelection():
            self._dragging = False
            start, end = cursor.selectionStart(), cursor.selectionEnd()
            self.select(Selection(Spot(spot.row, start), Spot(spot.row, end)))
            self._to_primary()

    def _drag_to(self, pos: QPoint) -> None:
        self._pointer = pos
        spot = self.spot_at(pos)
        if self.selection is not None and spot is not None:
            self.select(Selection(self.selection.anchor, spot))
        area = self.view.viewport().rect()
        if pos.y() < area.top() or pos.y() > area.bottom():
            if not self._edge.isActive():
                self._edge.start()
        else:
            self._edge.stop()

    def _edge_scroll(self) -> None:
        area = self.view.viewport().rect()
        y = self._pointer.y()
        past = y - area.bottom() if y > area.bottom() else min(0, y - area.top())
        if not self._dragging or not past:
            self._edge.stop()
            return
        bar = self.view.verticalScrollBar()
        bar.setValue(bar.value() + max(-EDGE_STEP, min(EDGE_STEP, past)))
        self._drag_to(self._pointer)

    def _to_primary(self) -> None:
        clipboard = QGuiApplication.clipboard()
        text = self.text()
        if clipboard.supportsSelection() and text:
            clipboard.setText(text, QClipboard.Mode.Selection)

    # --- rows come and go ----------------------------------------------------------------

    def _rows_inserted(self, parent: QModelIndex, first: int, last: int) -> None:
        if self.selection is not None and not parent.isValid():
            self.select(self.selection.inserted(first, last - first + 1))

    def _rows_removed(self, parent: QModelIndex, first: int, last: int) -> None:
        if self.selection is not None and not parent.isValid():
            self.select(self.selection.removed(first, last - first + 1))
