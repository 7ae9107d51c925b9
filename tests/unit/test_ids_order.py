"""Ids made by one process sort in the order they were made, also within one millisecond and
when the wall clock steps back (tokens are listed oldest first by created_at, then id)."""

from __future__ import annotations

import time

import pytest

from backend import ids


def test_ids_made_in_a_burst_sort_in_the_order_they_were_made() -> None:
    made = [ids.new_id("tok") for _ in range(20_000)]  # many per millisecond
    assert made == sorted(made)
    assert len(set(made)) == len(made)
    assert all(len(i) == len("tok_") + 24 for i in made)


def test_a_clock_that_steps_back_does_not_reorder_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    first = ids.new_id("ses")
    monkeypatch.setattr(time, "time", lambda: 1_000_000.0)  # back to 1970
    later = [ids.new_id("ses") for _ in range(100)]
    assert [first, *later] == sorted([first, *later])


def test_a_full_tail_moves_on_to_the_next_millisecond(monkeypatch: pytest.MonkeyPatch) -> None:
    ids.new_id("x")
    ms = ids._last[0]
    monkeypatch.setattr(ids, "_last", [ms, (1 << 48) - 1])
    after = ids.new_id("x")
    assert int(after[2:14], 16) == ms + 1
    assert after > f"x_{ms:012x}{(1 << 48) - 1:012x}"


def test_stamps_sort_as_text_in_time_order_and_read_back() -> None:
    """Token expiry is compared as text, in SQL and in Python: one fixed format."""
    times = [0.0, 1.0, 1.001, 59.999, 1e9, 1e9 + 0.001, 4e9]
    stamps = [ids.stamp(t) for t in times]
    assert stamps == sorted(stamps)
    assert len(set(stamps)) == len(stamps)
    assert {len(s) for s in stamps} == {len(ids.now())}
    assert all(abs(ids.instant(s) - t) < 0.001 for s, t in zip(stamps, times, strict=True))
