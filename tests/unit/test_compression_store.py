"""Compression's durable state on a real migrated SQLite file: the per-session lock as the
compressor takes it (through `Database.write`), the guards, `leaf` and `move_queue`."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from backend.compress.compressor import Compressor
from backend.config import ConfigFile
from backend.host import boot_token, process_start
from backend.ids import new_id
from backend.providers.base import ChatRequest, TextChunk, UsageChunk
from backend.providers.registry import ConfiguredProvider, Providers
from backend.secrets import Secrets
from backend.store import admissions, messages, sessions
from backend.store import compression as store
from backend.store.db import Database, SqliteDatabase, Tx
from backend.store.leases import Holder, LeaseRecord
from backend.turn.transcript import Transcripts
from shared.config import ProviderConfig

OTHER_BOOT = "00000000-0000-0000-0000-000000000000/pid:[4026531836]"  # another machine or namespace


@dataclass
class Env:
    db: Database
    config: ConfigFile
    providers: Providers

    def compressor(self, epoch: int) -> Compressor:
        return Compressor(self.db, self.config, self.providers, epoch)

    async def session(self) -> str:
        sid = new_id("ses")
        await self.db.write(lambda tx: sessions.insert(tx, sid, "t", "/tmp", "m"))
        return sid

    async def lock(self, c: Compressor, sid: str) -> bool:
        return await self.db.write(lambda tx: c._lock(tx, sid))

    async def row(self, sid: str) -> LeaseRecord | None:
        return await self.db.read(lambda tx: store.lock_row(tx, sid))

    async def held(self, sid: str) -> LeaseRecord:
        """The lock row, which must exist."""
        r = await self.row(sid)
        assert r is not None, f"no lock row for {sid}"
        return r

    async def columns(self, sid: str) -> tuple[str, int, str]:
        """The lock row's holder, pid and boot_token columns as stored."""
        r = await self.db.read(lambda tx: tx.one(
            "SELECT holder, pid, boot_token FROM compression_locks WHERE session_id = ?", (sid,)))
        assert r is not None, f"no lock row for {sid}"
        return r["holder"], r["pid"], r["boot_token"]

    async def put(self, sid: str, holder: Holder, ttl: float = store.LOCK_TTL_S) -> None:
        await self.db.write(lambda tx: store.put_lock(tx, sid, holder, ttl))

    async def leaf(self, sid: str) -> str:
        return await self.db.read(lambda tx: store.leaf(tx, sid))

    async def release(self, sid: str, holder: Holder) -> None:
        await self.db.write(lambda tx: store.release_lock(tx, sid, holder))


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    db = SqliteDatabase(tmp_path / "state.db")  # opened = migrated to the current schema
    await db.open()
    config = ConfigFile(tmp_path / "config.toml")
    config.load()
    providers = Providers(Secrets(tmp_path), tmp_path)
    try:
        yield Env(db, config, providers)
    finally:
        await providers.aclose()
        await db.close()


def dead_pid() -> int:
    """The pid of a process that has exited and been reaped."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def zombie() -> subprocess.Popen[bytes]:
    """A child that has exited but is not reaped yet (wait() it when done)."""
    proc = subprocess.Popen(["true"])
    stat = Path(f"/proc/{proc.pid}/stat")
    deadline = time.monotonic() + 10
    while (text := stat.read_text())[text.rfind(")") + 2] != "Z":
        assert time.monotonic() < deadline, "the child never exited"
        time.sleep(0.01)
    return proc


def holder(pid: int, start: str, boot: str, epoch: int = 7) -> Holder:
    return Holder(pid, start, boot, epoch, "compress")


# --- the lock ------------------------------------------------------------------------------


async def test_holder_is_this_process_on_this_boot(env: Env) -> None:
    c = env.compressor(3)
    assert c.holder == holder(os.getpid(), process_start(os.getpid()), boot_token(), 3)
    assert process_start(os.getpid()), "this platform reports start times (else reclaim is disabled)"


async def test_a_live_lock_of_this_process_is_not_taken_by_another_holder(env: Env) -> None:
    sid = await env.session()
    first, second = env.compressor(1), env.compressor(2)
    assert first.holder != second.holder
    assert await env.lock(first, sid)
    row = await env.held(sid)
    assert row.holder == first.holder
    assert await env.columns(sid) == (first.holder.encode(), os.getpid(), boot_token())
    assert row.expires_at > time.time() + store.LOCK_TTL_S - 60

    assert not await env.lock(second, sid), "live holder (our own pid, real start, same boot)"
    assert (await env.held(sid)).holder == first.holder, "the refusal leaves the row alone"
    assert await env.lock(first, sid), "the holder itself may take it again (refresh)"


async def test_an_expired_lock_is_reclaimed(env: Env) -> None:
    sid = await env.session()
    live = holder(os.getpid(), process_start(os.getpid()), boot_token(), epoch=99)
    await env.put(sid, live, ttl=-1.0)
    c = env.compressor(1)
    assert await env.lock(c, sid)
    row = await env.held(sid)
    assert row.holder == c.holder
    assert row.expires_at > time.time()


async def test_an_expired_lock_of_another_boot_is_reclaimed(env: Env) -> None:
    sid = await env.session()
    await env.put(sid, holder(1, "12345", OTHER_BOOT), ttl=-1.0)
    c = env.compressor(1)
    assert await env.lock(c, sid)
    assert (await env.held(sid)).holder == c.holder


async def test_a_dead_holder_is_reclaimed_before_expiry(env: Env) -> None:
    sid = await env.session()
    pid = dead_pid()
    await env.put(sid, holder(pid, "12345", boot_token()))
    c = env.compressor(1)
    assert await env.lock(c, sid), "the pid is gone: reclaimed though the row has not expired"
    assert (await env.held(sid)).holder == c.holder
    assert (await env.columns(sid))[:2] == (c.holder.encode(), os.getpid())


async def test_a_zombie_holder_is_reclaimed_before_expiry(env: Env) -> None:
    sid = await env.session()
    proc = zombie()
    try:
        start = process_start(proc.pid)
        await env.put(sid, holder(proc.pid, start, boot_token()))
        c = env.compressor(1)
        assert await env.lock(c, sid), "a zombie answers kill(0) but will never release"
    finally:
        proc.wait()


async def test_a_reused_pid_is_reclaimed_before_expiry(env: Env) -> None:
    """Our pid is alive, but the recorded start time is another process's: the holder is gone."""
    sid = await env.session()
    await env.put(sid, holder(os.getpid(), "1", boot_token()))
    c = env.compressor(1)
    assert await env.lock(c, sid)


async def test_a_lock_of_another_boot_is_not_reclaimed_before_expiry(env: Env) -> None:
    """A pid means nothing on another machine or pid namespace: not even a pid that is dead
    here makes the lock reclaimable; only its expiry does."""
    sid = await env.session()
    pid = dead_pid()
    other = holder(pid, "12345", OTHER_BOOT)
    await env.put(sid, other)
    c = env.compressor(1)
    assert not await env.lock(c, sid)
    assert (await env.held(sid)).holder == other
    assert await env.columns(sid) == (other.encode(), pid, OTHER_BOOT)


async def test_release_removes_only_our_own_row(env: Env) -> None:
    sid, other_sid = await env.session(), await env.session()
    mine, theirs = env.compressor(1), env.compressor(2)
    assert await env.lock(mine, sid)
    assert await env.lock(theirs, other_sid)

    await env.release(sid, theirs.holder)
    assert (await env.held(sid)).holder == mine.holder, "another holder's release is a no-op"

    await env.release(sid, mine.holder)
    assert await env.row(sid) is None
    assert (await env.held(other_sid)).holder == theirs.holder, "other sessions untouched"

    assert await env.lock(theirs, sid), "free again"


class _NeverCalled:
    name = "never"
    model = "m"

    def stream(self, request: ChatRequest) -> Any:
        raise AssertionError("a refused compression must not call the model")

    async def aclose(self) -> None:
        pass


async def test_compress_refuses_while_another_holder_is_live(env: Env) -> None:
    sid = await env.session()
    first, second = env.compressor(1), env.compressor(2)
    assert await env.lock(first, sid)
    link = ConfiguredProvider("never", ProviderConfig(model="m"), _NeverCalled())
    out = await second.compress(sid, link, "test")
    assert not out.compressed
    assert out.why_not == "another compression of this session is running"
    assert (await env.held(sid)).holder == first.holder, "the refusal released nothing"


class _Gated:
    """A summary model that answers only once `gate` is set; `entered` counts its calls."""

    name = "gated"
    model = "m"

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.entered = 0
        self.called = asyncio.Event()

    async def stream(self, request: ChatRequest) -> AsyncIterator[Any]:
        self.entered += 1
        self.called.set()
        await self.gate.wait()
        yield TextChunk("## Goal\n- test")
        yield UsageChunk(input_tokens=1000, output_tokens=10)

    async def aclose(self) -> None:
        pass


async def test_two_compressions_of_one_session_in_one_process_are_exclusive(env: Env) -> None:
    sid = await env.session()

    def seed(tx: Tx) -> None:
        for i in range(24):
            messages.insert(tx, sid, "user" if i % 2 == 0 else "assistant", f"message {i} " + "x" * 2000)

    await env.db.write(seed)
    model = _Gated()
    link = ConfiguredProvider("gated", ProviderConfig(model="m", context_window=20_000), model)
    c = env.compressor(1)
    first = asyncio.create_task(c.compress(sid, link, "automatic"))
    await asyncio.wait_for(model.called.wait(), 5)
    second = asyncio.create_task(c.compress(sid, link, "requested", manual=True))
    await asyncio.wait({second}, timeout=1)  # a refusal is immediate
    model.gate.set()
    outs = await asyncio.wait_for(asyncio.gather(first, second), 10)
    assert outs[0].compressed
    assert model.entered == 1, "the second one must wait or be refused, not summarize too"
    assert not outs[1].compressed


# --- guards --------------------------------------------------------------------------------


async def test_guards_round_trip(env: Env) -> None:
    sid = await env.session()
    assert await env.db.read(lambda tx: store.guards(tx, sid)) == store.Guards(), "defaults"
    g = store.Guards(failures=2, cooldown_until=1_700_000_123.25, ineffective=1, probe_after=1_700_000_456.5)
    await env.db.write(lambda tx: store.set_guards(tx, sid, g))
    assert await env.db.read(lambda tx: store.guards(tx, sid)) == g
    await env.db.write(lambda tx: store.set_guards(tx, sid, store.Guards()))
    assert await env.db.read(lambda tx: store.guards(tx, sid)) == store.Guards(), "reset"
    assert await env.db.read(lambda tx: store.guards(tx, "ses_missing")) == store.Guards()


async def test_guards_are_per_session(env: Env) -> None:
    a, b = await env.session(), await env.session()
    g = store.Guards(failures=1, cooldown_until=5.0)
    await env.db.write(lambda tx: store.set_guards(tx, a, g))
    assert await env.db.read(lambda tx: store.guards(tx, a)) == g
    assert await env.db.read(lambda tx: store.guards(tx, b)) == store.Guards()


# --- lineage -------------------------------------------------------------------------------


def _link(parent: str, child: str) -> Callable[[Tx], None]:
    return lambda tx: sessions.link_rotation(tx, parent, child)


async def test_leaf_follows_the_child_chain(env: Env) -> None:
    a, b, c = await env.session(), await env.session(), await env.session()
    assert await env.leaf(a) == a, "no child: itself"
    await env.db.write(_link(a, b))
    await env.db.write(_link(b, c))
    for start in (a, b, c):
        assert await env.leaf(start) == c
    assert await env.leaf("ses_missing") == "ses_missing"


async def test_deleting_a_rotated_child_gives_the_parent_its_prompts_back(env: Env) -> None:
    a, b, c = await env.session(), await env.session(), await env.session()
    await env.db.write(_link(a, b))
    await env.db.write(_link(b, c))
    await env.db.write(lambda tx: sessions.delete(tx, c))
    assert await env.leaf(a) == b
    row_b = await env.db.read(lambda tx: sessions.row(tx, b))
    assert row_b is not None
    assert row_b.child_session_id is None
    # A link to a child that no longer exists (written by an older version) ends the chain too.
    await env.db.write(lambda tx: tx.execute(
        "UPDATE sessions SET child_session_id = 'ses_gone' WHERE session_id = ?", (b,)))
    assert await env.leaf(a) == b


async def test_leaf_stops_on_a_cycle(env: Env) -> None:
    a, b, c = await env.session(), await env.session(), await env.session()
    await env.db.write(_link(a, b))
    await env.db.write(_link(b, c))
    await env.db.write(_link(c, a))  # corrupt: a loop
    for start in (a, b, c):
        assert await asyncio.wait_for(env.leaf(start), 5) in (a, b, c), "terminates inside the loop"
    solo = await env.session()
    await env.db.write(lambda tx: tx.execute(
        "UPDATE sessions SET child_session_id = ? WHERE session_id = ?", (solo, solo)))
    assert await env.leaf(solo) == solo, "a self-loop"


# --- the queue moves with a rotation -------------------------------------------------------


async def test_move_queue_moves_every_open_admission(env: Env) -> None:
    parent, child, bystander = await env.session(), await env.session(), await env.session()
    ids = {k: new_id("adm") for k in ("queued", "started", "unknown", "terminal", "other")}

    def seed(tx: Tx) -> None:
        for k, adm in ids.items():
            sid = bystander if k == "other" else parent
            admissions.insert(tx, adm, "local", sid, f"req-{k}", "{}", f"d-{k}")
        admissions.mark_started(tx, ids["started"], 1, "turn_s")
        admissions.mark_started(tx, ids["unknown"], 1, "turn_u")
        admissions.mark_unknown(tx, ids["unknown"])
        admissions.mark_started(tx, ids["terminal"], 1, "turn_t")
        admissions.settle(tx, ids["terminal"], "completed")

    await env.db.write(seed)
    await env.db.write(lambda tx: store.move_queue(tx, parent, child))

    def where(tx: Tx) -> dict[str, tuple[str, str]]:
        return {r["admission_id"]: (r["session_id"], r["status"]) for r in tx.all(
            "SELECT admission_id, session_id, status FROM admissions")}

    got = await env.db.read(where)
    assert got == {
        ids["queued"]: (child, "queued"),
        ids["started"]: (child, "started"),
        ids["unknown"]: (child, "unknown"),  # it still holds the queue, now in the child
        ids["terminal"]: (parent, "terminal"),
        ids["other"]: (bystander, "queued"),
    }
    order = await env.db.read(lambda tx: [r["admission_id"] for r in tx.all(
        "SELECT admission_id FROM admissions WHERE session_id = ? ORDER BY id", (child,))])
    assert order == [ids["queued"], ids["started"], ids["unknown"]], "queue order (by id) is kept"
    oldest = await env.db.read(lambda tx: admissions.oldest_queued(tx, child))
    assert oldest is not None
    assert oldest.admission_id == ids["queued"]
    assert await env.db.read(lambda tx: admissions.oldest_queued(tx, parent)) is None

    await env.db.write(lambda tx: store.move_queue(tx, parent, child))
    assert await env.db.read(where) == got, "moving again changes nothing"


async def test_the_long_session_count_is_skipped_only_while_a_current_view_is_kept(env: Env) -> None:
    """due_by_size counts a long session in SQL (every row, every turn) unless the caller
    keeps a current view of it: then the build reads only new rows and decides itself."""
    sid = await env.session()

    def seed(tx: Tx) -> None:
        for i in range(1_002):
            messages.insert(tx, sid, "user" if i % 2 == 0 else "assistant", f"m{i} " + "x" * 100)

    await env.db.write(seed)
    link = ConfiguredProvider("never", ProviderConfig(model="m", context_window=20_000), _NeverCalled())
    c, kept = env.compressor(1), Transcripts()

    def current(tx: Tx) -> bool:
        return kept.current(tx, sid)

    assert await c.due_by_size(sid, link, ()) is not None, "over the threshold by the count"
    assert await c.due_by_size(sid, link, (), kept=current) is not None, "no view kept yet"
    await env.db.read(lambda tx: kept.read(tx, sid))
    assert await c.due_by_size(sid, link, (), kept=current) is None, "kept and current: no count"
    await env.db.write(lambda tx: store.hide(tx, sid, 1, 3))  # a compression elsewhere
    assert await c.due_by_size(sid, link, (), kept=current) is not None, "a moved token: counted"
