"""Files for the message box: what a paste or a drop carries (an image on the clipboard, copied
or dragged files), and the row of chips over the editor, one per file waiting (a thumbnail or
a badge, its name, its upload's state, and × to remove it).  Which files are taken and their
states are `desktop/state/attachments.py`'s."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePath

from PySide6.QtCore import QBuffer, QIODevice, QMimeData, QSize, Qt, Signal
from PySide6.QtGui import QFocusEvent, QImage, QKeyEvent, QPixmap
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QScrollArea,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from desktop.qt import theme
from desktop.qt.compat import emit
from desktop.state.attachments import PendingFile, badge_text, chip_status, size_refusal

CHIP_THUMB = 56  # px: an image chip's thumbnail (its long edge)
CHIP_HEIGHT = 68
CHIP_NAME_WIDTH = 140  # px: a chip's name is elided beyond this


@dataclass(frozen=True)
class Given:
    """A file a paste or a drop brought: its name and bytes, or why it was not read, or
    (`path`) a local file still to be read (`read_file`, off the UI thread)."""

    name: str
    data: bytes = b""
    refused: str = ""
    path: str = ""


def carries_files(mime: QMimeData) -> bool:
    """Whether a paste or drop is files (or an image) rather than text: copied files' local
    URLs, or an image without text (an office program copies text as text and a picture of it:
    that pastes as text)."""
    if any(url.isLocalFile() for url in mime.urls()):
        return True
    return mime.hasImage() and not mime.hasText()


def given_files(mime: QMimeData) -> list[Given]:
    """The files `mime` carries (`carries_files`): local files to read (`path`), or an image
    as PNG."""
    paths = [url.toLocalFile() for url in mime.urls() if url.isLocalFile()]
    if paths:
        return [to_read(path) for path in paths]
    image = mime.imageData()
    if isinstance(image, QImage) and not image.isNull():
        return [Given(pasted_name(), png_bytes(image))]
    return [Given("image", refused="The pasted image could not be read.")]


def to_read(path: str) -> Given:
    return Given(PurePath(path).name or path, path=path)


def read_file(path: str) -> Given:
    """A local file's bytes; a folder, a missing file or one over the size bound is refused
    before it is read.  Blocks (up to 32 MiB from a disk that may be slow or remote): callers
    run it in a thread."""
    name = PurePath(path).name or path
    try:
        info = os.stat(path)
        if not os.path.isfile(path):
            return Given(name, refused=f"Not attached: {name} is a folder, not a file.")
        too_big = size_refusal(name, info.st_size)
        if too_big is not None:
            return Given(name, refused=too_big)
        with open(path, "rb") as f:
            return Given(name, f.read())
    except OSError as e:
        return Given(name, refused=f"Not attached: {name} could not be read ({e.strerror}).")


def pasted_name() -> str:
    """A pasted image's name (it has none): the time it was pasted, as screenshots are named."""
    return time.strftime("Pasted image %Y-%m-%d %H.%M.%S.png")


def png_bytes(image: QImage) -> bytes:
    buffer = QBuffer()
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    # (PySide6 takes the format as str, though its stubs say bytes: bytes raise ValueError)
    image.save(buffer, "PNG")  # type: ignore[call-overload]
    return bytes(buffer.data().data())


def scaled_pixmap(data: bytes, edge: int) -> QPixmap | None:
    """An image's bytes as a pixmap with its long edge at most `edge`; None if unreadable."""
    image = QImage.fromData(data)
    if image.isNull():
        return None
    if max(image.width(), image.height()) > edge:
        image = image.scaled(edge, edge, Qt.AspectRatioMode.KeepAspectRatio,
                             Qt.TransformationMode.SmoothTransformation)
    return QPixmap.fromImage(image)


class AttachmentChip(QFrame):
    """One waiting file; `remove` (its key) on ×, Backspace or Delete while it has the focus."""

    remove = Signal(int)

    def __init__(self, f: PendingFile) -> None:
        super().__init__()
        self.setObjectName("attachmentChip")
        self.key = f.key
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.setFixedHeight(CHIP_HEIGHT)
        row = QHBoxLayout(self)
        row.setContentsMargins(6, 6, 4, 6)
        row.setSpacing(8)
        self.picture = QLabel()
        self.picture.setAlignment(Qt.AlignmentFlag.AlignCenter)
        pixmap = scaled_pixmap(f.data, CHIP_THUMB) if f.is_image else None
        if pixmap is not None:
            self.picture.setPixmap(pixmap)
            self.picture.setFixedSize(QSize(CHIP_THUMB, CHIP_THUMB))
        else:
            self.picture.setObjectName("fileBadge")
            self.picture.setText(badge_text(f.name, f.mime_type))
            self.picture.setFixedSize(QSize(40, 48))
        row.addWidget(self.picture)
        words = QVBoxLayout()
        words.setSpacing(2)
        self.name_label = QLabel()
        self.name_label.setText(self.fontMetrics().elidedText(
            f.name, Qt.TextElideMode.ElideMiddle, CHIP_NAME_WIDTH))
        self.name_label.setToolTip(f.name)
        self.status_label = QLabel()
        self.status_label.setWordWrap(True)
        self.status_label.setMaximumWidth(CHIP_NAME_WIDTH + 40)
        words.addStretch(1)
        words.addWidget(self.name_label)
        words.addWidget(self.status_label)
        words.addStretch(1)
        row.addLayout(words)
        self.remove_button = QToolButton()
        self.remove_button.setObjectName("removeAttachment")
        self.remove_button.setText("×")
        self.remove_button.setFixedSize(18, 18)
        self.remove_button.setToolTip(f"Remove {f.name} (Delete)")
        self.remove_button.setAccessibleName(f"Remove {f.name}")
        self.remove_button.setFocusPolicy(Qt.FocusPolicy.NoFocus)  # (the chip takes Delete)
        self.remove_button.clicked.connect(lambda: emit(self.remove, self.key))
        row.addWidget(self.remove_button, 0, Qt.AlignmentFlag.AlignTop)
        self.show_state(f)

    def show_state(self, f: PendingFile) -> None:
        status = chip_status(f)
        self.status_label.setText(status)
        failed = f.state == "failed"
        self.status_label.setProperty("tone", "danger" if failed else "")
        self.status_label.setProperty("muted", not failed)
        theme.restyle(self.status_label)
        theme.restyle(self, tone="danger" if failed else "")
        what = {"image": "Image", "pdf": "PDF", "text": "Text file"}.get(f.kind or "", "File")
        self.setAccessibleName(f"{what} {f.name}: {status}")
        self.setAccessibleDescription("Delete or Backspace removes it from the message")

    def keyPressEvent(self, e: QKeyEvent) -> None:
        if e.key() in (Qt.Key.Key_Delete, Qt.Key.Key_Backspace):
            emit(self.remove, self.key)
            return
        super().keyPressEvent(e)

    def focusInEvent(self, e: QFocusEvent) -> None:
        super().focusInEvent(e)
        parent = self.parentWidget()
        scroller = parent.parentWidget() if parent is not None else None
        area = scroller.parentWidget() if scroller is not None else None
        if isinstance(area, QScrollArea):
            area.ensureWidgetVisible(self)


class ChipRow(QScrollArea):
    """The chips of the waiting files, in order, scrolling sideways when they do not fit;
    hidden when there are none."""

    remove = Signal(int)

    def __init__(self) -> None:
        super().__init__()
        self.setObjectName("attachmentRow")
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
        inner = QWidget()
        inner.setObjectName("attachmentRowInner")
        inner.setStyleSheet("QWidget#attachmentRowInner { background: transparent; }")
        self.setStyleSheet("QScrollArea#attachmentRow { background: transparent; }")
        self._row = QHBoxLayout(inner)
        self._row.setContentsMargins(0, 0, 0, 0)
        self._row.setSpacing(6)
        self._row.addStretch(1)
        self.setWidget(inner)
        self.chips: dict[int, AttachmentChip] = {}
        self.setFixedHeight(CHIP_HEIGHT + 14)  # (room for the sideways scroll bar)
        self.hide()

    def show_files(self, files: Sequence[PendingFile]) -> bool:
        """Chips for `files`: new ones added, gone ones removed, every state shown again.
        True when a removed chip had the focus and no chip is left to take it (the caller
        gives it to the message box); with chips left, the last takes it, so Delete can go on
        removing."""
        keys = [f.key for f in files]
        lost = False
        for key in [k for k in self.chips if k not in keys]:
            chip = self.chips.pop(key)
            lost = lost or chip.hasFocus()
            chip.hide()
            chip.deleteLater()
        for at, f in enumerate(files):
            found = self.chips.get(f.key)
            if found is None:
                found = self.chips[f.key] = AttachmentChip(f)
                found.remove.connect(lambda key: emit(self.remove, key))
                self._row.insertWidget(at, found)
            found.show_state(f)
        self.setVisible(bool(files))
        if lost and keys:
            self.chips[keys[-1]].setFocus(Qt.FocusReason.OtherFocusReason)
        return lost and not keys
