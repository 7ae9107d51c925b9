"""Attached files made fit for a model: images scaled into a provider's limits, PDF text.

Bytes in, bytes (or text) out, no I/O: the loader (turn/prepared.py) runs these off the
event loop.  The stored file is never touched; what is made here lives for one turn.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from PIL import Image

SCALE_STEP = 0.75  # each further shrink when an image is still too many bytes
JPEG_QUALITY = 85
MIN_EDGE = 16  # an image is never shrunk below this (it would say nothing)


@dataclass(frozen=True)
class ImageLimits:
    """What one provider takes per image: its long edge in pixels and its raw size."""

    long_edge: int
    max_bytes: int


@dataclass(frozen=True)
class FittedImage:
    data: bytes
    media_type: str
    width: int
    height: int


def fit_image(data: bytes, media_type: str, limits: ImageLimits) -> FittedImage:
    """The image within `limits`: as it is when it fits, else scaled down (LANCZOS) and
    re-encoded: PNG stays PNG while that fits the bytes, else JPEG (quality 85); GIF and
    WebP become PNG or JPEG the same way (an animation its first frame).  Raises
    ValueError when the bytes are not an image Pillow reads."""
    from PIL import Image  # ~40 ms: loaded at the first image sent, not at start

    try:
        image = Image.open(io.BytesIO(data))
        image.load()
    except (OSError, SyntaxError, Image.DecompressionBombError) as exc:
        raise ValueError(f"not a readable image: {exc}") from None
    width, height = image.size
    if max(width, height) <= limits.long_edge and len(data) <= limits.max_bytes:
        return FittedImage(data, media_type, width, height)
    scale = min(1.0, limits.long_edge / max(width, height))
    while True:
        size = (max(1, round(width * scale)), max(1, round(height * scale)))
        resized = _plain(image).resize(size, Image.Resampling.LANCZOS)
        encoded = _encode(resized, prefer_png=media_type != "image/jpeg", limit=limits.max_bytes)
        if encoded is not None:
            return FittedImage(encoded[0], encoded[1], *size)
        if min(size) <= MIN_EDGE:
            raise ValueError("the image cannot be made small enough")
        scale *= SCALE_STEP


def _plain(image: Image.Image) -> Image.Image:
    """The first frame in RGB, or RGBA when it has transparency."""
    image.seek(0)
    alpha = image.mode in ("RGBA", "LA") or (image.mode == "P" and "transparency" in image.info)
    return image.convert("RGBA" if alpha else "RGB")


def _encode(image: Image.Image, *, prefer_png: bool, limit: int) -> tuple[bytes, str] | None:
    """PNG when preferred and within `limit`, else JPEG within it, else None."""
    if prefer_png:
        out = io.BytesIO()
        image.save(out, "PNG")
        if out.tell() <= limit:
            return out.getvalue(), "image/png"
    from PIL import Image

    flat = image
    if image.mode == "RGBA":  # JPEG has no alpha: flattened on white, as viewers show it
        flat = Image.new("RGB", image.size, (255, 255, 255))
        flat.paste(image, mask=image.getchannel("A"))
    out = io.BytesIO()
    flat.save(out, "JPEG", quality=JPEG_QUALITY)
    return (out.getvalue(), "image/jpeg") if out.tell() <= limit else None


def pdf_text(data: bytes) -> tuple[str, int]:
    """A PDF's text, page after page, and its page count.  Raises ValueError when pypdf
    cannot read it."""
    from pypdf import PdfReader  # imported here: a second or more, needed only for PDFs
    from pypdf.errors import PyPdfError

    try:
        reader = PdfReader(io.BytesIO(data))
        pages = [page.extract_text() or "" for page in reader.pages]
    except (PyPdfError, OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"the PDF's text could not be read: {exc}") from None
    return "\n\n".join(p.strip() for p in pages if p.strip()), len(pages)


# --- what an image costs, as each provider counts it ---------------------------------------


def anthropic_image_tokens(width: int, height: int) -> int:
    """Anthropic's documented estimate: width × height / 750 (after its own scaling)."""
    return max(1, math.ceil(width * height / 750))


OPENAI_BASE_TOKENS, OPENAI_TILE_TOKENS, OPENAI_TILE = 85, 170, 512
OPENAI_FIT, OPENAI_SHORT_SIDE = 2048, 768


def openai_image_tokens(width: int, height: int) -> int:
    """OpenAI's high-detail count: fitted in 2048 × 2048, the short side scaled to 768,
    then 170 per 512-pixel tile plus 85."""
    scale = min(1.0, OPENAI_FIT / max(width, height))
    w, h = width * scale, height * scale
    scale = min(1.0, OPENAI_SHORT_SIDE / min(w, h))
    w, h = w * scale, h * scale
    tiles = math.ceil(w / OPENAI_TILE) * math.ceil(h / OPENAI_TILE)
    return OPENAI_BASE_TOKENS + OPENAI_TILE_TOKENS * tiles
