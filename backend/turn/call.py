"""The model call stage: stream one request, feeding text to the delta writer, and count usage."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from backend.providers.accounting import measure, price
from backend.providers.base import (
    ChatProvider,
    ChatRequest,
    DoneChunk,
    TextChunk,
    ToolCallChunk,
    UsageChunk,
)
from backend.race import unless_stopped
from backend.turn.stream import DeltaWriter
from shared.config import ProviderConfig
from shared.protocol import Usage


@dataclass
class ModelCallResult:
    text: str
    usage: Usage
    finish_reason: str | None
    tool_calls: list[ToolCallChunk] = field(default_factory=list)


async def call_model(
    provider: ChatProvider, request: ChatRequest, deltas: DeltaWriter, prices: ProviderConfig
) -> ModelCallResult:
    """Streams the call; raises ProviderError on failure (streamed text stays in `deltas`)."""
    text: list[str] = []
    usage: UsageChunk | None = None
    finish: str | None = None
    calls: list[ToolCallChunk] = []
    async for chunk in provider.stream(request):
        if isinstance(chunk, TextChunk):
            text.append(chunk.text)
            deltas.add(chunk.text)
        elif isinstance(chunk, ToolCallChunk):
            calls.append(chunk)
        elif isinstance(chunk, UsageChunk):
            usage = chunk
        elif isinstance(chunk, DoneChunk):
            finish = chunk.finish_reason or finish
    answer = "".join(text)
    spent = measure(usage, request, answer + "".join(c.arguments for c in calls))
    return ModelCallResult(answer, price(spent, prices), finish, calls)


async def attempt(
    provider: ChatProvider, request: ChatRequest, deltas: DeltaWriter, prices: ProviderConfig,
    stop: asyncio.Event,
) -> ModelCallResult | None:
    """One attempt, racing `stop`: the result, or None when stopped first (the call is
    cancelled; what it streamed stays in `deltas`).  Raises ProviderError."""
    finished, result = await unless_stopped(call_model(provider, request, deltas, prices), stop)
    return result if finished else None
