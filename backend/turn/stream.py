"""Coalescing streamed deltas into stored `message.delta` events.

The first delta after a quiet spell is stored at once (a call's very first one
after `GRACE_S`, unless the stream ends first: then the turn's closing commit
stores it); while text keeps coming, it is gathered for at most `interval` (and
while the previous event's commit is in flight), so a fast model does not turn
every token into a row and a frame.  The interval is this short so that a delta reaches clients within the
10 ms p99 budget (docs/ARCHITECTURE.md, "Budgets"); under load, commits
take longer and batches grow by themselves.

A batch is stored as as many events as it takes for no event's data to pass
`MAX_DELTA_BYTES`: one huge delta (a provider may send a whole answer in one
piece) never becomes one huge row, nor one huge frame to every subscriber.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable

INTERVAL_S = 0.005
# How long a call's first delta waits for the stream to end before it is stored: a short
# answer that ends meanwhile is stored by the turn's closing commit instead of one of its own
# (close(hand_over=True)).  Well under what people notice of a first word, and of the 10 ms
# delta budget.
GRACE_S = 0.002
MAX_DELTA_BYTES = 64 * 1024  # a stored message.delta's data, {"text": ...} as JSON


def pieces(text: str, limit: int = MAX_DELTA_BYTES) -> list[str]:
    """`text` cut in order into the fewest pieces whose stored form, `{"text": piece}` as
    JSON with non-ASCII escaped (1 to 12 bytes a character), is at most `limit` bytes."""
    room = limit - len(json.dumps({"text": ""}))
    out: list[str] = []
    start = 0
    while start < len(text):
        # Escaped sizes add up character by character, so a piece grows by spans that fit,
        # halving the span on a miss: it ends when not one more character fits.
        end, size, span = start, 0, room
        while span and end < len(text):
            grown = len(json.dumps(text[end:end + span])) - 2
            if size + grown <= room:
                end, size = min(end + span, len(text)), size + grown
            else:
                span //= 2
        end = max(end, start + 1)  # a limit under one character's size: one a piece
        out.append(text[start:end])
        start = end
    return out


class DeltaWriter:
    def __init__(self, write: Callable[[str], Awaitable[None]], interval: float = INTERVAL_S,
                 grace: float = GRACE_S) -> None:
        self._write = write
        self._interval = interval
        self._grace = grace
        self._buffer: list[str] = []
        self._pending = asyncio.Event()
        self._closing = asyncio.Event()
        self._last = 0.0
        self._task: asyncio.Task[None] | None = None
        self._streamed: list[str] = []  # joined on demand: += would copy the answer per delta

    @property
    def streamed(self) -> str:
        """Everything added so far, in order."""
        if len(self._streamed) > 1:
            self._streamed[:] = ["".join(self._streamed)]
        return self._streamed[0] if self._streamed else ""

    def add(self, text: str) -> None:
        if not text:
            return
        self._streamed.append(text)
        self._buffer.append(text)
        self._pending.set()
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="delta-writer")

    async def close(self, hand_over: bool = False) -> str:
        """Stores whatever is buffered; after this, stored deltas join to `streamed`.

        `hand_over`: the text not yet on its way to the store is returned instead of stored,
        for the caller's next commit to store (a turn's final answer: its closing commit,
        turn/finalize.py, so the answer's end costs one commit, not two).  A write already
        under way is waited for, so what is returned comes after every stored delta."""
        left = ""
        if hand_over:
            left = "".join(self._buffer)
            self._buffer.clear()
        self._closing.set()
        self._pending.set()
        if self._task is not None:
            await self._task
        return left

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self._pending.wait()
            # A call's first delta waits the grace: the stream may end within it.
            delay = self._last + self._interval - loop.time() if self._last else self._grace
            if delay > 0 and not self._closing.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._closing.wait(), delay)
            self._pending.clear()
            text = "".join(self._buffer)
            self._buffer.clear()
            for piece in pieces(text):
                await self._write(piece)
            self._last = loop.time()
            if self._closing.is_set() and not self._buffer:
                return
