"""The loop watch: how late the backend's event loop wakes, i.e. how long something blocked it.

A task sleeps `interval_s` at a time and records how much later than due it woke: a
callback that holds the loop for 30 ms delays the next wake-up by up to 30 ms.  It ticks
every `interval_s` (20 ms) while `busy()` holds (turns running or queued) and every
`IDLE_INTERVAL_S` otherwise, so an idle backend wakes about once a second for it.  A stall
shorter than the tick may fall between two wake-ups; one at least a tick long cannot.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

from shared.durations import Durations
from shared.protocol import LagSample

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
