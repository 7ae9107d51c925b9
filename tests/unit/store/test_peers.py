"""backend/store/peers.py's reads for backend.list, and the leases each epoch holds, on a real
SQLite file (the `backends` table created from its declaration: SQLite has none of its own)."""

from __future__ import annotations

import os
import socket

import pytest

from backend.store import leases, peers, schema
from backend.store.db import Database, Tx
from backend.store.leases import Holder
from backend.store.peers import PeerRecord

NOW = 1_800_000_000.0
DAY = 24 * 3600.0


@pytest.fixture
async def store(db: Database) -> Database:
    def create(tx: Tx) -> None:
        for statement in schema.pg_ddl(("backends",)):
            tx.execute(statement)

    await db.write(create)
    return db


def _row(tx: Tx, epoch: int, started: float, beat: float, stopped: int = 0,
         dead_at: float | None = None) -> None:
    tx.execute("INSERT INTO backends (epoch, host, pid, pid_start, boot_token, started_at, "
               "heartbeat_at, stopped, dead_at) VALUES (?, ?, ?, 'start', 'boot', ?, ?, ?, ?)",
               (epoch, f"host{epoch}", 1000 + epoch, started, beat, stopped, dead_at))


async def test_listing_reads_every_column_and_leaves_out_what_was_last_heard_of_before_since(
    store: Database,
) -> None:
    def fill(tx: Tx) -> None:
        _row(tx, 1, NOW - 3 * DAY, NOW - 2 * DAY, stopped=1)  # stopped two days ago
        _row(tx, 2, NOW - 2 * DAY, NOW - 2 * DAY + 5, dead_at=NOW - 2 * DAY + 13)  # long dead
        _row(tx, 3, NOW - 3600, NOW - 1)  # live
        _row(tx, 4, NOW - 600, NOW - 60, dead_at=NOW - 50)  # died a minute ago
        _row(tx, 5, NOW - 4 * DAY, NOW - 3 * DAY)  # silent for days: the asker itself, say

    await store.write(fill)
    recent = await store.read(lambda tx: peers.listing(tx, NOW - DAY, epoch=5))
    assert sorted(r.epoch for r in recent) == [3, 4, 5], "its own row whatever its age"
    every = await store.read(lambda tx: peers.listing(tx, None, epoch=5))
    assert sorted(r.epoch for r in every) == [1, 2, 3, 4, 5]
    four = next(r for r in every if r.epoch == 4)
    assert four == PeerRecord(epoch=4, host="host4", pid=1004, started_at=NOW - 600,
                              heartbeat_at=NOW - 60, stopped=False, dead_at=NOW - 50)
    assert next(r for r in every if r.epoch == 1).stopped is True


def _peer(beat: float, stopped: bool = False, dead_at: float | None = None) -> PeerRecord:
    return PeerRecord(epoch=1, host="h", pid=1, started_at=NOW - 100, heartbeat_at=beat,
                      stopped=stopped, dead_at=dead_at)


@pytest.mark.parametrize(("peer", "state"), [
    (_peer(NOW - 1), "live"),
    (_peer(NOW - 8), "live"),  # exactly dead_after_s: not yet
    (_peer(NOW + 2), "live"),  # its clock ahead of ours
    (_peer(NOW - 8.5), "silent"),
    (_peer(NOW - 20, dead_at=NOW - 5), "dead"),
    (_peer(NOW - 1, dead_at=NOW - 5), "dead"),  # beating again after it was declared: fenced
    (_peer(NOW - 1, stopped=True), "stopped"),
    (_peer(NOW - 20, stopped=True, dead_at=NOW - 5), "stopped"),  # it said goodbye itself
])
def test_state_judges_a_row_on_the_askers_clock(peer: PeerRecord, state: str) -> None:
    assert peer.state(NOW, dead_after_s=8) == state


def test_me_is_this_process_beating_now() -> None:
    me = peers.me(7, started_at=NOW - 30, now=NOW)
    assert (me.epoch, me.host, me.pid) == (7, socket.gethostname(), os.getpid())
    assert (me.started_at, me.heartbeat_at, me.state(NOW, 8)) == (NOW - 30, NOW, "live")


async def test_held_by_epoch_counts_unexpired_leases(db: Database) -> None:
    def take(tx: Tx) -> None:
        for session, epoch, expires_in in (("s1", 3, 60), ("s2", 3, 60), ("s3", 4, 60),
                                           ("s4", 4, -1), ("s5", 5, -60)):
            leases.put(tx, session, Holder(100, "start", "boot", epoch, f"t-{session}"),
                       NOW - 100, 100 + expires_in)

    await db.write(take)
    assert await db.read(lambda tx: leases.held_by_epoch(tx, NOW)) == {3: 2, 4: 1}
    assert await db.read(lambda tx: leases.held_by_epoch(tx, NOW + 3600)) == {}
