"""An uploaded file's check (no I/O): its bytes are what its declared type says, and what
they hold (an image's size and thumbnail, a PDF's pages); raises InvalidParams naming why not.

CPU-bound (decoding a 32 MiB image takes a while): callers run it in a thread.
"""

from __future__ import annotations

import hashlib
import io
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from backend.errors import InvalidParams
from shared.protocol import THUMBNAIL_EDGE, AttachmentKind, attachment_kind

if TYPE_CHECKING:
    from PIL import Image

# Decoded pixels an image may have: a screenshot of a 8K display is 33 M; Pillow's own
# warning starts at 89 M.  A compressed "bomb" declares its size in its header, so it is
# refused before anything is decoded.
MAX_PIXELS = 64 * 1024 * 1024

# Pillow's format name for each image type taken.
_FORMATS = {"image/png": "PNG", "image/jpeg": "JPEG", "image/gif": "GIF", "image/webp": "WEBP"}

logging.getLogger("pypdf").setLevel(logging.ERROR)  # its warnings are about others' files


@dataclass(frozen=True)
class Checked:
    """What a file holds, once its bytes passed their type's check."""

    kind: AttachmentKind
    width: int | None = None
    height: int | None = None
    pages: int | None = None
    thumbnail: bytes | None = None  # images: a PNG at most THUMBNAIL_EDGE on its long edge


def check(data: bytes, sha256: str, mime_type: str) -> Checked:
    """Checks a whole upload: its SHA-256, then its bytes against `mime_type`."""
    if hashlib.sha256(data).hexdigest() != sha256:
        raise InvalidParams("sha256", "the bytes received do not have this sha256; the file "
                            "changed while it was sent, or a chunk was wrong: upload it again")
    kind = attachment_kind(mime_type)
    if kind == "image":
        return _image(data, mime_type)
    if kind == "pdf":
        return Checked("pdf", pages=_pages(data))
    if kind == "text":
        _text(data)
        return Checked("text")
    raise InvalidParams("mime_type", f"{mime_type!r} is not a type taken: images (PNG, JPEG, "
                        "GIF, WebP), PDF or text")


def _image(data: bytes, mime_type: str) -> Checked:
    from PIL import Image, UnidentifiedImageError  # ~40 ms: loaded at the first image, not at start

    want = _FORMATS[mime_type]
    try:
        with Image.open(io.BytesIO(data), formats=list(_FORMATS.values())) as img:
            if img.format != want:
                raise InvalidParams("mime_type", f"the file is a {img.format} image, not "
                                    f"{mime_type}; declare its own type")
            width, height = img.size
            if width * height > MAX_PIXELS:
                raise InvalidParams("data", f"the image is {width}×{height} pixels; at most "
                                    f"{MAX_PIXELS // (1024 * 1024)} M pixels are taken")
            img.load()
            return Checked("image", width=width, height=height, thumbnail=_thumbnail(img))
    except Image.DecompressionBombError:
        raise InvalidParams("data", "the image declares more pixels than are taken "
                            "(a decompression bomb?)") from None
    except UnidentifiedImageError:
        raise InvalidParams("mime_type", f"the file is not an image of a type taken; it was "
                            f"declared {mime_type}") from None
    except (OSError, SyntaxError, ValueError) as exc:  # truncated or damaged: Pillow's words
        raise InvalidParams("data", f"the {mime_type} image cannot be decoded completely "
                            f"({exc})") from None


def _thumbnail(img: Image.Image) -> bytes:
    small = img.convert("RGBA" if _has_alpha(img) else "RGB")
    small.thumbnail((THUMBNAIL_EDGE, THUMBNAIL_EDGE))
    out = io.BytesIO()
    small.save(out, format="PNG", optimize=True)
    return out.getvalue()


def _has_alpha(img: Image.Image) -> bool:
    return img.mode in ("RGBA", "LA", "PA") or "transparency" in img.info


def _pages(data: bytes) -> int:
    from pypdf import PdfReader  # loaded when a PDF first arrives (~0.1 s)
    from pypdf.errors import PyPdfError

    if not data.startswith(b"%PDF-"):
        raise InvalidParams("mime_type", "the file is not a PDF (it does not start with %PDF-)")
    try:
        return len(PdfReader(io.BytesIO(data), strict=False).pages)
    except (PyPdfError, OSError, ValueError, KeyError, TypeError, RecursionError) as exc:
        raise InvalidParams("data", f"the PDF's pages cannot be read ({exc})") from None


def _text(data: bytes) -> None:
    if b"\0" in data:
        raise InvalidParams("data", "a text file holds no NUL bytes; this one does (is it "
                            "binary?)")
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidParams("data", f"a text file must be UTF-8; byte {exc.start} is "
                            "not") from None
