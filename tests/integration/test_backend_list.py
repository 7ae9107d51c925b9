"""`backend.list` on real backends: one on each store listing itself, and two sharing one
PostgreSQL database listing each other (which one answered, the sessions each runs a turn in,
a clean stop, a silent peer, and what is old enough to leave out)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from shared.errors import ErrorCode
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.pg_server import PgServer

from .backend_proc import Backend
from .wire import Connect, Rpc, RpcError, create_session, submit, wait_receipt_status

Json = dict[str, Any]
# Quick heartbeats and a short silence before a peer counts as dead.  (refresh_s paces the
# heartbeat where heartbeat_s is not read yet.)
PEERS = 'idle_exit_minutes = 0\n[lease]\nttl_s = 3\nrefresh_s = 1\nheartbeat_s = 0.5\ndead_after_s = 3\n'


def _seconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


async def _listed(rpc: Rpc, **params: Any) -> Json:
    return await rpc.call("backend.list", params)


async def _wait_listing(rpc: Rpc, ok: Callable[[Json], bool], timeout: float = 30) -> Json:
    deadline = time.monotonic() + timeout
    while True:
        listing = await _listed(rpc)
        if ok(listing) or time.monotonic() > deadline:
            return listing
        await asyncio.sleep(0.2)


async def test_a_backend_lists_itself_and_the_session_its_turn_holds(
    connect: Connect, backend: Backend, fake_provider: FakeOpenAI,
) -> None:
    owner = await connect()
    before = time.time()
    listing = await _listed(owner)
    assert listing["store"] == ("postgresql" if backend.on_postgres else "sqlite")
    assert listing["dead_after_s"] == 6
    [me] = listing["backends"]
    assert (me["this"], me["state"], me["pid"], me["host"]) == (
        True, "live", backend.pid, socket.gethostname())
    assert me["epoch"] == backend.info["epoch"]
    assert me["dead_at"] is None
    assert me["sessions_held"] == 0
    assert 0 <= me["heartbeat_age_s"] < 8
    assert abs(_seconds(me["heartbeat_at"]) + me["heartbeat_age_s"] - before) < 5
    assert _seconds(me["started_at"]) <= _seconds(me["heartbeat_at"])
    assert before - 120 < _seconds(me["started_at"]) <= before

    release = threading.Event()
    fake_provider.default = Reply(deltas=["working", "never"], hang_after=1, release=release)
    sid = await create_session(owner)
    receipt = await submit(owner, sid, "a long job")
    await owner.wait_event(lambda e: e.get("type") == "message.delta", 30)
    [running] = (await _listed(owner))["backends"]
    assert running["sessions_held"] == 1, "the running turn's lease names this backend"
    await owner.call("turn.interrupt", {"session_id": sid})
    await wait_receipt_status(owner, receipt["admission_id"], "terminal", timeout=30)
    release.set()
    [idle] = (await _listed(owner))["backends"]
    assert idle["sessions_held"] == 0, "the lease went with the turn"


async def test_backend_list_needs_admin_and_takes_only_all(connect: Connect) -> None:
    owner = await connect()
    token = (await owner.call("token.create", {"scopes": ["read", "submit", "approve"],
                                               "label": "laptop"}))["token"]
    laptop = await connect(token=token, name="laptop")
    with pytest.raises(RpcError) as caught:
        await _listed(laptop)
    assert caught.value.code == ErrorCode.FORBIDDEN
    with pytest.raises(RpcError) as caught:
        await _listed(owner, since=3600)
    assert caught.value.code == ErrorCode.INVALID_PARAMS
    with pytest.raises(RpcError) as caught:
        await _listed(owner, all="yes")
    assert caught.value.code == ErrorCode.INVALID_PARAMS
    assert len((await _listed(owner, all=True))["backends"]) == 1


# --- two backends on one PostgreSQL database ------------------------------------------------


@pytest.fixture
def peers(tmp_path: Path, pg_server: PgServer) -> Iterator[tuple[Backend, Backend, FakeOpenAI]]:
    """Backends A and B on one fresh database; B's model hangs until the test releases it."""
    name = pg_server.create_database()
    fakes = FakeOpenAI(), FakeOpenAI()
    made = [Backend(tmp_path / f"peer{i}", fake.base_url, PEERS, store=pg_server.dsn(name))
            for i, fake in enumerate(fakes)]
    try:
        for backend in made:
            backend.start()
        yield made[0], made[1], fakes[1]
    finally:
        errors: list[str] = []
        for backend in made:
            backend.close()
            print(backend.stderr_tail())
            errors += backend.logged_errors()
        for fake in fakes:
            fake.close()
        pg_server.drop_database(name)
        assert not errors, "a backend logged errors:\n" + "\n".join(errors[:20])
        assert fakes[0].errors == fakes[1].errors == []


def _by_pid(listing: Json) -> dict[int, Json]:
    return {b["pid"]: b for b in listing["backends"]}


async def test_pg_two_backends_list_each_other_with_their_sessions_and_a_clean_stop(
    peers: tuple[Backend, Backend, FakeOpenAI],
) -> None:
    a, b, b_model = peers
    ra = await Rpc.open(a.port, a.token, name="client-a")
    rb = await Rpc.open(b.port, b.token, name="client-b")
    release = threading.Event()
    b_model.default = Reply(deltas=["working", "never"], hang_after=1, release=release)
    sid = await create_session(rb)
    receipt = await submit(rb, sid, "a long job on B")
    await rb.wait_event(lambda e: e.get("type") == "message.delta", 30)

    from_a, from_b = await _listed(ra), await _listed(rb)
    assert from_a["store"] == "postgresql"
    seen = _by_pid(from_a)
    assert set(seen) == {a.pid, b.pid}
    assert (seen[a.pid]["this"], seen[b.pid]["this"]) == (True, False)
    assert {pid: row["this"] for pid, row in _by_pid(from_b).items()} == {a.pid: False, b.pid: True}
    assert (seen[a.pid]["sessions_held"], seen[b.pid]["sessions_held"]) == (0, 1)
    assert [r["state"] for r in from_a["backends"]] == ["live", "live"]
    assert [r["pid"] for r in from_a["backends"]] == [a.pid, b.pid], "by start: A started first"
    assert (seen[a.pid]["epoch"], seen[b.pid]["epoch"]) == (a.info["epoch"], b.info["epoch"])

    await rb.call("turn.interrupt", {"session_id": sid})
    await wait_receipt_status(rb, receipt["admission_id"], "terminal", timeout=30)
    release.set()
    await rb.close()
    assert b.terminate() == 0, "a clean stop"
    listing = await _listed(ra)
    stopped = _by_pid(listing)[b.pid]
    assert (stopped["state"], stopped["sessions_held"], stopped["this"]) == ("stopped", 0, False)
    assert [r["pid"] for r in listing["backends"]] == [a.pid, b.pid], "live ones first"
    await ra.close()


async def test_pg_a_killed_peer_falls_silent_and_old_ones_are_left_out(
    peers: tuple[Backend, Backend, FakeOpenAI],
) -> None:
    a, b, _model = peers
    ra = await Rpc.open(a.port, a.token, name="client-a")
    b.kill9()
    listing = await _wait_listing(ra, lambda got: _by_pid(got)[b.pid]["state"] != "live")
    gone = _by_pid(listing)[b.pid]
    # On this host its process is provably gone: declared dead at A's next beat, without
    # waiting out dead_after_s (silent first, were it another host's).
    assert gone["state"] in ("silent", "dead"), gone
    assert gone["state"] == "dead" or gone["heartbeat_age_s"] > 3
    assert listing["backends"][0]["pid"] == a.pid, "the live one first"
    assert (gone["dead_at"] is None) == (gone["state"] == "silent")

    # A day later it is history: listed only when asked for everything.
    a.query("UPDATE backends SET heartbeat_at = heartbeat_at - 90000, "
            "started_at = started_at - 90000 WHERE epoch = ?", (b.info["epoch"],))
    assert [r["pid"] for r in (await _listed(ra))["backends"]] == [a.pid]
    everything = await _listed(ra, all=True)
    assert [r["pid"] for r in everything["backends"]] == [a.pid, b.pid]
    assert _by_pid(everything)[b.pid]["heartbeat_age_s"] > 90000
    await ra.close()
