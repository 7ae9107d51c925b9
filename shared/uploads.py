"""A client's side of attachments: the type of a file from its bytes, its upload in chunks
(resumed where the backend stands), and reading a file or thumbnail back.

Every front-end (the desktop app, `turnkey chat --attach`) sends files through here, so
they all upload the same way: first ask where the upload stands (a file the backend holds
already costs one call), then send the rest in chunks of at most MAX_CHUNK_BYTES.
"""

from __future__ import annotations

import base64
import hashlib
import mimetypes
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any, Protocol

from shared import methods as m
from shared import protocol as p

Progress = Callable[[int, int], None]  # (bytes the backend holds, the file's size)


class Caller(Protocol):
    async def call(self, request: Any, *, timeout: float | None = 60.0) -> Any: ...


# Magic numbers of the types taken, checked before the name: a screenshot named `.txt` is
# still an image, and a file named `.png` that is not one is sent as what it is.
_MAGIC: tuple[tuple[bytes, int, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", 0, "image/png"),
    (b"\xff\xd8\xff", 0, "image/jpeg"),
    (b"GIF87a", 0, "image/gif"),
    (b"GIF89a", 0, "image/gif"),
    (b"%PDF-", 0, p.PDF_TYPE),
)


def sniff_mime(name: str, data: bytes) -> str | None:
    """The type to declare for a file: from its bytes for images and PDFs, else `text/...`
    from its name when the bytes are UTF-8 text without NUL; None for a type not taken."""
    for magic, at, mime in _MAGIC:
        if data[at:at + len(magic)] == magic:
            return mime
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    if b"\0" in data:
        return None
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    guessed, _ = mimetypes.guess_type(PurePath(name).name, strict=False)
    if guessed is not None and p.attachment_kind(guessed) == "text":
        return guessed
    return "text/plain"


def attachment_name(path_or_name: str) -> str:
    """A file's name as the backend takes it: its last part, without NUL, at most
    MAX_ATTACHMENT_NAME characters (the extension kept)."""
    name = PurePath(path_or_name.replace("\0", "")).name or "file"
    if len(name) <= p.MAX_ATTACHMENT_NAME:
        return name
    stem, dot, ext = name.rpartition(".")
    if dot and 0 < len(ext) < 16:
        return stem[:p.MAX_ATTACHMENT_NAME - len(ext) - 1] + "." + ext
    return name[:p.MAX_ATTACHMENT_NAME]


@dataclass(frozen=True)
class Attached:
    """A file read to send with a prompt: its name, declared type and bytes."""

    name: str
    mime_type: str
    data: bytes


def read_attachment(path: Path) -> Attached:
    """A file from disk, ready to upload; raises ValueError saying why it cannot go (not
    found, not a file, too large, a type not taken)."""
    try:
        size = path.stat().st_size
        if not path.is_file():
            raise ValueError(f"{path} is not a file")
        if size > p.MAX_ATTACHMENT_BYTES:
            raise ValueError(f"{path} has {size} bytes; a file may have at most "
                             f"{p.MAX_ATTACHMENT_BYTES // (1024 * 1024)} MiB")
        data = path.read_bytes()
    except OSError as exc:
        raise ValueError(f"{path}: {exc.strerror or exc}") from None
    if not data:
        raise ValueError(f"{path} is empty")
    mime = sniff_mime(path.name, data)
    if mime is None:
        raise ValueError(f"{path} is not a type that can be attached: images (PNG, JPEG, GIF, "
                         "WebP), PDF or UTF-8 text")
    return Attached(attachment_name(str(path)), mime, data)


async def upload(client: Caller, data: bytes, mime_type: str, *,
                 progress: Progress | None = None) -> p.StoredFile:
    """Sends `data` as a file of type `mime_type`; answers the file as the backend holds it.
    Raises the backend's RpcError (InvalidParams for a file refused, naming why)."""
    sha = hashlib.sha256(data).hexdigest()
    size = len(data)
    state: p.AttachmentUploadResult = await client.call(
        m.AttachmentUpload(sha256=sha, size=size, mime_type=mime_type))
    while not state.complete:
        at = state.received
        chunk = data[at:at + p.MAX_CHUNK_BYTES]
        state = await client.call(m.AttachmentUpload(
            sha256=sha, size=size, mime_type=mime_type, offset=at,
            data=base64.b64encode(chunk).decode("ascii")))
        if progress is not None:
            progress(state.received, size)
    assert state.file is not None, "a complete upload names its file"
    return state.file


async def download(client: Caller, session_id: str, sha256: str) -> bytes:
    """A file (or thumbnail) of a prompt of `session_id`, read back in chunks."""
    parts: list[bytes] = []
    offset = 0
    while True:
        got: p.AttachmentGetResult = await client.call(
            m.AttachmentGet(session_id=session_id, sha256=sha256, offset=offset))
        chunk = base64.b64decode(got.data)
        parts.append(chunk)
        offset += len(chunk)
        if got.eof or not chunk:
            return b"".join(parts)
