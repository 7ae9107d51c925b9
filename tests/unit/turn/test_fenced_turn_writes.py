"""Each kind of write a running turn makes, by a turn whose lease was taken over meanwhile:
refused (LeaseLost), nothing of it stored, and counted.  The same writes by the holder go
through.  A real SQLite store; the lease is taken the way another process takes it."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from backend import wire
from backend.config import ConfigFile
from backend.errors import LeaseLost
from backend.store import admissions, leases, messages, sessions
from backend.store.db import Database, Tx
from backend.store.fenced import COUNTS, TurnFence
from backend.store.leases import Holder
from backend.tools.approvals import Approvals
from backend.tools.base import Guard
from backend.tools.checkpoints import Checkpoints
from backend.turn.finalize import TurnEnd, close_turn
from shared.protocol import TextDelta, Usage

ME = Holder(pid=1, pid_start="then", boot_token="boot", epoch=1, turn_id="turn_1")
THIEF = Holder(pid=2, pid_start="now", boot_token="elsewhere", epoch=2, turn_id="turn_2")


@dataclass
class Turn:
    session_id: str
    holder: Holder


def started(tx: Tx) -> None:
    sessions.insert(tx, "s", "t", "/", "m")
    admissions.insert(tx, "adm_1", "p", "s", "r1", '{"text": "hi"}', "d")
    admissions.mark_started(tx, "adm_1", 1, "turn_1")
    leases.put(tx, "s", ME, time.time(), 300)
    messages.insert(tx, "s", "user", "hi", turn_id="turn_1")


def stored(tx: Tx) -> tuple[Any, ...]:
    """Everything a turn's writes could have touched."""
    return tuple(tuple(tuple(r) for r in tx.all(f"SELECT * FROM {table} ORDER BY 1"))
                 for table in ("events", "messages", "admissions", "approvals", "checkpoints",
                               "usage"))


async def delta(fence: TurnFence, tmp_path: Path) -> None:
    await fence.write(lambda tx: wire.emit(tx, "s", TextDelta(text="more"), turn_id="turn_1",
                                           admission_id="adm_1"))


async def delta_queued(fence: TurnFence, tmp_path: Path) -> None:
    await fence.enqueue(lambda tx: wire.emit(tx, "s", TextDelta(text="more"), turn_id="turn_1",
                                             admission_id="adm_1"))


async def result_row(fence: TurnFence, tmp_path: Path) -> None:
    await fence.write(lambda tx: messages.insert(tx, "s", "tool", "done", turn_id="turn_1",
                                                 status="ok", call_id="c1", tool_name="terminal"))


async def checkpoint(fence: TurnFence, tmp_path: Path) -> None:
    await Checkpoints(fence.db, tmp_path).save(fence, "turn_1", "c1", tmp_path / "f.txt", b"old")


async def approval(fence: TurnFence, tmp_path: Path) -> None:
    config = ConfigFile(tmp_path / "config.toml")
    config.load()
    await Approvals(fence.db, config, 1).ask(
        fence=fence, turn_id="turn_1", call_id="c1", tool="terminal", summary="rm -rf x",
        guard=Guard("dangerous", "deletes files", "rm"))


async def end(fence: TurnFence, tmp_path: Path) -> None:
    outcome = TurnEnd("s", "adm_1", "turn_1", "completed", "the answer", Usage(), holder=ME)
    await fence.write_patiently(lambda tx: close_turn(tx, outcome), (0.01,))


WRITES: dict[str, Callable[[TurnFence, Path], Awaitable[None]]] = {
    "a delta": delta, "a delta, queued": delta_queued, "a tool result": result_row,
    "a checkpoint": checkpoint, "an approval request": approval, "the turn's end": end,
}


@pytest.mark.parametrize("kind", list(WRITES))
async def test_a_turn_taken_over_writes_nothing(db: Database, tmp_path: Path, kind: str) -> None:
    await db.write(started)
    fence = TurnFence(db, Turn("s", ME))
    await db.write(lambda tx: leases.put(tx, "s", THIEF, time.time(), 300))  # taken over
    before, counted = await db.read(stored), COUNTS.fenced_writes
    with pytest.raises(LeaseLost):
        await WRITES[kind](fence, tmp_path)
    assert await db.read(stored) == before
    assert COUNTS.fenced_writes == counted + 1


@pytest.mark.parametrize("kind", [k for k in WRITES if k != "an approval request"])
async def test_the_holder_writes(db: Database, tmp_path: Path, kind: str) -> None:
    await db.write(started)
    before = await db.read(stored)
    await WRITES[kind](TurnFence(db, Turn("s", ME)), tmp_path)
    assert await db.read(stored) != before


async def test_an_end_whose_admission_was_settled_by_the_taker_is_refused(
    db: Database, tmp_path: Path,
) -> None:
    """Even with the lease back in its name (a taker that finished and left), a turn whose
    admission is no longer its `started` one writes no end."""
    await db.write(started)
    await db.write(lambda tx: admissions.mark_unknown(tx, "adm_1"))
    before = await db.read(stored)
    with pytest.raises(LeaseLost):
        await end(TurnFence(db, Turn("s", ME)), tmp_path)
    assert await db.read(stored) == before
