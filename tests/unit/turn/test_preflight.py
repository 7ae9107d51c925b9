"""Preflight: the answer's budget follows the provider's window; too large fails closed."""

from __future__ import annotations

from backend.providers.base import ChatRequest, WireMessage
from backend.turn.preflight import SAFETY_TOKENS, estimate_tokens, preflight
from shared.config import ProviderConfig


def request(chars: int) -> ChatRequest:
    return ChatRequest(model="m", messages=[WireMessage("system", "s"), WireMessage("user", "x" * chars)])


def test_a_large_window_leaves_the_configured_answer_budget() -> None:
    checked = preflight(request(400), "main", ProviderConfig(model="m", context_window=128_000))
    assert checked.request is not None
    assert checked.request.max_tokens == 4096


def test_a_small_window_shrinks_the_answer_budget() -> None:
    req = request(4000)
    checked = preflight(req, "small", ProviderConfig(model="m", context_window=2000))
    assert checked.request is not None
    assert checked.request.max_tokens == 2000 - estimate_tokens(req) - SAFETY_TOKENS


def test_a_request_that_cannot_fit_fails_closed_naming_the_window() -> None:
    checked = preflight(request(40_000), "tiny", ProviderConfig(model="m", context_window=2048))
    assert checked.request is None
    assert checked.reason is not None
    assert checked.reason.startswith("context_overflow")
    assert "tiny" in checked.reason
    assert "2,048" in checked.reason
