"""A running call's live output: what it prints, cut into `tool.progress` chunks, rate-limited and bounded.

A tool hands the executor its output as it comes (`ToolContext.progress`);
clients append the chunks in order and so see the output as a stream.  This
module decides what goes into each chunk.  It does no I/O and reads time only
through its clock, so its rules are tested without processes or sockets.
The rules, per call:

- A chunk goes out at most every `FLUSH_S` (in practice once per executor tick,
  100 ms) and holds everything printed since the last one, up to `CHUNK_BYTES`.
- At most `RATE_BYTES` a second on average (a token bucket), and `BUDGET_BYTES`
  in all; once that is spent, one chunk of at most `SLOW_BYTES` every
  `SLOW_FLUSH_S`.  Each chunk is stored as an event (clients replay them after
  a reconnect), so these bound what one call adds to the events table as well
  as what subscribers are sent.  A chunk counts at least `EVENT_COST` bytes, so
  a trickle of tiny chunks spends the budget too.
- What cannot be sent in time (more than `BACKLOG_BYTES` waiting: a second's
  worth at the full rate) is skipped: the oldest goes, from a line start where
  one is near, and the next chunk starts with one marker line saying how much
  was skipped, then goes on with the newest output.
- The end is always sent (`take(final=True)` until it returns None), so the
  live tail ends as the output does.
- Whatever the tool prints, no more than about `BACKLOG_BYTES` is held.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

FLUSH_S = 0.09  # just under the executor's tick (0.1 s), so that each tick may send one
CHUNK_BYTES = 16 * 1024  # the most text in one chunk (one row, one frame)
RATE_BYTES = 64 * 1024  # a second, sustained: a fast terminal's worth, far more than anyone reads
BUDGET_BYTES = 1024 * 1024  # a call's live output at the full rate; then the slow lane
EVENT_COST = 512  # what one chunk costs the budget at least (its row, its frame)
SLOW_FLUSH_S = 2.0
SLOW_BYTES = 1024  # a chunk in the slow lane: the newest dozen lines or so
BACKLOG_BYTES = 64 * 1024  # printed, not sent yet: older output than this is skipped
ALIGN_CHARS = 4096  # a skip ends at the next line start if there is one this near


@dataclass(frozen=True)
class Chunk:
    """One `tool.progress` event's text.  `elided_bytes`: output skipped just before `text`,
    whose first line is then the marker that says so."""

    text: str
    elided_bytes: int = 0


def utf8_len(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def head_of(text: str, limit: int) -> str:
    """The longest start of `text` of at most `limit` UTF-8 bytes (whole characters)."""
    piece = text[:limit]
    size = utf8_len(piece)
    while size > limit:  # up to 4 bytes a character: drop at least a quarter of the excess
        piece = piece[:len(piece) - max(1, (size - limit) // 4)]
        size = utf8_len(piece)
    return piece


def tail_of(text: str, limit: int) -> str:
    """The longest end of `text` of at most `limit` UTF-8 bytes (whole characters)."""
    piece = text[-limit:] if limit else ""
    size = utf8_len(piece)
    while size > limit:
        piece = piece[max(1, (size - limit) // 4):]
        size = utf8_len(piece)
    return piece


def marker(lines: int, size: int) -> str:
    """The line that stands for skipped output."""
    what = f"{lines:,} line{'' if lines == 1 else 's'} ({human_bytes(size)})" if lines \
        else human_bytes(size)
    return f"… {what} not shown live; see the result …\n"


def human_bytes(size: int) -> str:
    for unit, scale in (("GB", 1024 ** 3), ("MB", 1024 ** 2), ("KB", 1024)):
        if size >= scale:
            return f"{size / scale:,.1f} {unit}"
    return f"{size:,} byte{'' if size == 1 else 's'}"


class LiveOutput:
    """One call's output on its way to clients: `write` what the tool prints (cheap, never
    blocks), `take` a chunk to send when the caller's tick comes; see the module docstring."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._pending = ""  # printed, not sent yet
        self._skipped_bytes = 0  # skipped since the last chunk: its marker says how much
        self._skipped_lines = 0
        self._tokens = float(CHUNK_BYTES)
        self._refilled = clock()
        self._sent_at = -math.inf
        self._line_start = True  # what was sent so far ends with a newline (or is nothing)
        self.spent = 0  # charged against BUDGET_BYTES

    @property
    def pending(self) -> bool:
        return bool(self._pending or self._skipped_bytes)

    @property
    def held_bytes(self) -> int:
        """Unsent output held now: at most about BACKLOG_BYTES."""
        return utf8_len(self._pending)

    def write(self, text: str) -> None:
        """Adds what the tool printed; the oldest unsent output goes past BACKLOG_BYTES."""
        if not text:
            return
        if utf8_len(text) >= BACKLOG_BYTES:  # a flood: what is waiting goes whole, uncopied
            self._skip(self._pending, len(self._pending))
            self._pending = text
        else:
            self._pending += text
        self._keep(BACKLOG_BYTES)

    def take(self, final: bool = False) -> Chunk | None:
        """The chunk to send now, or None (too soon, nothing new, no allowance left).

        `final`: the tool has finished; call it until it returns None, which sends what is
        left (at most BACKLOG_BYTES) whatever the rate and the budget.
        """
        now = self._clock()
        slow = self.spent >= BUDGET_BYTES
        if not final and now - self._sent_at < (SLOW_FLUSH_S if slow else FLUSH_S):
            return None
        self._tokens = min(float(CHUNK_BYTES), self._tokens + (now - self._refilled) * RATE_BYTES)
        self._refilled = now
        if final:
            room = CHUNK_BYTES
        elif slow:
            room = SLOW_BYTES
            self._keep(SLOW_BYTES)  # the slow lane shows the newest, not a minute-old backlog
        else:
            room = min(CHUNK_BYTES, int(self._tokens))
        if not self.pending or room <= 0:
            return None
        body = head_of(self._pending, room)
        if not body and not self._skipped_bytes:
            return None  # not even one character fits yet
        self._pending = self._pending[len(body):]
        return self._chunk(self._marker() + body, now)

    def _chunk(self, text: str, now: float) -> Chunk:
        elided = self._skipped_bytes
        self._skipped_bytes = self._skipped_lines = 0
        size = utf8_len(text)
        self._tokens -= size
        self.spent += max(size, EVENT_COST)
        self._sent_at = now
        if text:
            self._line_start = text.endswith("\n")
        return Chunk(text, elided)

    def _marker(self) -> str:
        if not self._skipped_bytes:
            return ""
        lead = "" if self._line_start else "\n"  # the marker gets a line of its own
        return lead + marker(self._skipped_lines, self._skipped_bytes)

    def _keep(self, limit: int) -> None:
        """Skips the oldest unsent output until at most `limit` bytes are left, on to the
        next line start when one is within ALIGN_CHARS."""
        pending = self._pending
        if utf8_len(pending) <= limit:
            return
        cut = len(pending) - len(tail_of(pending, limit))
        if pending[cut - 1] != "\n":
            newline = pending.find("\n", cut, cut + ALIGN_CHARS)
            if newline >= 0:
                cut = newline + 1
        self._skip(pending, cut)
        self._pending = pending[cut:]

    def _skip(self, text: str, end: int) -> None:
        """Counts `text[:end]` as skipped (without copying it when it is ASCII)."""
        if end <= 0:
            return
        self._skipped_bytes += end if text.isascii() else utf8_len(text[:end])
        self._skipped_lines += text.count("\n", 0, end)
