"""shared/durations.py: counts, thresholds, the slowest and the recent samples."""

from __future__ import annotations

from dataclasses import dataclass

from shared.durations import THRESHOLDS_MS, Durations


@dataclass(frozen=True)
class Ms:
    ms: float


def test_counts_total_max_and_thresholds() -> None:
    d: Durations[Ms] = Durations()
    for ms in (1, 10, 19.9, 20, 55, 1500):
        d.add(Ms(ms))
    assert d.count == 6
    assert d.total_ms == 1 + 10 + 19.9 + 20 + 55 + 1500
    assert d.max_ms == 1500
    assert dict(d.over_thresholds()) == {10: 5, 20: 3, 50: 2, 100: 1, 1000: 1}
    assert [t for t, _ in d.over_thresholds()] == list(THRESHOLDS_MS)


def test_keeps_the_slowest_longest_first_and_the_recent_oldest_first() -> None:
    d: Durations[Ms] = Durations(keep_slowest=3, keep_recent=4)
    for ms in (5, 1, 9, 3, 7, 2, 8):
        d.add(Ms(ms))
    assert [s.ms for s in d.slowest()] == [9, 8, 7]
    assert [s.ms for s in d.recent(10)] == [3, 7, 2, 8]
    assert [s.ms for s in d.recent(2)] == [2, 8]
    assert d.recent(0) == []


def test_empty() -> None:
    d: Durations[Ms] = Durations()
    assert (d.count, d.max_ms, d.mean_ms, d.slowest(), d.recent(5)) == (0, 0.0, 0.0, [], [])
