"""Attachments: images and files sent with a prompt.

Bytes travel before the prompt, by `attachment.upload` in chunks keyed by the file's
sha256 (idempotent: a chunk sent twice is stored once, and an upload cut by a crash resumes
where the store says it stands); the backend keeps each file once, content-addressed, and
`prompt.submit` names the files by sha256 with the name people gave them.  Messages and
receipts carry `MessageAttachment`s; `attachment.get` reads a file (or its thumbnail) back
in chunks, for a session that has it.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from shared.protocol.base import Id, NonNegative, Params, Wire

# Bounds, enforced by the backend with -32602 naming the bound (PROTOCOL.md section 12).
MAX_ATTACHMENTS = 10  # files per prompt
MAX_ATTACHMENT_BYTES = 32 * 1024 * 1024  # one file
MAX_PROMPT_ATTACHMENT_BYTES = 64 * 1024 * 1024  # all the files of one prompt
MAX_CHUNK_BYTES = 1024 * 1024  # decoded bytes of one upload or download chunk (base64: 1.4 MB)
MAX_ATTACHMENT_NAME = 255  # characters of a file's name, as people see it
THUMBNAIL_EDGE = 256  # pixels: the long edge of an image's thumbnail (PNG)

# The types taken: images (sent to models that see), PDF, and text (text/* and the text
# formats below), checked against the bytes themselves when the upload completes.
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
PDF_TYPE = "application/pdf"
TEXT_APPLICATION_TYPES = ("application/json", "application/xml", "application/x-yaml",
                          "application/toml", "application/javascript", "application/x-sh")

Sha256 = Annotated[str, msgspec.Meta(pattern="^[0-9a-f]{64}$")]
MimeType = Annotated[str, msgspec.Meta(min_length=3, max_length=100)]
AttachmentName = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_ATTACHMENT_NAME)]
AttachmentKind = Literal["image", "pdf", "text"]


def attachment_kind(mime_type: str) -> AttachmentKind | None:
    """What a declared type is: an image, a PDF, text, or (None) a type not taken."""
    if mime_type in IMAGE_TYPES:
        return "image"
    if mime_type == PDF_TYPE:
        return "pdf"
    if mime_type.startswith("text/") or mime_type in TEXT_APPLICATION_TYPES:
        return "text"
    return None


class AttachmentUploadParams(Params):
    """One chunk of a file: bytes [offset, offset + len(data)) of a file of `size` bytes
    whose sha256 is `sha256`.  Without `data` it only asks where the upload stands."""

    sha256: Sha256
    size: Annotated[int, msgspec.Meta(ge=1)]
    mime_type: MimeType
    offset: NonNegative = 0
    data: str | None = None  # base64 (standard alphabet, padded), at most MAX_CHUNK_BYTES decoded


class StoredFile(Wire):
    """A file the backend holds, whole and checked."""

    sha256: str
    mime_type: str
    bytes: int
    kind: AttachmentKind
    width: int | None = None  # images: pixels
    height: int | None = None
    pages: int | None = None  # PDFs
    thumbnail: str | None = None  # images: the sha256 of its PNG thumbnail (attachment.get)


class AttachmentUploadResult(Wire):
    sha256: str
    received: int  # bytes held so far: the next chunk starts here
    complete: bool
    file: StoredFile | None = None  # once complete (at once when the file was held already)


class Attachment(Params):
    """A file named in `prompt.submit`: uploaded (complete) before, by its sha256."""

    sha256: Sha256
    name: AttachmentName  # the file's name as people gave it (no folders)


class MessageAttachment(Wire):
    """A prompt's file as messages, receipts and events show it."""

    sha256: str  # the attachment's id: attachment.get reads it
    name: str
    mime_type: str
    bytes: int
    kind: AttachmentKind
    width: int | None = None
    height: int | None = None
    pages: int | None = None
    thumbnail: str | None = None  # images: the sha256 of the thumbnail (attachment.get)


class AttachmentGetParams(Params):
    """A chunk of a file (or thumbnail) of a prompt of `session_id`."""

    session_id: Id
    sha256: Sha256
    offset: NonNegative = 0
    limit: Annotated[int, msgspec.Meta(ge=1, le=MAX_CHUNK_BYTES)] = MAX_CHUNK_BYTES


class AttachmentGetResult(Wire):
    sha256: str
    mime_type: str
    bytes: int  # the whole file's size
    offset: int
    data: str  # base64 of bytes [offset, offset + limit) (fewer at the end)
    eof: bool
