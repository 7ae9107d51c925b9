"""Token estimates and budgets: the trigger, the tail budget, and the per-provider calibration."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from backend.compress.model import Call, Entry
from backend.compress.tokens import (
    CHARS_PER_TOKEN,
    MAX_RATIO,
    MESSAGE_OVERHEAD_TOKENS,
    MIN_RATIO,
    Calibration,
    entry_tokens,
    request_tokens,
    tail_budget,
    threshold_tokens,
)


@pytest.mark.parametrize(
    ("window", "threshold", "expected"),
    [
        (128_000, 0.50, 96_000),  # under 512K: raised to the 0.75 floor
        (128_000, 0.90, 115_200),  # the floor only raises
        (200_000, 0.75, 150_000),
        (511_999, 0.50, 383_999),
        (512_000, 0.50, 256_000),  # from 512K on the configured threshold stands
        (1_000_000, 0.50, 500_000),
        (2_000_000, 0.30, 600_000),
    ],
)
def test_threshold_tokens(window: int, threshold: float, expected: int) -> None:
    assert threshold_tokens(window, threshold) == expected


@pytest.mark.parametrize(("window", "threshold"), [(0, 0.5), (-1, 0.5), (128_000, 0.0), (128_000, 1.5)])
def test_threshold_tokens_rejects_nonsense(window: int, threshold: float) -> None:
    with pytest.raises(ValueError, match="threshold"):
        threshold_tokens(window, threshold)


@pytest.mark.parametrize(
    ("window", "expected"),
    [
        (128_000, 10_000),  # 2.5% is 3.2K: clamped up to the minimum
        (200_000, 10_000),
        (400_000, 10_000),
        (600_000, 15_000),  # 2.5% inside the range
        (1_000_000, 25_000),
        (2_000_000, 25_000),  # 50K clamped down to the maximum
        (32_000, 6_400),  # never over 20% of the window, even below the minimum
        (8_192, 1_638),
    ],
)
def test_tail_budget(window: int, expected: int) -> None:
    assert tail_budget(window, 10_000, 25_000) == expected


def test_tail_budget_defaults_are_10k_to_25k() -> None:
    assert tail_budget(128_000) == 10_000
    assert tail_budget(2_000_000) == 25_000


@given(st.integers(1, 10_000_000), st.integers(0, 50_000), st.integers(0, 50_000))
def test_tail_budget_bounds(window: int, a: int, b: int) -> None:
    low, high = min(a, b), max(a, b)
    budget = tail_budget(window, low, high)
    assert budget <= window // 5
    assert budget <= high
    assert budget >= min(low, window // 5)


def test_tail_budget_rejects_an_inverted_range() -> None:
    with pytest.raises(ValueError, match="tail_min"):
        tail_budget(128_000, 30_000, 20_000)


def test_uncalibrated_estimate_is_four_chars_per_token_rounded_up() -> None:
    cal = Calibration()
    assert cal.ratio == CHARS_PER_TOKEN
    assert cal.tokens(0) == 0
    assert cal.tokens(1) == 1
    assert cal.tokens(400) == 100
    assert cal.tokens(401) == 101


def test_calibration_moves_toward_reported_usage() -> None:
    cal = Calibration()
    for _ in range(40):
        cal.observe(30_000, 10_000)  # this provider's tokenizer: 3 chars a token
    assert cal.ratio == pytest.approx(3.0, abs=0.01)
    assert cal.samples == 40
    assert cal.tokens(3000) == pytest.approx(1000, abs=5)


def test_calibration_is_a_moving_average_not_the_last_sample() -> None:
    cal = Calibration()
    cal.observe(20_000, 10_000)  # one sample of 2.0
    assert 2.0 < cal.ratio < 4.0


@pytest.mark.parametrize(
    ("chars", "tokens", "bound"), [(1_000, 100_000, MIN_RATIO), (1_000_000, 1_000, MAX_RATIO)]
)
def test_calibration_is_clamped(chars: int, tokens: int, bound: float) -> None:
    cal = Calibration()
    for _ in range(100):
        cal.observe(chars, tokens)
    assert cal.ratio == pytest.approx(bound)


def test_calibration_ignores_useless_reports() -> None:
    cal = Calibration()
    cal.observe(0, 5000)
    cal.observe(5000, 0)
    cal.observe(100, 50)  # a tiny request: the provider's framing dominates
    assert cal.ratio == CHARS_PER_TOKEN
    assert cal.samples == 0


def test_calibration_starting_ratio_is_clamped() -> None:
    assert Calibration(100.0).ratio == MAX_RATIO
    assert Calibration(0.1).ratio == MIN_RATIO


def test_entry_tokens_counts_content_calls_and_overhead() -> None:
    entry = Entry(1, "assistant", "x" * 40, calls=(Call("c1", "read_file", '{"path": "a"}'),))
    chars = 40 + len("read_file") + len('{"path": "a"}')
    assert entry_tokens(entry) == -(-chars // 4) + MESSAGE_OVERHEAD_TOKENS
    assert entry_tokens(Entry(2, "user", "")) == MESSAGE_OVERHEAD_TOKENS


def test_entry_tokens_uses_the_calibration() -> None:
    cal = Calibration(2.0)
    assert entry_tokens(Entry(1, "user", "x" * 100), cal) == 50 + MESSAGE_OVERHEAD_TOKENS


def test_request_tokens_includes_the_system_prompt_and_tools() -> None:
    entries = [Entry(1, "user", "x" * 400), Entry(2, "assistant", "y" * 40)]
    bare = request_tokens("", entries)
    assert bare == MESSAGE_OVERHEAD_TOKENS + sum(entry_tokens(e) for e in entries)
    assert request_tokens("s" * 400, entries) == bare + 100
    assert request_tokens("s" * 400, entries, tools_json_chars=800) == bare + 300
    assert request_tokens("s" * 400, entries, 800, Calibration(2.0)) > request_tokens("s" * 400, entries, 800)
