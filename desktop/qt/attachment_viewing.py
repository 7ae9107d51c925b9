"""A prompt's files in the transcript: their thumbnails (fetched once by `attachment.get` and
kept), the HTML of their row under the prompt's words, the dialog showing an image full size,
and a file saved (privately, under the app's cache) for the system's viewer."""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import platformdirs
from PySide6.QtCore import QMimeDatabase, QObject, Qt, QUrl, Signal
from PySide6.QtGui import QDesktopServices, QImage, QPixmap, QResizeEvent, QTextDocument
from PySide6.QtWidgets import QDialog, QLabel, QVBoxLayout, QWidget

from desktop.qt.aio import spawn
from desktop.qt.compat import emit
from desktop.state.attachments import badge_text, caption, fitted
from desktop.state.changes import default_open_refusal
from shared import protocol as p
from shared.uploads import download

if TYPE_CHECKING:
    from desktop.link import Link

THUMB_EDGE = 240  # px: the long edge of an image in the transcript
THUMB_SCHEME = "turnkey-thumb"  # a document's own image resources: never a file or the network


def thumb_url(sha256: str) -> QUrl:
    return QUrl(f"{THUMB_SCHEME}:{sha256}")


class Thumbnails(QObject):
    """The thumbnails of a session's prompts, each asked of the backend once; `loaded` (its
    sha256) when one arrives, so the prompts showing it are drawn again."""

    loaded = Signal(str)

    def __init__(self, link: Link, session_id: str, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.link = link
        self.session_id = session_id
        self.images: dict[str, QImage] = {}
        self._asked: set[str] = set()

    def image(self, sha256: str) -> QImage | None:
        """The thumbnail if held; else None, and it is asked for (once)."""
        found = self.images.get(sha256)
        if found is None and sha256 not in self._asked:
            self._asked.add(sha256)
            spawn(self._fetch(sha256), lambda _words: self._asked.discard(sha256))
        return found

    async def _fetch(self, sha256: str) -> None:
        data = await download(self.link, self.session_id, sha256)
        image = QImage.fromData(data)
        if not image.isNull():
            self.images[sha256] = image
            emit(self.loaded, sha256)


def attachments_html(files: Sequence[p.MessageAttachment], action: str, accent: str,
                     muted: str) -> str:
    """The row of a prompt's files: images as thumbnails (the document's resources, by
    `thumb_url`), other files as a line with their extension, name and size; each a
    link `{action}/N` (N its index) that opens it."""
    images: list[str] = []
    others: list[str] = []
    for n, a in enumerate(files):
        href = f"{action}/{n}"
        name = _esc(a.name)
        if a.kind == "image" and a.thumbnail:
            w, h = fitted(a.width, a.height, THUMB_EDGE)
            images.append(f'<a href="{href}"><img src="{thumb_url(a.thumbnail).toString()}" '
                          f'width="{w}" height="{h}" alt="{name}"></a>')
        else:
            badge = _esc(badge_text(a.name, a.mime_type))
            others.append(f'<a href="{href}" style="color:{accent}; text-decoration:none">'
                          f'<span style="font-size:small">{badge}</span>&nbsp;&nbsp;'
                          f'<b>{name}</b></a>'
                          f'<span style="color:{muted}">&nbsp;&nbsp;{_esc(caption(a))}</span>')
    # (No line-height on the images' paragraph: a percentage would grow with the picture.)
    html = ""
    if images:
        html += f'<p style="margin-top:0px; margin-bottom:6px">{"&nbsp;&nbsp;".join(images)}</p>'
    if others:
        html += (f'<p style="margin-top:0px; margin-bottom:6px; line-height:130%">'
                 f'{"<br>".join(others)}</p>')
    return html


def add_thumbnails(doc: QTextDocument, files: Sequence[p.MessageAttachment],
                   thumbnails: Thumbnails | None) -> None:
    """Gives `doc` the thumbnails it shows that are held (the rest are asked for, and the
    prompt drawn again when they come; until then the image's place is kept blank)."""
    if thumbnails is None:
        return
    for a in files:
        if a.kind == "image" and a.thumbnail:
            image = thumbnails.image(a.thumbnail)
            if image is not None:
                doc.addResource(QTextDocument.ResourceType.ImageResource.value,
                                thumb_url(a.thumbnail), image)


class ImageDialog(QDialog):
    """An attached image full size, scaled down to fit the window (never up)."""

    def __init__(self, parent: QWidget, name: str) -> None:
        super().__init__(parent)
        self.setWindowTitle(name)
        self.setObjectName("imageDialog")
        self.picture = QLabel("Loading…")
        self.picture.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.picture.setMinimumSize(200, 150)
        self.picture.setAccessibleName(name)
        box = QVBoxLayout(self)
        box.setContentsMargins(8, 8, 8, 8)
        box.addWidget(self.picture)
        self.image = QImage()
        self.resize(900, 700)

    def show_image(self, data: bytes) -> None:
        self.image = QImage.fromData(data)
        if self.image.isNull():
            self.picture.setText("This image could not be shown.")
            return
        self._fit()

    def failed(self, words: str) -> None:
        self.picture.setText(f"Could not load the image: {words}")

    def _fit(self) -> None:
        if self.image.isNull():
            return
        room = self.picture.size()
        shown = self.image
        if shown.width() > room.width() or shown.height() > room.height():
            shown = shown.scaled(room, Qt.AspectRatioMode.KeepAspectRatio,
                                 Qt.TransformationMode.SmoothTransformation)
        self.picture.setPixmap(QPixmap.fromImage(shown))

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._fit()


def open_dir() -> Path:
    """Where files opened from the transcript are saved: the app's cache, private."""
    return Path(platformdirs.user_cache_dir("turnkey", appauthor=False)) / "attachments"


def safe_name(name: str) -> str:
    """A file name safe to create: no folders, no leading dot, no control characters."""
    cleaned = re.sub(r"[\x00-\x1f/\\]", "_", name).lstrip(".").strip()
    return cleaned[:200] or "file"


def save_private(data: bytes, sha256: str, name: str, root: Path | None = None) -> Path:
    """Writes `data` as `root/<sha256 prefix>/<name>`, the folder 0700 and the file 0600 (it
    may be private), never marked executable; answers its path."""
    folder = (root or open_dir()) / sha256[:16]
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(folder, 0o700)
    path = folder / safe_name(name)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.chmod(path, 0o600)
    return path


def opener_refusal(path: Path, label: str) -> str | None:
    """Why the system's opener must not get the saved file (the changes panel's rule: text,
    images and documents people read, never a launcher or a program)."""
    mime = QMimeDatabase().mimeTypeForFile(str(path))
    if mime.name() == p.PDF_TYPE:
        return None  # (a PDF is read, not run: the one type beyond text and images taken)
    return default_open_refusal(label, mime.name(), mime.allAncestors(), executable=False)


class FileOpener(QObject):
    """Opens a prompt's file: an image in `ImageDialog`, anything else saved privately and
    handed to the system's viewer.  `said`: words for the person (a refusal, a failure)."""

    said = Signal(str)

    def __init__(self, link: Link, session_id: str, parent: QWidget) -> None:
        super().__init__(parent)
        self.link = link
        self.session_id = session_id
        self.window = parent
        self.dialog: ImageDialog | None = None
        self.opened: list[Path] = []  # (tests look)

    def open(self, a: p.MessageAttachment) -> None:
        if a.kind == "image":
            dialog = self.dialog = ImageDialog(self.window, a.name)
            dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
            dialog.show()

            async def load() -> None:
                dialog.show_image(await download(self.link, self.session_id, a.sha256))

            spawn(load(), dialog.failed)
            return
        spawn(self._save_and_open(a), lambda words: emit(self.said, f"Could not open {a.name}: {words}"))

    async def _save_and_open(self, a: p.MessageAttachment) -> None:
        data = await download(self.link, self.session_id, a.sha256)
        path = await asyncio.to_thread(save_private, data, a.sha256, a.name)
        refusal = opener_refusal(path, a.name)
        if refusal is not None:
            emit(self.said, f"{refusal} It is saved at {path}.")
            return
        self.opened.append(path)
        if not QDesktopServices.openUrl(QUrl.fromLocalFile(str(path))):
            emit(self.said, f"No application opens {a.name}; it is saved at {path}.")


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
