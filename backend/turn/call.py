"""The model call stage: stream one request, feeding text to the delta writer, and count usage."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

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

CHARS_PER_TOKEN = 4


@dataclass
class CallResult:
    text: str
    usage: Usage
    finish_reason: str | None
    tool_calls: list[ToolCallChunk] = field(default_factory=list)


async def call_model(
    provider: ChatProvider, request: ChatRequest, deltas: DeltaWriter, prices: ProviderConfig
) -> CallResult:
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
    return CallResult(answer, price(spent, prices), finish, calls)


def measure(usage: UsageChunk | None, request: ChatRequest, answer: str) -> Usage:
    """The provider's reported usage, or an estimate marked as such when it reported none."""
    if usage is not None:
        return Usage(
            input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
            cached_tokens=usage.cached_tokens,
        )
    sent = sum(len(m.content) + sum(len(c.arguments) for c in m.tool_calls)
               for m in request.messages)
    return Usage(
        input_tokens=max(1, sent // CHARS_PER_TOKEN),
        output_tokens=len(answer) // CHARS_PER_TOKEN,
        estimated=True,
    )


def price(usage: Usage, cfg: ProviderConfig) -> Usage:
    """Cost from the configured prices; cache reads at their own price where one is set."""
    cached_price = cfg.cached_input_usd_per_mtok
    if cached_price is None:
        cached_price = cfg.input_usd_per_mtok
    fresh = max(usage.input_tokens - usage.cached_tokens, 0)
    cost = (
        fresh * cfg.input_usd_per_mtok + usage.cached_tokens * cached_price
        + usage.output_tokens * cfg.output_usd_per_mtok
    ) / 1_000_000
    return Usage(
        input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
        cached_tokens=usage.cached_tokens, cost_usd=round(cost, 8), estimated=usage.estimated,
    )



async def attempt(
    provider: ChatProvider, request: ChatRequest, deltas: DeltaWriter, prices: ProviderConfig,
    stop: asyncio.Event,
) -> CallResult | None:
    """One attempt, racing `stop`: the result, or None when stopped first (the call is
    cancelled; what it streamed stays in `deltas`).  Raises ProviderError."""
    finished, result = await unless_stopped(call_model(provider, request, deltas, prices), stop)
    return result if finished else None
