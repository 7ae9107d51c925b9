"""The store's typed records on a real migrated SQLite file, and the lease holder's one
text form (encode/decode) as both the turn lease and the compression lock store it."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from backend.host import boot_token, process_start
from backend.store import compression, leases, sessions
from backend.store.db import Database
from backend.store.leases import Holder, LeaseRecord, provably_dead

OTHER_BOOT = "00000000-0000-0000-0000-000000000000/pid:[4026531836]"


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    db = Database(tmp_path / "state.db")  # opened = migrated to the current schema
    await db.open()
    yield db
    await db.close()


# --- the holder ------------------------------------------------------------------------------


@pytest.mark.parametrize("holder", [
    Holder(1234, "98765", boot_token(), 3, "turn_0190abcdef012345abcdef"),
    Holder(7, "", "host-without-procfs/pidns", 0, "compress"),  # no start time known
    Holder(42, "1", OTHER_BOOT, 12, "turn_x"),  # a boot token holds ':' and '/'
])
def test_a_holder_decodes_to_itself(holder: Holder) -> None:
    text = holder.encode()
    assert Holder.decode(text) == holder
    assert Holder.decode(text).encode() == text


def test_the_stored_text_keeps_its_format() -> None:
    """Rows written by earlier versions hold this text; it must keep decoding."""
    text = "1234:98765@b00t-id/pid:[4026531836]#3/turn_abc"
    assert Holder.decode(text) == Holder(1234, "98765", "b00t-id/pid:[4026531836]", 3, "turn_abc")
    assert Holder(1234, "98765", "b00t-id/pid:[4026531836]", 3, "turn_abc").encode() == text


@pytest.mark.parametrize("text", ["", "garbage", "12:34@boot", "x:1@b#2/t", "1:2@b#e/t"])
def test_a_text_that_is_no_holder_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="not a lease holder"):
        Holder.decode(text)


def test_here_is_this_process() -> None:
    h = Holder.here(5, "turn_1")
    assert h == Holder(os.getpid(), process_start(os.getpid()), boot_token(), 5, "turn_1")
    assert not provably_dead(h)


def test_provably_dead() -> None:
    proc = subprocess.Popen(["true"])
    proc.wait()  # exited and reaped: its pid is free
    assert provably_dead(Holder(proc.pid, "12345", boot_token(), 1, "t"))
    assert not provably_dead(Holder(proc.pid, "12345", OTHER_BOOT, 1, "t")), "not judged elsewhere"
    assert provably_dead(Holder(os.getpid(), "1", boot_token(), 1, "t")), "a reused pid"
    assert not provably_dead(Holder(os.getpid(), "", boot_token(), 1, "t")), "start unknown"


async def test_a_lease_round_trips_through_the_table(db: Database) -> None:
    holder = Holder(4321, "555", OTHER_BOOT, 2, "turn_a")
    now = time.time()
    await db.write(lambda tx: sessions.insert(tx, "s", "t", "/", "m"))
    await db.write(lambda tx: leases.put(tx, "s", holder, now, 30.0))
    lease = await db.read(lambda tx: leases.current(tx, "s"))
    assert lease == LeaseRecord("s", holder, now, now + 30.0)
    raw = await db.read(lambda tx: tx.one(
        "SELECT holder, pid, boot_token, epoch, turn_id FROM turn_leases"))
    assert raw is not None
    assert tuple(raw) == (holder.encode(), 4321, OTHER_BOOT, 2, "turn_a")
    assert await db.read(leases.all_rows) == [lease]
    assert await db.write(lambda tx: leases.refresh(tx, "s", holder, now + 60.0))
    other = Holder(4321, "555", OTHER_BOOT, 2, "turn_b")
    assert not await db.write(lambda tx: leases.refresh(tx, "s", other, now + 90.0))
    await db.write(lambda tx: leases.release(tx, "s", other))
    assert (await db.read(lambda tx: leases.current(tx, "s"))) == LeaseRecord(
        "s", holder, now, now + 60.0), "another holder's release is a no-op"
    await db.write(lambda tx: leases.release(tx, "s", holder))
    assert await db.read(lambda tx: leases.current(tx, "s")) is None


async def test_a_compression_lock_round_trips_through_the_table(db: Database) -> None:
    holder = Holder.here(9, "compress")
    await db.write(lambda tx: sessions.insert(tx, "s", "t", "/", "m"))
    await db.write(lambda tx: compression.put_lock(tx, "s", holder, 60.0))
    lock = await db.read(lambda tx: compression.lock_row(tx, "s"))
    assert lock is not None
    assert (lock.session_id, lock.holder) == ("s", holder)
    assert lock.expires_at == pytest.approx(lock.acquired_at + 60.0)
    raw = await db.read(lambda tx: tx.one("SELECT pid, boot_token FROM compression_locks"))
    assert raw is not None
    assert tuple(raw) == (os.getpid(), boot_token())
