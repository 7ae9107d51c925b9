"""The preflight gate before every model call: will this request fit the provider's window?

It runs again whenever the provider changes (a fallback may have a smaller
window), so the answer's budget (`max_tokens`) is always set for the
provider that is about to be called.  A request that cannot fit fails closed
with a clear reason instead of being sent to fail remotely; compressing the
history to make it fit is the compression stage's job, which plugs in here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

from backend.config import ProviderConfig
from backend.providers.base import ChatRequest

CHARS_PER_TOKEN = 4
SAFETY_TOKENS = 256  # estimates are rough; leave room for the provider's own framing
MIN_ANSWER_TOKENS = 64


@dataclass(frozen=True)
class Preflight:
    request: ChatRequest | None  # None: it does not fit; `reason` says why
    estimated_tokens: int
    reason: str | None = None


def estimate_tokens(request: ChatRequest) -> int:
    chars = sum(
        len(m.content) + sum(len(c.arguments) + len(c.name) for c in m.tool_calls)
        for m in request.messages
    )
    chars += sum(len(json.dumps(t.parameters)) + len(t.description) for t in request.tools)
    return chars // CHARS_PER_TOKEN + 4 * len(request.messages)


def preflight(request: ChatRequest, provider: str, cfg: ProviderConfig) -> Preflight:
    tokens = estimate_tokens(request)
    room = cfg.context_window - tokens - SAFETY_TOKENS
    if room < MIN_ANSWER_TOKENS:
        return Preflight(None, tokens, (
            f"context_overflow: the conversation (about {tokens:,} tokens) does not fit "
            f"{provider}'s context window of {cfg.context_window:,} tokens; start a new session "
            "or use a model with a larger window"
        ))
    return Preflight(replace(request, max_tokens=min(cfg.max_output_tokens, room)), tokens)
