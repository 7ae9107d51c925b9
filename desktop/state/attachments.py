"""The files waiting in the message box, without Qt: which are taken (type, size, count), where
each upload stands, when Send may go and what it names; and the words people read about
attachments (sizes, captions, the notice for a model that cannot see images).

`desktop/qt/conversation_attaching.py` feeds it and `desktop/qt/attachments.py` shows it.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Literal

from shared import protocol as p
from shared.uploads import attachment_name, sniff_mime

UploadState = Literal["uploading", "ready", "failed"]
Intent = Literal["queue", "steer"]

TAKEN = "images (PNG, JPEG, GIF, WebP), PDFs and text files"
NO_VISION_MARK = " (can't see images)"
NO_VISION_NOTICE = "This model cannot see images; it will get a note instead"

_keys = itertools.count(1)


@dataclass(eq=False)
class PendingFile:
    """One file in the message box: its bytes until the prompt is sent (the chip's thumbnail
    is made from them), and its upload's state."""

    name: str
    mime_type: str
    data: bytes = field(repr=False)
    key: int = field(default_factory=lambda: next(_keys))
    state: UploadState = "uploading"
    received: int = 0  # bytes the backend holds
    error: str = ""  # why the backend refused it (state "failed")
    stored: p.StoredFile | None = None  # once complete

    @property
    def size(self) -> int:
        return len(self.data)

    @property
    def kind(self) -> p.AttachmentKind | None:
        return p.attachment_kind(self.mime_type)

    @property
    def is_image(self) -> bool:
        return self.kind == "image"


def human_size(n: int) -> str:
    """A size as people read it: 512 bytes, 14 KB, 3.2 MB."""
    if n < 1024:
        return f"{n} bytes" if n != 1 else "1 byte"
    if n < 1024 * 1024:
        return f"{n / 1024:.0f} KB"
    return f"{n / (1024 * 1024):.1f} MB"


def size_refusal(name: str, size: int) -> str | None:
    """Why a file of `size` bytes cannot go (over the bound of one file), or None; asked
    before a file is read, so a huge one is never read."""
    if size <= p.MAX_ATTACHMENT_BYTES:
        return None
    return (f"Not attached: {attachment_name(name)} is {human_size(size)}; a file can be at "
            f"most {human_size(p.MAX_ATTACHMENT_BYTES)}.")


class Pending:
    """The files of the message box, in the order they were added.  `add` refuses what cannot
    go at once (with words for the person), before any byte is sent."""

    def __init__(self) -> None:
        self.files: list[PendingFile] = []
        self.waiting: Intent | None = None  # Send was pressed during uploads: it goes after

    def refusal(self, name: str, data: bytes) -> str | None:
        """Why `data` (named `name`) cannot be attached now, or None when it can."""
        shown = attachment_name(name)
        if len(self.files) >= p.MAX_ATTACHMENTS:
            return f"Not attached: {shown}. A message takes at most {p.MAX_ATTACHMENTS} files."
        if not data:
            return f"Not attached: {shown} is empty."
        too_big = size_refusal(shown, len(data))
        if too_big is not None:
            return too_big
        total = sum(f.size for f in self.files) + len(data)
        if total > p.MAX_PROMPT_ATTACHMENT_BYTES:
            return (f"Not attached: {shown}. The files of one message can be at most "
                    f"{human_size(p.MAX_PROMPT_ATTACHMENT_BYTES)} together.")
        if sniff_mime(shown, data) is None:
            return f"Not attached: {shown} is not a type Turnkey sends ({TAKEN})."
        return None

    def add(self, name: str, data: bytes) -> PendingFile | str:
        """The file now pending (its upload to start), or the words saying why it is not."""
        why = self.refusal(name, data)
        if why is not None:
            return why
        shown = attachment_name(name)
        mime = sniff_mime(shown, data)
        assert mime is not None  # (refusal checked it)
        added = PendingFile(shown, mime, data)
        self.files.append(added)
        return added

    def find(self, key: int) -> PendingFile | None:
        return next((f for f in self.files if f.key == key), None)

    def remove(self, key: int) -> None:
        self.files = [f for f in self.files if f.key != key]

    def progress(self, key: int, received: int) -> None:
        found = self.find(key)
        if found is not None:
            found.received = received

    def done(self, key: int, stored: p.StoredFile) -> None:
        found = self.find(key)
        if found is not None:
            found.state, found.stored, found.received = "ready", stored, stored.bytes

    def failed(self, key: int, message: str) -> None:
        found = self.find(key)
        if found is not None:
            found.state, found.error = "failed", message
            self.waiting = None  # the person decides: remove it, then send

    @property
    def uploading(self) -> bool:
        return any(f.state == "uploading" for f in self.files)

    @property
    def has_image(self) -> bool:
        return any(f.is_image for f in self.files)

    def blocked(self, text: str) -> str | None:
        """Why Send cannot go now ("" when there is simply nothing to send), or None."""
        if any(f.state == "failed" for f in self.files):
            return "A file was refused: remove it (×) to send the rest."
        if not text.strip() and not self.files:
            return ""
        return None

    def take(self) -> list[PendingFile]:
        """The files to send with the prompt (all uploaded: the caller waits for `uploading`
        to end), removed from the message box."""
        taken, self.files, self.waiting = self.files, [], None
        return taken

    def put_back(self, files: Sequence[PendingFile]) -> None:
        """Files of a prompt that was not sent, back in the message box (first, as they were)."""
        self.files = [*files, *(f for f in self.files if f not in files)]


def named(files: Sequence[PendingFile]) -> list[p.Attachment]:
    """What `prompt.submit` names: each uploaded file by its sha256 and name."""
    return [p.Attachment(sha256=f.stored.sha256, name=f.name) for f in files if f.stored]


def shown(files: Sequence[PendingFile]) -> list[p.MessageAttachment]:
    """The files as the transcript shows a prompt's until its stored row comes."""
    return [p.MessageAttachment(sha256=s.sha256, name=f.name, mime_type=s.mime_type,
                                bytes=s.bytes, kind=s.kind, width=s.width, height=s.height,
                                pages=s.pages, thumbnail=s.thumbnail)
            for f in files if (s := f.stored) is not None]


def chip_status(f: PendingFile) -> str:
    """The line under a chip's name: its size, its upload's progress, or why it was refused."""
    if f.state == "failed":
        return f.error or "Refused"
    if f.state == "uploading":
        percent = 100 * f.received // f.size if f.size else 0
        return f"Uploading… {percent}%"
    return human_size(f.size)


def waiting_words(pending: Pending) -> str | None:
    """The note while Send waits for uploads to finish."""
    if pending.waiting is None or not pending.uploading:
        return None
    count = sum(1 for f in pending.files if f.state == "uploading")
    return f"Sends when {'the upload finishes' if count == 1 else f'{count} uploads finish'}…"


def badge_text(name: str, mime_type: str) -> str:
    """A file chip's badge: its extension ("PDF", "MD"), else its kind."""
    ext = PurePath(name).suffix.lstrip(".").upper()
    if ext and len(ext) <= 4:
        return ext
    return "PDF" if mime_type == "application/pdf" else "TXT"


def caption(a: p.MessageAttachment) -> str:
    """A prompt's file in one line under its name: its kind and size (pages, pixels)."""
    if a.kind == "image":
        what = f"{a.width}×{a.height}" if a.width and a.height else "Image"
    elif a.kind == "pdf":
        what = f"PDF, {a.pages} page{'s' if a.pages != 1 else ''}" if a.pages else "PDF"
    else:
        what = "Text"
    return f"{what} · {human_size(a.bytes)}"


def queued_line(text: str, files: Sequence[p.MessageAttachment] | None) -> str:
    """A queued (or steering) message as its row shows it: its first line, then the files it
    carries ("· 2 files: shot.png, log.txt"), so a message of files alone is not blank."""
    lines = text.strip().splitlines()
    first = (lines[0] if lines else "")[:200]
    if not files:
        return first
    names = ", ".join(f.name for f in files[:3]) + (", …" if len(files) > 3 else "")
    count = "1 file" if len(files) == 1 else f"{len(files)} files"
    return f"{first} · {count}: {names}" if first else f"{count}: {names}"


def fitted(width: int | None, height: int | None, edge: int) -> tuple[int, int]:
    """An image of `width`×`height` shown with its long edge at most `edge` (never enlarged);
    a square of `edge` when its size is unknown."""
    if not width or not height:
        return edge, edge
    scale = min(1.0, edge / max(width, height))
    return max(1, round(width * scale)), max(1, round(height * scale))


def vision_of(choice: object) -> bool | None:
    """Whether a provider (a `ProviderChoice`) sees images: None when the backend does not say."""
    seen = getattr(choice, "vision", None)
    return seen if isinstance(seen, bool) else None


def current_vision(provider: str, providers: Sequence[p.ProviderChoice]) -> bool | None:
    """Whether the session's provider (by name; "" for the default) sees images."""
    for choice in providers:
        if choice.name == provider or (not provider and choice.default):
            return vision_of(choice)
    return None


def vision_notice(has_image: bool, vision: bool | None) -> str | None:
    """The line above the message box when an image waits for a model known to be blind."""
    return NO_VISION_NOTICE if has_image and vision is False else None
