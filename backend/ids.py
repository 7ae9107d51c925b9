"""Identifiers and timestamps: time-ordered ids and RFC 3339 UTC strings."""

from __future__ import annotations

import os
import threading
import time
from datetime import UTC, datetime


def now() -> str:
    """The current time as RFC 3339 UTC with milliseconds, e.g. 2026-11-29T18:00:00.123Z."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def stamp(epoch_s: float) -> str:
    """An instant (seconds since the epoch) written as `now` writes one: one fixed format, so
    two such stamps compare as text in time order."""
    return datetime.fromtimestamp(epoch_s, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def instant(text: str) -> float:
    """Seconds since the epoch of an RFC 3339 stamp (`now`'s, or any with an offset)."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


_last = [0, 0]  # the ms clock and the 48-bit tail of the latest id made in this process
_ids_lock = threading.Lock()


def new_id(prefix: str) -> str:
    """A unique id that sorts by creation time: prefix, 12 hex of ms clock, 12 hex tail.

    The tail is random, except within one millisecond (or when the clock steps back): then
    it is the previous id's tail plus one, so ids made by this process always sort in the
    order they were made (two tokens created in the same ms used to list in random order).
    """
    with _ids_lock:
        ms = max(int(time.time() * 1000), _last[0])
        if ms == _last[0] and _last[1] < (1 << 48) - 1:
            tail = _last[1] + 1
        else:
            ms = max(ms, _last[0] + (ms == _last[0]))  # a full tail moves to the next ms
            tail = int.from_bytes(os.urandom(6), "big") >> 1  # room to count up within the ms
        _last[0], _last[1] = ms, tail
    return f"{prefix}_{ms:012x}{tail:012x}"


def message_id(rowid: int) -> str:
    """Message ids are zero-padded row ids, so they sort as strings in transcript order."""
    return f"{rowid:016d}"


def message_rowid(message_id: str) -> int:
    """Inverse of message_id; raises ValueError for a string that is not one."""
    if not message_id.isdigit():
        raise ValueError(message_id)
    return int(message_id)
