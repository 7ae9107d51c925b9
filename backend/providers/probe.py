"""One tiny real request to a provider, timed: what `provider.test` reports.

A provider's failure is the answer here, not an exception: it comes back
classified (the ProviderError kind, the words a person reads with what to do,
and the raw detail apart), so a settings screen can show "the key is wrong"
or "nothing listens there", and what the server said a click away.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from dataclasses import dataclass

from backend.errors import ProviderError
from backend.providers.base import ChatProvider, ChatRequest, WireMessage
from backend.providers.errors import told

log = logging.getLogger("providers")

PROBE_TIMEOUT_S = 60.0
PROBE_PROMPT = "Reply with the word OK."
PROBE_MAX_TOKENS = 16


@dataclass(frozen=True)
class Probe:
    ok: bool
    latency_ms: int  # to the end of the stream (or to the failure), rounded up
    error_kind: str | None = None
    error_message: str | None = None  # for a person: what happened and what to do
    error_detail: str | None = None  # the raw detail: provider, status, what it said


async def probe(
    provider: ChatProvider, timeout_s: float = PROBE_TIMEOUT_S, key: str | None = None
) -> Probe:
    """Streams one short answer to its end.  `key`, when given, is removed from the error's
    texts as well (providers redact their own; this guards one that forgets)."""
    request = ChatRequest(
        model=provider.model,
        messages=[WireMessage("user", PROBE_PROMPT)],
        max_tokens=PROBE_MAX_TOKENS,
    )
    started = time.monotonic()
    try:
        async with asyncio.timeout(timeout_s):
            async for _ in provider.stream(request):
                pass
        result = Probe(True, _elapsed_ms(started))
    except ProviderError as exc:
        result = _failed(started, exc.kind, told(exc), exc.message, key)
    except TimeoutError:
        words = (f"The provider did not finish a one-word answer within {timeout_s:g} s. Check "
                 "that its server is running, or try again.")
        detail = f"{provider.name}: no complete answer within {timeout_s:g} s"
        result = _failed(started, "timeout", words, detail, key)
    log.info("provider test %s: %s in %d ms", provider.name, result.error_kind or "ok",
             result.latency_ms)
    return result


def _failed(started: float, kind: str, words: str, detail: str, key: str | None) -> Probe:
    if key:
        words, detail = words.replace(key, "***"), detail.replace(key, "***")
    return Probe(False, _elapsed_ms(started), kind, words, detail)


def _elapsed_ms(started: float) -> int:
    return math.ceil((time.monotonic() - started) * 1000)
