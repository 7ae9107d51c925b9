"""provider.test's probe: one tiny request timed to the end of the stream; failures are results."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from backend.errors import ProviderError
from backend.providers.base import ChatRequest, Chunk, DoneChunk, TextChunk
from backend.providers.probe import PROBE_MAX_TOKENS, probe

KEY = "sk-test-PROBE-0123456789"


class ScriptedProvider:
    name = "scripted"
    model = "tiny-model"

    def __init__(self, *, fail: ProviderError | None = None, hang: bool = False) -> None:
        self.fail = fail
        self.hang = hang
        self.requests: list[ChatRequest] = []
        self.closed_stream = False

    async def stream(self, request: ChatRequest) -> AsyncIterator[Chunk]:
        self.requests.append(request)
        try:
            await asyncio.sleep(0.002)
            yield TextChunk("OK")
            if self.hang:
                await asyncio.sleep(3600)
            if self.fail is not None:
                raise self.fail
            yield DoneChunk("stop")
        finally:
            self.closed_stream = True

    async def aclose(self) -> None:
        pass


async def test_ok_reports_latency_to_the_end_of_the_stream() -> None:
    provider = ScriptedProvider()
    result = await probe(provider)
    assert result.ok
    assert result.error_kind is None
    assert result.latency_ms >= 2
    [request] = provider.requests
    assert request.model == "tiny-model"
    assert request.tools == ()
    assert request.max_tokens == PROBE_MAX_TOKENS
    assert [(m.role, m.content) for m in request.messages] == [("user", "Reply with the word OK.")]


async def test_provider_failure_is_a_classified_result_in_words_with_the_detail_apart() -> None:
    provider = ScriptedProvider(fail=ProviderError("auth", f"scripted: HTTP 401: bad key {KEY}"))
    result = await probe(provider, key=KEY)
    assert not result.ok
    assert result.error_kind == "auth"
    assert result.error_message == ("The server rejected the API key. Paste a new key in "
                                    "Settings → Providers.")
    assert result.error_detail == "scripted: HTTP 401: bad key ***", (
        "the raw detail, with a key the provider failed to redact removed")


async def test_bounded_by_the_timeout() -> None:
    provider = ScriptedProvider(hang=True)
    result = await probe(provider, timeout_s=0.05)
    assert not result.ok
    assert result.error_kind == "timeout"
    assert "0.05 s" in (result.error_message or "")
    assert result.error_detail == "scripted: no complete answer within 0.05 s"
    assert 50 <= result.latency_ms < 2000
    assert provider.closed_stream, "the stream was closed, not left hanging"
