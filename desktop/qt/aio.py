"""Running coroutines from Qt slots without blocking the GUI thread."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from shared import logs
from shared.client import ConnectionLost, RpcError

log = logging.getLogger("desktop")

_tasks: set[asyncio.Task[Any]] = set()


def spawn(coro: Coroutine[Any, Any, Any], on_error: Callable[[str], None] | None = None) -> asyncio.Task[Any]:
    """Schedules `coro` on the running (qasync) loop and keeps it alive until done.

    A failure is handed to `on_error`, when given, as words a person can read (the
    backend's message for an RPC error).  Anything else than an RPC error, a lost
    connection or a timeout is a bug here: it is logged with an error id, and the
    words quote the id."""
    task = asyncio.ensure_future(coro)
    _tasks.add(task)

    def done(t: asyncio.Task[Any]) -> None:
        _tasks.discard(t)
        if t.cancelled():
            return
        exc = t.exception()
        if exc is None:
            return
        words = describe(exc)
        if not isinstance(exc, RpcError | ConnectionLost | TimeoutError):
            error_id = logs.new_error_id()
            log.error("background task failed: %s", words, exc_info=exc, extra={"error_id": error_id})
            words = f"{words} (an internal error; the desktop log has details under error_id {error_id})"
        else:  # shown to the person, or nowhere: either way the desktop log has it
            log.warning("background task failed: %s", words)
        if on_error is not None:
            on_error(words)

    task.add_done_callback(done)
    return task


def describe(exc: BaseException) -> str:
    if isinstance(exc, RpcError):
        return exc.message
    if isinstance(exc, ConnectionLost):
        return "The connection to the Turnkey service dropped; it is reconnecting. Try again in a moment."
    if isinstance(exc, TimeoutError):
        return "The Turnkey service did not answer in time. Try again in a moment."
    return str(exc) or type(exc).__name__


def pending() -> int:
    return len(_tasks)


async def settle(timeout: float = 2.0) -> None:
    """Waits (up to `timeout`) for the calls already started, e.g. before closing the connection."""
    try:
        current = asyncio.current_task()
    except RuntimeError:  # the loop is gone already (the display died): nothing to wait for
        return
    others = [t for t in _tasks if t is not current]
    if others:
        await asyncio.wait(others, timeout=timeout)
