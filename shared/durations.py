"""Durations of a repeated measurement (event-loop lag, write-lock holds) in bounded memory.

Since the process started: how many, their total, the longest, how many reached each of
`THRESHOLDS_MS`, and the `keep_slowest` longest samples; besides, the `keep_recent` latest
samples, for percentiles over a recent window.  `add` costs a few comparisons and one
append, so it can run once per loop tick or per commit; nothing here does I/O or locks
(call it from one thread).
"""

from __future__ import annotations

import bisect
from collections import deque
from typing import Generic, Protocol, TypeVar

THRESHOLDS_MS = (10, 20, 50, 100, 1000)


class Timed(Protocol):
    @property
    def ms(self) -> float: ...


S = TypeVar("S", bound=Timed)


class Durations(Generic[S]):
    def __init__(self, keep_slowest: int = 10, keep_recent: int = 4096) -> None:
        self.count = 0
        self.total_ms = 0.0
        self.max_ms = 0.0
        self.over = [0] * len(THRESHOLDS_MS)  # over[i]: samples of at least THRESHOLDS_MS[i]
        self._keep_slowest = keep_slowest
        self._slowest: list[S] = []  # longest first
        self._recent: deque[S] = deque(maxlen=keep_recent)

    def add(self, sample: S) -> None:
        ms = sample.ms
        self.count += 1
        self.total_ms += ms
        self.max_ms = max(self.max_ms, ms)
        for i, threshold in enumerate(THRESHOLDS_MS):
            if ms < threshold:
                break
            self.over[i] += 1
        self._recent.append(sample)
        slowest = self._slowest
        if len(slowest) < self._keep_slowest or ms > slowest[-1].ms:
            # Kept longest first: the key is negated so bisect's ascending order fits.
            bisect.insort(slowest, sample, key=lambda s: -s.ms)
            del slowest[self._keep_slowest:]

    def slowest(self) -> list[S]:
        """The longest samples since the start, longest first."""
        return list(self._slowest)

    def recent(self, n: int) -> list[S]:
        """The latest `n` samples (fewer when fewer are kept), oldest first."""
        if n <= 0:
            return []
        kept = len(self._recent)
        return [self._recent[i] for i in range(max(0, kept - n), kept)]

    @property
    def mean_ms(self) -> float:
        return self.total_ms / self.count if self.count else 0.0

    def over_thresholds(self) -> list[tuple[int, int]]:
        """(threshold in ms, samples of at least that long), for each of THRESHOLDS_MS."""
        return list(zip(THRESHOLDS_MS, self.over, strict=True))
