"""The provider contract: one internal request shape in, typed stream chunks out."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import msgspec

WireRole = Literal["system", "user", "assistant", "tool"]


@dataclass(frozen=True)
class WireToolCall:
    """A tool call as replayed to the provider: `arguments` is the JSON text the model sent."""

    call_id: str
    name: str
    arguments: str


# What an image counts as when nothing better is known (an MCP tool's): about what
# Anthropic bills a picture of a megapixel, its limit before it scales one down.
DEFAULT_IMAGE_TOKENS = 1_600


@dataclass(frozen=True)
class WireImage:
    """An image for the model: one a tool returned (an MCP server's, sent by providers that
    take images in a tool result) or one attached to a prompt, prepared for the provider
    called (turn/attachments.py).  `tokens`: the provider's own estimate of it."""

    media_type: str  # image/png, image/jpeg, image/gif or image/webp
    data: str  # base64
    tokens: int = DEFAULT_IMAGE_TOKENS


@dataclass(frozen=True)
class WireDocument:
    """A PDF attached to a prompt, for a provider that reads PDFs itself (Anthropic)."""

    name: str
    data: str  # base64
    tokens: int  # the estimate: text and a picture of every page
    media_type: str = "application/pdf"


@dataclass(frozen=True)
class WireFile:
    """A file attached to a prompt (the user row's meta.attachments), as the transcript
    names it.  Never sent as is: before each call the turn replaces it with what the
    provider called takes (turn/attachments.py), so providers never see one."""

    sha256: str
    name: str
    mime_type: str
    kind: str  # image | pdf | text
    bytes: int = 0
    width: int | None = None
    height: int | None = None
    pages: int | None = None


@dataclass(frozen=True)
class WireMessage:
    """One message of a request.  Assistant rows may carry tool calls (content may be
    empty); tool rows carry the `tool_call_id` they answer and the tool's `name`, and
    maybe images.  A user's prompt may carry `files` (until the turn renders them) and then
    `images` and `documents` (PDFs), which go ahead of its text."""

    role: WireRole
    content: str
    tool_calls: tuple[WireToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    images: tuple[WireImage, ...] = ()
    files: tuple[WireFile, ...] = ()
    documents: tuple[WireDocument, ...] = ()
    # This message as a provider's JSON, by the provider's format, made at its first request:
    # a session's kept view (turn/transcript.py) sends the same message objects again with
    # every request, so each is serialized once, not once per turn.  Not an init field, so
    # `dataclasses.replace` makes a message with an empty one.
    encoded: dict[str, msgspec.Raw] = field(default_factory=dict, init=False, compare=False,
                                            repr=False)


@dataclass(frozen=True)
class ToolSpec:
    """A tool the model may call: `parameters` is a JSON Schema object."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True)
class ChatRequest:
    model: str
    messages: list[WireMessage]
    tools: tuple[ToolSpec, ...] = ()
    max_tokens: int | None = None  # the answer's budget; preflight sets it from the window
    extra: dict[str, Any] = field(default_factory=dict)
    # The characters compress/tokens.request_chars counts, when whoever built the request
    # counted them already (turn/request.assemble keeps each session's count as it grows).
    chars: int | None = None
    # Whether a message carries `files` (not rendered yet), when whoever built the request
    # knows (turn/request.assemble: the kept view counts them); None: look.
    files: bool | None = None


@dataclass(frozen=True)
class TextChunk:
    text: str


@dataclass(frozen=True)
class UsageChunk:
    input_tokens: int
    output_tokens: int
    cached_tokens: int = 0


@dataclass(frozen=True)
class ToolCallChunk:
    """One complete tool call, yielded once its streamed fragments are all in (before
    DoneChunk).  `call_id` and `name` are as the model sent them, possibly empty;
    `arguments` is the raw JSON text, possibly malformed — the turn validates both."""

    index: int
    call_id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class DoneChunk:
    finish_reason: str | None


Chunk = TextChunk | UsageChunk | ToolCallChunk | DoneChunk


class ChatProvider(Protocol):
    """Streams one model call.  Raises backend.errors.ProviderError for every failure."""

    name: str
    model: str

    def stream(self, request: ChatRequest) -> AsyncIterator[Chunk]: ...

    async def aclose(self) -> None: ...
