"""Processes seen through /proc, for tests of what a command leaves running."""

from __future__ import annotations

import asyncio
import secrets
import time
from pathlib import Path


def unique_sleep(seconds: int) -> str:
    """`sleep N.DDDDDDDD`: a command line no other process on the machine has, so a test that
    finds processes by it never counts another run's (tests run side by side on one host).
    Append a digit to tell several of a test's own sleeps apart; the prefix finds them all."""
    return f"sleep {seconds}.{secrets.randbelow(10**8):08d}"


def running(token: str) -> list[int]:
    """Pids whose command line contains ``token`` (bwrap's own, which names the command, too)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if token in cmdline:
                found.append(int(entry.name))
    return found


async def wait_running(token: str, count: int, timeout: float = 10.0) -> list[int]:
    """Polls until at least ``count`` such processes run (or the time is up); returns them."""
    deadline = time.monotonic() + timeout
    while len(found := running(token)) < count and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    return found


def started(cmdline: str) -> list[int]:
    """Pids whose whole command line is ``cmdline`` (`sleep 61.5`: the program itself, not a
    shell or bubblewrap whose arguments merely name it)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().rstrip(b"\0").split(b"\0")
            except OSError:
                continue
            if b" ".join(argv).decode(errors="replace") == cmdline:
                found.append(int(entry.name))
    return found


async def wait_started(*cmdlines: str, timeout: float = 10.0) -> bool:
    """Polls until a process runs each of ``cmdlines`` exactly (see `started`)."""
    deadline = time.monotonic() + timeout
    while not all(started(c) for c in cmdlines):
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(0.02)
    return True


async def wait_gone(token: str, timeout: float = 5.0) -> list[int]:
    """Polls until no such process runs (or the time is up); returns what still runs."""
    deadline = time.monotonic() + timeout
    while (found := running(token)) and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    return found
