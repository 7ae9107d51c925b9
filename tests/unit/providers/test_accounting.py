"""A call's usage, as reported or estimated, priced by the provider's configured prices."""

from __future__ import annotations

from backend.providers.accounting import measure, price
from backend.providers.base import ChatRequest, UsageChunk, WireMessage, WireToolCall
from shared.config import ProviderConfig
from shared.protocol import Usage

REQUEST = ChatRequest(model="m", messages=[
    WireMessage("system", "s" * 40),
    WireMessage("assistant", "", tool_calls=(WireToolCall("c1", "terminal", "a" * 40),)),
])


def test_reported_usage_is_taken_as_is() -> None:
    assert measure(UsageChunk(100, 20, 30), REQUEST, "answer") == Usage(
        input_tokens=100, output_tokens=20, cached_tokens=30)


def test_missing_usage_is_estimated_and_says_so() -> None:
    assert measure(None, REQUEST, "x" * 41) == Usage(
        input_tokens=20, output_tokens=10, estimated=True)  # 80 characters sent, 41 answered
    assert measure(None, ChatRequest(model="m", messages=[]), "").input_tokens == 1


def test_cache_reads_cost_their_own_price_or_the_input_price() -> None:
    used = Usage(input_tokens=1_000_000, output_tokens=500_000, cached_tokens=400_000,
                 estimated=True)
    cfg = ProviderConfig(model="m", input_usd_per_mtok=3.0, output_usd_per_mtok=15.0,
                         cached_input_usd_per_mtok=0.3)
    priced = price(used, cfg)
    assert priced.cost_usd == round(0.6 * 3.0 + 0.4 * 0.3 + 0.5 * 15.0, 8)
    assert (priced.input_tokens, priced.cached_tokens, priced.estimated) == (1_000_000, 400_000, True)
    plain = ProviderConfig(model="m", input_usd_per_mtok=3.0, output_usd_per_mtok=15.0)
    assert price(used, plain).cost_usd == round(1.0 * 3.0 + 0.5 * 15.0, 8)
