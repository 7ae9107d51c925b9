"""backend/server/loopwatch.py: a call that blocks the loop shows up as lag; backend.stats
reports the fleet counters."""

from __future__ import annotations

import asyncio
import gc
import time

import pytest

from backend.server.loopwatch import IDLE_INTERVAL_S, BackendStats, GcWatch, LoopWatch
from backend.store import fenced
from shared.durations import Durations

BLOCK_S = 0.1
TICK_S = 0.02


async def test_a_blocking_call_on_the_loop_shows_up_as_lag() -> None:
    watch = LoopWatch(interval_s=TICK_S)
    watch.start()
    try:
        await asyncio.sleep(3 * TICK_S)  # the watch is asleep in a tick
        time.sleep(BLOCK_S)  # noqa: ASYNC251  (holds the loop on purpose, as a slow callback would)
        await asyncio.sleep(2 * TICK_S)
    finally:
        await watch.stop()
    # The wake-up due first after the block started came at least BLOCK_S - TICK_S late.
    assert watch.lags.max_ms >= (BLOCK_S - TICK_S) * 1000
    [slowest, *_] = watch.lags.slowest()
    assert slowest.ms == watch.lags.max_ms
    assert watch.lags.count >= 3


async def test_idle_it_ticks_slowly_and_stops_cleanly() -> None:
    busy = False
    watch = LoopWatch(lambda: busy, interval_s=TICK_S)
    watch.start()
    await asyncio.sleep(5 * TICK_S)
    assert watch.lags.count == 0, f"idle, the first tick is {IDLE_INTERVAL_S} s away"
    await watch.stop()
    await watch.stop()  # twice is harmless


def test_the_gc_watch_times_older_generation_passes_only() -> None:
    watch = GcWatch()
    watch.start()
    try:
        watch.start()  # once only
        gc.collect(0)
        assert watch.pauses.count == 0, "generation 0 is not timed"
        junk: list[object] = []
        junk.append(junk)  # a cycle for the collector to free
        del junk
        gc.collect()
    finally:
        watch.stop()
    gc.collect()
    assert watch.pauses.count == 1
    [pause] = watch.pauses.recent(1)
    assert pause.generation == 2
    assert pause.collected >= 1
    assert pause.ms >= 0


def test_backend_stats_report_the_fleet_counters(monkeypatch: pytest.MonkeyPatch) -> None:
    """backend.stats reads the counters the turn's fencing and the takeover keep."""
    monkeypatch.setattr(fenced, "COUNTS", fenced.FleetCounts(takeovers=2, fenced_writes=5))
    report = BackendStats(LoopWatch(), GcWatch(), Durations()).report(0)
    assert (report.fleet.takeovers, report.fleet.fenced_writes) == (2, 5)
