"""Coalescing streamed deltas into stored `message.delta` events.

The first delta after a quiet spell is stored at once; while text keeps
coming, it is gathered for at most `interval` (and while the previous event's
commit is in flight), so a fast model does not turn every token into a row and
a frame.  The interval is well under the contract's ~50 ms so that a delta
reaches clients within the 10 ms budget (ARCHITECTURE §8); under load, commits
take longer and batches grow by themselves.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

INTERVAL_S = 0.005


class DeltaWriter:
    def __init__(self, write: Callable[[str], Awaitable[None]], interval: float = INTERVAL_S) -> None:
        self._write = write
        self._interval = interval
        self._buffer: list[str] = []
        self._pending = asyncio.Event()
        self._closing = asyncio.Event()
        self._last = 0.0
        self._task: asyncio.Task[None] | None = None
        self.streamed = ""

    def add(self, text: str) -> None:
        if not text:
            return
        self.streamed += text
        self._buffer.append(text)
        self._pending.set()
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="delta-writer")

    async def close(self) -> None:
        """Stores whatever is buffered; after this, stored deltas join to `streamed`."""
        self._closing.set()
        self._pending.set()
        if self._task is not None:
            await self._task

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self._pending.wait()
            delay = self._last + self._interval - loop.time()
            if delay > 0 and not self._closing.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._closing.wait(), delay)
            self._pending.clear()
            text = "".join(self._buffer)
            self._buffer.clear()
            if text:
                await self._write(text)
            self._last = loop.time()
            if self._closing.is_set() and not self._buffer:
                return
