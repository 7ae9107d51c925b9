"""The provider contract: one internal request shape in, typed stream chunks out."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

WireRole = Literal["system", "user", "assistant", "tool"]


@dataclass(frozen=True)
class WireMessage:
    role: WireRole
    content: str


@dataclass(frozen=True)
class ChatRequest:
    model: str
    messages: list[WireMessage]
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TextChunk:
    text: str


@dataclass(frozen=True)
class UsageChunk:
    input_tokens: int
    output_tokens: int
    cached_tokens: int = 0


@dataclass(frozen=True)
class DoneChunk:
    finish_reason: str | None


Chunk = TextChunk | UsageChunk | DoneChunk


class ChatProvider(Protocol):
    """Streams one model call.  Raises backend.errors.ProviderError for every failure."""

    name: str
    model: str

    def stream(self, request: ChatRequest) -> AsyncIterator[Chunk]: ...

    async def aclose(self) -> None: ...
