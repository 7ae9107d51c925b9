"""How a conversation view follows its latest text, and where typing goes.

Scrolling rules:
- while the reader is at the bottom, the view stays there as text streams in, cards appear
  or the window's lower panels (approvals, queue, notices) grow and shrink;
- having scrolled up, the reader is left alone: new items at the end are counted on a
  "jump to latest" button over the view's lower right corner, which scrolls down and hides;
- `jump()` always goes to the bottom (sending a prompt does).

"At the bottom" is decided when the reader scrolls (the scroll bar's value changes), not
when the content grows: content arriving never changes the decision, so a burst of
deltas cannot leave the view stranded a few pixels above the end.

Typing rule: keys that type text (and Enter) pressed while the transcript has focus go to
the composer, so clicking a card and typing never loses the words.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from PySide6.QtCore import QEvent, QModelIndex, QObject, Qt, QTimer
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QAbstractItemView, QApplication, QPlainTextEdit, QToolButton

NEAR_BOTTOM_PX = 40  # this close to the end counts as "at the bottom"
TYPING_MODIFIERS = Qt.KeyboardModifier.NoModifier | Qt.KeyboardModifier.ShiftModifier \
    | Qt.KeyboardModifier.KeypadModifier


class Follower(QObject):
    def __init__(self, view: QAbstractItemView, composer: QPlainTextEdit) -> None:
        super().__init__(view)
        self.view = view
        self.composer = composer
        self.stuck = True  # the reader is at the bottom: follow
        self.unseen = 0  # items added at the end while the reader was scrolled up
        self._jumping = False
        self._replacing = False
        bar = view.verticalScrollBar()
        bar.valueChanged.connect(self._scrolled)
        bar.rangeChanged.connect(self._range_changed)
        model = view.model()
        model.rowsInserted.connect(self._rows_inserted)
        model.modelReset.connect(self.jump)
        self.button = QToolButton(view)
        self.button.setObjectName("jumpToLatest")
        self.button.setAccessibleName("Jump to latest")
        self.button.setAccessibleDescription("Scroll the conversation to its newest message")
        self.button.setToolTip("Jump to the latest message (End)")
        self.button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.button.clicked.connect(self.jump)
        self.button.hide()
        view.installEventFilter(self)
        view.viewport().installEventFilter(self)

    # --- scrolling -----------------------------------------------------------------------

    def jump(self) -> None:
        """To the bottom, and follow from there."""
        self.stuck = True
        self.unseen = 0
        self._show_button()
        self._to_bottom()
        # The view lays out new rows lazily; once more after it has.
        QTimer.singleShot(0, self, self._to_bottom)

    @contextmanager
    def replacing(self) -> Iterator[None]:
        """Rows swapped for their stored versions (a finished turn, a reload) are not news:
        inserted at the end, they are not counted on the button."""
        self._replacing = True
        try:
            yield
        finally:
            self._replacing = False
        if self.stuck:
            QTimer.singleShot(0, self, self._to_bottom)

    def _to_bottom(self) -> None:
        if not self.stuck:
            return
        bar = self.view.verticalScrollBar()
        self._jumping = True
        try:
            bar.setValue(bar.maximum())
        finally:
            self._jumping = False

    def _scrolled(self, value: int) -> None:
        if self._jumping:
            return
        bar = self.view.verticalScrollBar()
        self.stuck = value >= bar.maximum() - NEAR_BOTTOM_PX
        if self.stuck:
            self.unseen = 0
        self._show_button()

    def _range_changed(self, _low: int, _high: int) -> None:
        if self.stuck:
            self._to_bottom()

    def _rows_inserted(self, parent: QModelIndex, first: int, last: int) -> None:
        if parent.isValid() or last != self.view.model().rowCount() - 1:
            return  # an older page above: not news
        if self.stuck:
            QTimer.singleShot(0, self, self._to_bottom)
        elif not self._replacing:
            self.unseen += last - first + 1
            self._show_button()

    def _show_button(self) -> None:
        if self.stuck:
            self.button.hide()
            return
        self.button.setText(f"↓ {self.unseen} new" if self.unseen else "↓ Latest")
        self.button.adjustSize()
        self._place_button()
        self.button.show()
        self.button.raise_()

    def _place_button(self) -> None:
        area = self.view.viewport().geometry()
        size = self.button.sizeHint()
        self.button.resize(size)
        self.button.move(area.right() - size.width() - 12, area.bottom() - size.height() - 12)

    # --- events --------------------------------------------------------------------------

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.Resize:
            if self.stuck:
                QTimer.singleShot(0, self, self._to_bottom)
            if self.button.isVisible():
                self._place_button()
        elif event.type() == QEvent.Type.KeyPress and watched is self.view \
                and isinstance(event, QKeyEvent) and self._types(event):
            self.composer.setFocus(Qt.FocusReason.OtherFocusReason)
            forwarded = QKeyEvent(event.type(), event.key(), event.modifiers(), event.text(),
                                  event.isAutoRepeat(), event.count())
            QApplication.sendEvent(self.composer, forwarded)
            return True
        elif event.type() == QEvent.Type.KeyPress and watched is self.view \
                and isinstance(event, QKeyEvent) and event.key() == Qt.Key.Key_End:
            self.jump()
            return True
        return False

    def _types(self, event: QKeyEvent) -> bool:
        """Keys that type into the composer: text (not shortcuts) and Enter."""
        if not self.composer.isEnabled():
            return False
        if event.modifiers() & ~TYPING_MODIFIERS:
            return False  # Ctrl+C copies the card, Alt opens menus
        if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            return True
        text = event.text()
        return bool(text) and text.isprintable()
