"""What each model gets of a prompt's files: the rendering core, without I/O.

A user's prompt names its files (`WireMessage.files`, from meta.attachments); before each
call they become what the provider about to be called takes (`Target`): images natively
to a model that sees (scaled into the provider's limits, turn/media.py) or a note naming
them to one that does not; PDFs as documents to Anthropic and as their text to the others;
text files fenced under their name.  `prepare` makes one file's `Part` from its bytes;
`render` puts a message's parts in place of its files.  The loader (turn/prepared.py)
reads the bytes and keeps the parts for the turn.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from backend.providers.base import WireDocument, WireFile, WireImage, WireMessage
from backend.turn.media import (
    ImageLimits,
    anthropic_image_tokens,
    fit_image,
    openai_image_tokens,
    pdf_text,
)

# Per image: Anthropic scales anything over 1568 px on the long edge down itself and refuses
# over 5 MB of base64 (3.75 MB raw); OpenAI fits images in 2048 px and takes 20 MB.
ANTHROPIC_LIMITS = ImageLimits(long_edge=1568, max_bytes=3_750_000)
OPENAI_LIMITS = ImageLimits(long_edge=2048, max_bytes=20_000_000)
PDF_PAGE_TOKENS = 1_500  # a natively read page: its text and a picture of it
MAX_NATIVE_PDF_PAGES = 100  # Anthropic's limit; a longer PDF goes as text
MAX_NATIVE_PDF_BYTES = 16 * 1024 * 1024  # 21 MB in base64: room under the 32 MB request limit
MAX_FILE_CHARS = 100_000  # a PDF's text or a text file, as sent

Form = Literal["image", "note", "dropped", "document", "pdf_text", "text"]

# A session with a screenshot in every prompt sends them all again with each request: past
# these, the oldest prompts' images and PDFs are left out (named by notes) until it fits.
ANTHROPIC_REQUEST_BINARY = 28 * 1000 * 1000
OPENAI_REQUEST_BINARY = 45 * 1000 * 1000


@dataclass(frozen=True)
class Target:
    """The provider about to be called, as far as files go: its kind, and whether its
    model (the one this request names) sees images."""

    kind: str  # openai | anthropic | local
    vision: bool

    @property
    def limits(self) -> ImageLimits:
        return ANTHROPIC_LIMITS if self.kind == "anthropic" else OPENAI_LIMITS

    @property
    def binary_budget(self) -> int:
        """Base64 bytes of images and documents one request may carry: under Anthropic's
        32 MB per request, and OpenAI's 50 MB of images, with room for the words."""
        return ANTHROPIC_REQUEST_BINARY if self.kind == "anthropic" else OPENAI_REQUEST_BINARY


@dataclass(frozen=True)
class Part:
    """One file as the provider gets it: an image, a document, or text (a note, a PDF's
    text, a fenced file).  `unseen`: an image this model cannot see (people are told)."""

    image: WireImage | None = None
    document: WireDocument | None = None
    text: str = ""
    unseen: bool = False


def form(file: WireFile, target: Target, *, drop: bool = False) -> Form:
    """What a file becomes for `target`; `drop`: an old prompt's image or PDF left out of
    a tight request (a note names it)."""
    if file.kind == "image":
        return "dropped" if drop else "image" if target.vision else "note"
    if file.kind == "pdf":
        native = (target.kind == "anthropic" and (file.pages or 1) <= MAX_NATIVE_PDF_PAGES
                  and file.bytes <= MAX_NATIVE_PDF_BYTES)
        return "dropped" if drop and native else "document" if native else "pdf_text"
    return "text"


PartKey = tuple[str, Form, ImageLimits | None, str]


def key(file: WireFile, target: Target, *, drop: bool = False) -> PartKey:
    """What a prepared part depends on: the file, its form, (images) the limits, and (every
    other form: notes, documents and texts name the file) the name it was attached under."""
    f = form(file, target, drop=drop)
    if f == "image":
        return file.sha256, f, target.limits, ""
    return file.sha256, f, None, file.name


def needs_bytes(f: Form) -> bool:
    return f not in ("note", "dropped")


def prepare(file: WireFile, f: Form, target: Target, data: bytes | None) -> Part:
    """The file as `target` takes it in form `f`; `data`: its stored bytes (None when the
    form needs none, or when the file is gone)."""
    if f == "note":
        return Part(text=image_note(file), unseen=True)
    if f == "dropped":
        return Part(text=f"[{_what(file)} was attached here: {_described(file)}; left out of "
                         "this request to save room.]")
    if data is None:
        return Part(text=f"[A file was attached: {file.name}; it is no longer available.]")
    if f == "image":
        return _image(file, target, data)
    if f == "document":
        return Part(document=WireDocument(file.name, _b64(data),
                                          PDF_PAGE_TOKENS * max(1, file.pages or 1)))
    if f == "pdf_text":
        return Part(text=_pdf(file, data))
    return Part(text=fenced(file.name, data.decode("utf-8", errors="replace")))


def image_note(file: WireFile) -> str:
    return f"[An image was attached: {_described(file)}; this model cannot see images.]"


def _what(file: WireFile) -> str:
    return "An image" if file.kind == "image" else "A PDF"


def _described(file: WireFile) -> str:
    """NAME, W×H (images) or NAME, N pages (PDFs), as far as they are known."""
    if file.width and file.height:
        return f"{file.name}, {file.width}×{file.height}"
    if file.pages:
        return f"{file.name}, {file.pages} page{'s' if file.pages != 1 else ''}"
    return file.name


def _image(file: WireFile, target: Target, data: bytes) -> Part:
    try:
        fitted = fit_image(data, file.mime_type, target.limits)
    except ValueError:
        return Part(text=f"[An image was attached: {file.name}; it could not be read.]")
    count = anthropic_image_tokens if target.kind == "anthropic" else openai_image_tokens
    tokens = count(fitted.width, fitted.height)
    return Part(image=WireImage(fitted.media_type, _b64(fitted.data), tokens))


def _pdf(file: WireFile, data: bytes) -> str:
    try:
        text, pages = pdf_text(data)
    except ValueError:
        return f"[PDF {file.name}: its text could not be read.]"
    plural = "s" if pages != 1 else ""
    if not text:
        return f"[PDF {file.name}, {pages} page{plural}: it has no text to extract (scanned?).]"
    return f"[PDF {file.name}, {pages} page{plural}, text extracted:]\n{_bounded(text)}"


def fenced(name: str, text: str) -> str:
    """A text file under its name, in a fence longer than any run of backticks in it."""
    text = _bounded(text)
    longest = run = 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    fence = "`" * max(3, longest + 1)
    end = "" if text.endswith("\n") else "\n"
    return f"File {name}:\n{fence}\n{text}{end}{fence}"


def _bounded(text: str) -> str:
    if len(text) <= MAX_FILE_CHARS:
        return text
    return (text[:MAX_FILE_CHARS] + f"\n[... cut here: {len(text) - MAX_FILE_CHARS:,} more "
            "characters not sent]")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def render(m: WireMessage, parts: Sequence[Part]) -> WireMessage:
    """The message with its files' parts in place of its files: images and documents as
    such, texts ahead of the prompt's own words (as the blocks go ahead of them)."""
    texts = [p.text for p in parts if p.text]
    content = "\n\n".join([*texts, m.content] if m.content else texts)
    return replace(m, content=content, files=(),
                   images=m.images + tuple(p.image for p in parts if p.image is not None),
                   documents=m.documents + tuple(p.document for p in parts
                                                 if p.document is not None))


def current_from(messages: Sequence[WireMessage]) -> int:
    """Where the latest exchange starts: just after the last final answer (an assistant
    message without tool calls).  The prompt there is this turn's; files before it are
    old prompts' (compression may leave their images out first)."""
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if m.role == "assistant" and not m.tool_calls:
            return i + 1
    return 0
