"""What a model call cost: its token usage (as reported, or estimated) priced by the config."""

from __future__ import annotations

from backend.providers.base import ChatRequest, UsageChunk
from shared.config import ProviderConfig
from shared.protocol import Usage

CHARS_PER_TOKEN = 4


def measure(usage: UsageChunk | None, request: ChatRequest, answer: str) -> Usage:
    """The provider's reported usage, or an estimate marked as such when it reported none.
    Image tokens are in the reported input already (OpenAI's and Anthropic's input counts
    include them; neither bills them apart), so nothing is added to a report."""
    if usage is not None:
        return Usage(
            input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
            cached_tokens=usage.cached_tokens,
        )
    sent = sum(len(m.content) + sum(len(c.arguments) for c in m.tool_calls)
               for m in request.messages)
    # Images and documents as the provider's own estimate of them (turn/attachments.py).
    pictures = sum(sum(i.tokens for i in m.images) + sum(d.tokens for d in m.documents)
                   for m in request.messages)
    return Usage(
        input_tokens=max(1, sent // CHARS_PER_TOKEN + pictures),
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
