"""A message opened for reading: a read-only QTextBrowser over its transcript row, text selectable.

The transcript paints its rows (cheap, virtualized) and selects text in them with the mouse
itself (`drag_select.py`); the row opened with Enter gets one of these on top, showing the
same HTML at the same place, so the text can be selected with the keyboard (or the mouse,
within it) and its links reached with Tab.  What a click, Ctrl+C or the context menu means
is the transcript view's business: the reader only reports them.

Nothing the model wrote may load anything.  Rendering escapes its markup (no `<img>` is ever
written), and behind that `SafeDocument` and the reader answer every resource (files,
network, data URLs) with nothing: an empty text, or for an image a blank pixel — Qt's image
handler reads the file itself when a document has no image for it, so "no image" would not do.
"""

from __future__ import annotations

from typing import Any, ClassVar

from PySide6.QtCore import QPoint, Qt, QUrl, Signal
from PySide6.QtGui import (
    QContextMenuEvent,
    QImage,
    QKeyEvent,
    QKeySequence,
    QTextDocument,
    QTextOption,
    QWheelEvent,
)
from PySide6.QtWidgets import QApplication, QFrame, QTextBrowser, QWidget

from desktop.qt.compat import emit

READER_SHEET = ("QTextBrowser#messageReader, QTextBrowser#messageReader:focus { background: transparent; "
                "border: none; padding: 0px; margin: 0px; }")


def refuse(kind: int) -> Any:
    """What a document gets instead of a resource it asked for."""
    SafeDocument.refused += 1
    if kind == QTextDocument.ResourceType.ImageResource.value:
        if not _blank:
            pixel = QImage(1, 1, QImage.Format.Format_ARGB32)
            pixel.fill(Qt.GlobalColor.transparent)
            _blank.append(pixel)
        return _blank[0]
    return ""


_blank: list[QImage] = []


class SafeDocument(QTextDocument):
    """A QTextDocument that loads no resource: an `<img>` or a background url shows nothing."""

    refused: ClassVar[int] = 0  # how many loads were refused (tests look)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setDocumentMargin(0)
        option = self.defaultTextOption()
        option.setWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)  # long URLs, hashes
        self.setDefaultTextOption(option)

    def loadResource(self, type: int, name: QUrl | str) -> Any:
        return refuse(type)


class Reader(QTextBrowser):
    """The selectable copy of one row; `stamp` says which rendering of it the document holds."""

    anchor = Signal(QUrl)  # a link was clicked (never followed here)
    copy_asked = Signal()  # Ctrl+C
    menu_asked = Signal(QPoint)  # a context menu, at this global position
    leave = Signal()  # Esc: back to the list (while a turn runs, Esc is the window's Stop)

    def __init__(self, parent: QWidget) -> None:
        super().__init__(parent)
        self.setObjectName("messageReader")
        self.setStyleSheet(READER_SHEET)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setReadOnly(True)
        self.setOpenLinks(False)
        self.setOpenExternalLinks(False)
        self.setUndoRedoEnabled(False)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setViewportMargins(0, 0, 0, 0)
        self.viewport().setAutoFillBackground(False)
        flag = Qt.TextInteractionFlag
        self.setTextInteractionFlags(flag.TextSelectableByMouse | flag.TextSelectableByKeyboard
                                     | flag.LinksAccessibleByMouse | flag.LinksAccessibleByKeyboard)
        self.setAccessibleName("Message text")
        self.setAccessibleDescription("Select text to copy it; Esc goes back to the conversation")
        self.anchorClicked.connect(lambda url: emit(self.anchor, url))
        self.stamp: tuple[object, ...] | None = None

    def show_document(self, stamp: tuple[object, ...], doc: SafeDocument) -> None:
        """Shows `doc` (which this reader then owns) unless it already shows that rendering."""
        if stamp == self.stamp:
            doc.deleteLater()
            return
        previous = self.findChildren(SafeDocument)  # the one shown until now (owned here)
        doc.setParent(self)
        self.setDocument(doc)
        self.stamp = stamp
        for old in previous:
            old.deleteLater()

    def selected_text(self) -> str:
        """The selection as plain text ("" when nothing is selected)."""
        cursor = self.textCursor()
        return cursor.selection().toPlainText() if cursor.hasSelection() else ""

    def loadResource(self, type: int, name: QUrl | str) -> Any:
        return refuse(type)

    def keyPressEvent(self, e: QKeyEvent) -> None:
        if e.matches(QKeySequence.StandardKey.Copy):
            emit(self.copy_asked)
            return
        if e.key() == Qt.Key.Key_Escape:
            emit(self.leave)
            return
        super().keyPressEvent(e)

    def wheelEvent(self, e: QWheelEvent) -> None:
        # The reader's text always fits it: the wheel scrolls the transcript under it.
        parent = self.parentWidget()
        if parent is not None:
            QApplication.sendEvent(parent, e)

    def contextMenuEvent(self, e: QContextMenuEvent) -> None:
        emit(self.menu_asked, e.globalPos())

