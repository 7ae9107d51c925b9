"""Identifiers and timestamps: time-ordered ids and RFC 3339 UTC strings."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime


def now() -> str:
    """The current time as RFC 3339 UTC with milliseconds, e.g. 2026-11-29T18:00:00.123Z."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def new_id(prefix: str) -> str:
    """A unique id that sorts by creation time: prefix, 12 hex of ms clock, 12 hex random."""
    return f"{prefix}_{int(time.time() * 1000):012x}{os.urandom(6).hex()}"


def message_id(rowid: int) -> str:
    """Message ids are zero-padded row ids, so they sort as strings in transcript order."""
    return f"{rowid:016d}"


def message_rowid(message_id: str) -> int:
    """Inverse of message_id; raises ValueError for a string that is not one."""
    if not message_id.isdigit():
        raise ValueError(message_id)
    return int(message_id)
