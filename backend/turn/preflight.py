"""The preflight gate before every model call: will this request fit the provider's window?

It runs again whenever the provider changes (a fallback may have a smaller
window), so the answer's budget (`max_tokens`) is always set for the
provider that is about to be called.  A request that cannot fit fails closed
with a clear reason instead of being sent to fail remotely; compressing the
history to make it fit is the compression stage's job, which plugs in here.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from backend.compress.tokens import request_chars
from backend.providers.base import ChatRequest
from shared.config import ProviderConfig

CHARS_PER_TOKEN = 4
SAFETY_TOKENS = 256  # estimates are rough; leave room for the provider's own framing
MIN_ANSWER_TOKENS = 64


@dataclass(frozen=True)
class Preflight:
    request: ChatRequest | None  # None: it does not fit; `reason` says why
    estimated_tokens: int
    reason: str | None = None


def estimate_tokens(request: ChatRequest) -> int:
    return request_chars(request) // CHARS_PER_TOKEN + 4 * len(request.messages)


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
