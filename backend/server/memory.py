"""Handing memory the process has freed back to the operating system, where the C library can."""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
from collections.abc import Callable


def _load_trim() -> Callable[[int], int] | None:
    """glibc's malloc_trim, or None (musl, macOS, Windows: nothing to call)."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        trim = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


_trim = _load_trim()
_scheduled = False


def give_back() -> None:
    """Asks the allocator to return free pages, once per loop turn however often it is called.

    glibc keeps freed heap memory for reuse, so the megabytes a dropped client had queued
    would otherwise stay in the backend's RSS, where people and monitors look.
    """
    global _scheduled
    if _trim is None or _scheduled:
        return
    _scheduled = True
    asyncio.get_running_loop().call_soon(_run)


def _run() -> None:
    global _scheduled
    _scheduled = False
    assert _trim is not None
    _trim(0)
