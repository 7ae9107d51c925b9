"""Running work unless a stop event comes first — the one race every stage of a turn runs."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


async def unless_stopped(work: Coroutine[Any, Any, T], stop: asyncio.Event) -> tuple[bool, T | None]:
    """(True, result) when `work` finishes first (its exception, if any, propagates);
    (False, None) when `stop` is set first, after `work` was cancelled and has ended."""
    task = asyncio.ensure_future(work)
    halted = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({task, halted}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        halted.cancel()
    if task.done():
        return True, task.result()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task  # whatever it raises while unwinding is moot: it was stopped
    return False, None
