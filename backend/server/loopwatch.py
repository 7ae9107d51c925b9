"""The loop watch: how late the backend's event loop wakes, i.e. how long something blocked it;
and the GC watch: how long the cyclic garbage collector's older-generation passes stopped every
thread.

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
