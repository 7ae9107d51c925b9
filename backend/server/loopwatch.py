"""The loop watch: how late the backend's event loop wakes, i.e. how long something blocked it;
and the GC watch: how long the cyclic garbage collector's older-generation passes stopped every
thread.  `backend.stats` reports both, the store writer's lock holds, and the fleet counters
(backend/store/fenced.py: takeovers and fenced writes between backends on one store).

A task sleeps `interval_s` at a time and records how much later than due it woke: a
callback that holds the loop for 30 ms delays the next wake-up by up to 30 ms.  It ticks
every `interval_s` (20 ms) while `busy()` holds (turns running or queued) and every
`IDLE_INTERVAL_S` otherwise, so an idle backend wakes about once a second for it.  A stall
shorter than the tick may fall between two wake-ups; one at least a tick long cannot.

A collection runs in whichever thread allocated last, holding the GIL throughout: a
generation-2 pass over a big heap is a stall of the loop, or of the store's writer while it
holds the write lock.  Only generations 1 and 2 are timed; generation 0 runs hundreds of
times a second and is short.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
from collections.abc import Callable
from typing import Any

from backend import wire
from backend.store import fenced
from backend.store.db import Hold
from shared import protocol as p
from shared.durations import Durations
from shared.protocol import GcPause, LagSample

INTERVAL_S = 0.02
IDLE_INTERVAL_S = 1.0


class LoopWatch:
    def __init__(self, busy: Callable[[], bool] = lambda: True, interval_s: float = INTERVAL_S) -> None:
        self.interval_s = interval_s
        self.lags: Durations[LagSample] = Durations()
        self._busy = busy
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="loop-watch")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            interval = self.interval_s if self._busy() else IDLE_INTERVAL_S
            due = loop.time() + interval
            await asyncio.sleep(interval)
            late = max(0.0, loop.time() - due)
            self.lags.add(LagSample(at=time.monotonic(), ms=late * 1000))


class GcWatch:
    def __init__(self) -> None:
        self.pauses: Durations[GcPause] = Durations()
        self._started = 0.0

    def start(self) -> None:
        if self._callback not in gc.callbacks:
            gc.callbacks.append(self._callback)

    def stop(self) -> None:
        if self._callback in gc.callbacks:
            gc.callbacks.remove(self._callback)

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        # Collections never overlap (the collector holds the GIL and does not nest), so
        # start and stop pair up and `pauses` is only ever changed by one thread at a time.
        generation = info["generation"]
        if generation == 0:
            return
        now = time.monotonic()
        if phase == "start":
            self._started = now
        elif self._started:
            self.pauses.add(GcPause(at=now, ms=(now - self._started) * 1000, generation=generation,
                                    collected=info.get("collected", 0)))
            self._started = 0.0


class BackendStats:
    """`backend.stats`: the loop's lag, the store writer's lock holds, the GC's pauses and the
    fleet counters."""

    def __init__(self, loop_watch: LoopWatch, gc_watch: GcWatch, holds: Durations[Hold]) -> None:
        self.loop_watch = loop_watch
        self.gc_watch = gc_watch
        self.holds = holds
        self._started = time.monotonic()

    def report(self, recent: int) -> p.BackendStatsResult:
        lags, holds, pauses = self.loop_watch.lags, self.holds, self.gc_watch.pauses
        return p.BackendStatsResult(
            now=time.monotonic(), uptime_s=time.monotonic() - self._started,
            loop=p.LoopStats(
                interval_ms=self.loop_watch.interval_s * 1000, count=lags.count, max_ms=lags.max_ms,
                mean_ms=lags.mean_ms, over=_over(lags), slowest=lags.slowest(),
                recent=lags.recent(recent),
            ),
            writer=p.WriterStats(
                count=holds.count, max_ms=holds.max_ms, mean_ms=holds.mean_ms, over=_over(holds),
                slowest=[wire.hold(h) for h in holds.slowest()],
                recent=[wire.hold(h) for h in holds.recent(recent)],
            ),
            gc=p.GcStats(
                count=pauses.count, max_ms=pauses.max_ms, mean_ms=pauses.mean_ms, over=_over(pauses),
                slowest=pauses.slowest(), recent=pauses.recent(recent),
            ),
            fleet=p.FleetStats(takeovers=fenced.COUNTS.takeovers,
                               fenced_writes=fenced.COUNTS.fenced_writes),
        )


def _over(durations: Durations[Any]) -> list[p.Threshold]:
    return [p.Threshold(ms=ms, count=n) for ms, n in durations.over_thresholds()]
