"""The turn lease end to end: two processes on one folder, dead and unclear holders, lost leases.

Lease rows of "other processes" are written straight into the store (Backend.query: DIR/state.db
or the PostgreSQL database), the way another backend on the same store would leave them; their
holders are real processes (a `sleep` this test spawns), so liveness is judged exactly as in
production.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from backend.host import process_start
from backend.server.discovery import SHARE_DIR_ENV
from backend.store.leases import Holder
from tests.fakes.openai_server import FakeOpenAI, Reply

from .backend_proc import Backend, BackendFactory, Stores
from .wire import (
    Connect,
    Json,
    Rpc,
    create_session,
    get_receipt,
    is_event,
    submit,
    wait_complete,
    wait_receipt_status,
)

FAR_FUTURE_S = 3600.0
ROUNDS = 4


# --- helpers -----------------------------------------------------------------------------


def local_boot_token() -> str:
    """This host's boot and pid namespace, as the backend computes it."""
    boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    return f"{boot}/{os.readlink('/proc/self/ns/pid')}"


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    """A live process to name as a lease holder; reaped at the end whatever happened."""
    proc = subprocess.Popen(["sleep", "60"])
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=10)


def holder_of(proc: subprocess.Popen[bytes], boot_token: str, turn_id: str) -> Holder:
    start = process_start(proc.pid)
    assert start, "the sleeper's start time is readable"
    return Holder(proc.pid, start, boot_token, 0, turn_id)


def put_lease(backend: Backend, session_id: str, holder: Holder, expires_at: float) -> None:
    """Another process's lease on the session, as that process would have written it."""
    backend.query(
        "INSERT INTO turn_leases (session_id, holder, pid, boot_token, epoch, "
        "turn_id, acquired_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (session_id) DO UPDATE SET holder = excluded.holder, pid = excluded.pid, "
        "boot_token = excluded.boot_token, epoch = excluded.epoch, turn_id = excluded.turn_id, "
        "acquired_at = excluded.acquired_at, expires_at = excluded.expires_at",
        (session_id, holder.encode(), holder.pid, holder.boot_token, holder.epoch,
         holder.turn_id, time.time(), expires_at),
    )


def steal_lease(backend: Backend, session_id: str, thief: Holder) -> None:
    """Another process takes the session's lease over (as after wrongly judging us dead)."""
    backend.query(
        "UPDATE turn_leases SET holder = ?, pid = ?, boot_token = ?, epoch = ?, "
        "turn_id = ? WHERE session_id = ?",
        (thief.encode(), thief.pid, thief.boot_token, thief.epoch, thief.turn_id, session_id))


def take_over_as(backend: Backend, session_id: str, thief: Holder) -> list[Json]:
    """Another process takes the session over the way a real taker does (turn/lease.take_turn):
    its lease, and the running turn's admission made `unknown`; returns the events stored
    by then."""
    steal_lease(backend, session_id, thief)
    backend.query("UPDATE admissions SET status = 'unknown' WHERE session_id = ? "
                  "AND status = 'started'", (session_id,))
    return stored_events(backend, session_id)


def turn_ended(backend: Backend, session_id: str) -> bool:
    """The backend's turn ended: it says it was taken over, or (what a loser must never do)
    it stored its end."""
    return "taken over by another process" in backend_log(backend) or any(
        e["type"] == "message.complete" for e in stored_events(backend, session_id))


def backend_log(backend: Backend) -> str:
    return "".join(p.read_text(errors="replace")
                   for p in sorted((backend.data_dir / "logs").glob("backend*.log")))


async def wait_for(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        await asyncio.sleep(0.05)


def lease_rows(backend: Backend, session_id: str) -> list[Json]:
    return backend.query("SELECT * FROM turn_leases WHERE session_id = ?", (session_id,))


def delete_lease(backend: Backend, session_id: str) -> None:
    backend.query("DELETE FROM turn_leases WHERE session_id = ?", (session_id,))


def stored_events(backend: Backend, session_id: str) -> list[Json]:
    rows = backend.query(
        "SELECT seq, type, turn_id, admission_id, data FROM events WHERE session_id = ? "
        "ORDER BY seq", (session_id,))
    return [r | {"data": r["data"] if isinstance(r["data"], dict) else json.loads(r["data"])}
            for r in rows]


async def transcript(rpc: Rpc, sid: str) -> list[Json]:
    result = await rpc.call("session.messages", {"session_id": sid, "limit": 1000})
    messages: list[Json] = result["messages"]
    return messages


@asynccontextmanager
async def opened(backend: Backend, name: str = "rpc") -> AsyncIterator[Rpc]:
    rpc = await Rpc.open(backend.port, backend.token, name=name)
    try:
        yield rpc
    finally:
        if not rpc.closed.is_set():
            await rpc.close()


# --- two processes, one folder -------------------------------------------------------------


@pytest.fixture
def shared_pair(tmp_path: Path, fake_provider: FakeOpenAI,
                store: Stores) -> Iterator[tuple[Backend, Backend]]:
    """Two Backends on one DIR (the data-dir lock bypassed), so on one store (on PostgreSQL,
    one database); neither is started yet."""
    env = {SHARE_DIR_ENV: "1"}
    data_dir = tmp_path / "shared"
    shared = store.new()
    a = Backend(data_dir, fake_provider.base_url, extra_env=env, store=shared)
    b = Backend(data_dir, fake_provider.base_url, extra_env=env, store=shared)
    yield a, b
    for backend in (a, b):
        backend.close()
    print(a.stderr_tail())  # both write the same stderr file; shown only when the test failed
    errors = a.logged_errors()
    assert not errors, "a backend logged errors:\n" + "\n".join(errors[:20])


async def test_two_processes_on_one_folder_never_interleave_a_sessions_turns(
    shared_pair: tuple[Backend, Backend], fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    a, b = shared_pair
    fake_provider.responder = lambda body: Reply(deltas=["one ", "two ", "three"], delay=0.05)
    a.start()
    async with opened(a, "a") as rpc_a:
        sid = await create_session(rpc_a, cwd=str(tmp_path))
        b.start()
        async with opened(b, "b") as rpc_b:
            texts: list[str] = []
            finals: list[Json] = []
            # Rounds of two prompts per process submitted at once; between rounds both
            # drainers are idle, so either process may win the next claim.
            for i in range(ROUNDS):
                batch = [f"prompt {side}{i}.{k} {uuid.uuid4().hex[:6]}"
                         for side in "ab" for k in range(2)]
                texts += batch
                receipts = await asyncio.gather(*(
                    submit(rpc_a if text.startswith("prompt a") else rpc_b, sid, text)
                    for text in batch
                ))
                # Each process pushes only its own commits live: poll the shared receipts.
                finals += [await wait_receipt_status(rpc_b, r["admission_id"], "terminal")
                           for r in receipts]
            assert [f["outcome"] for f in finals] == ["completed"] * len(texts), finals
            assert all(f["final_text"] == "one two three" for f in finals), finals
            rows = await transcript(rpc_b, sid)

    assert fake_provider.max_active == 1, "two requests of the one session ran at once"
    asked = [r.last_user_text for r in fake_provider.snapshot()]
    assert sorted(asked) == sorted(texts), "each prompt reached the model exactly once"
    users = [m["content"] for m in rows if m["role"] == "user"]
    assert sorted(users) == sorted(texts), "each prompt has exactly one user row"

    log = stored_events(a, sid)
    assert [e["seq"] for e in log] == list(range(1, len(log) + 1)), "the log is gapless"
    open_turn: str | None = None
    started: list[str] = []
    for e in log:
        if e["type"] == "turn.started":
            assert open_turn is None, f"turn {e['turn_id']} started inside {open_turn}"
            open_turn = e["turn_id"]
            started.append(e["turn_id"])
        elif e["turn_id"] is not None and open_turn is not None:
            assert e["turn_id"] == open_turn, f"{e['type']} of {e['turn_id']} inside {open_turn}"
        if e["type"] == "message.complete":
            assert e["turn_id"] == open_turn, f"message.complete of a turn not running: {e}"
            open_turn = None
    assert open_turn is None
    assert len(started) == len(set(started)) == len(texts), "one turn per prompt"
    assert sorted(f["turn_id"] for f in finals) == sorted(started)
    assert lease_rows(a, sid) == [], "every turn released its lease"


async def test_a_second_process_starting_mid_turn_leaves_the_live_holders_turn_alone(
    shared_pair: tuple[Backend, Backend], fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    """B's start-up recovery sees A's live lease and must not mark A's running turn unknown."""
    a, b = shared_pair
    release = threading.Event()
    fake_provider.script(Reply(deltas=["first ", "answer"], hang_after=1, release=release),
                         Reply(deltas=["second answer"]))
    a.start()
    async with opened(a, "a") as rpc_a:
        sid = await create_session(rpc_a, cwd=str(tmp_path))
        first = await submit(rpc_a, sid, "long one")
        await rpc_a.wait_event(is_event("message.delta", first["admission_id"]))
        b.start()
        async with opened(b, "b") as rpc_b:
            assert (await get_receipt(rpc_b, first["admission_id"]))["status"] == "started"
            second = await submit(rpc_b, sid, "queued behind it")
            await asyncio.sleep(0.5)
            assert len(fake_provider.snapshot()) == 1, "the second waits for the first"
            release.set()
            done = await wait_complete(rpc_a, first["admission_id"], timeout=15)
            assert done["data"]["status"] == "completed", done
            assert done["data"]["text"] == "first answer"
            final = await wait_receipt_status(rpc_b, second["admission_id"], "terminal")
            assert final["outcome"] == "completed", final
            assert final["final_text"] == "second answer"
    assert fake_provider.max_active == 1
    assert lease_rows(a, sid) == []


# --- dead, expired and unclear holders ---------------------------------------------------------


async def test_a_dead_holders_lease_is_taken_over(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI, tmp_path: Path,
    sleeper: subprocess.Popen[bytes],
) -> None:
    rpc = await connect()
    sid = await create_session(rpc, cwd=str(tmp_path))
    put_lease(backend, sid, holder_of(sleeper, local_boot_token(), "turn_other"),
              time.time() + FAR_FUTURE_S)
    fake_provider.script(Reply(deltas=["taken ", "over"]))

    receipt = await submit(rpc, sid, "wait for the other process")
    aid = receipt["admission_id"]
    waiting = await rpc.wait_event(is_event("lease.waiting", aid))
    assert waiting["data"]["holder_pid"] == sleeper.pid
    await asyncio.sleep(1.5)  # at least one more attempt while the holder lives
    assert fake_provider.snapshot() == [], "no model call while another live process holds it"
    assert (await get_receipt(rpc, aid))["status"] == "started"

    sleeper.kill()
    sleeper.wait(timeout=10)  # reaped: the pid is free now
    done = await wait_complete(rpc, aid, timeout=15)
    assert done["data"]["status"] == "completed", done
    assert done["data"]["text"] == "taken over"
    assert len(fake_provider.snapshot()) == 1
    rows = await transcript(rpc, sid)
    assert [(m["role"], m["content"]) for m in rows] == [
        ("user", "wait for the other process"), ("assistant", "taken over")]
    assert lease_rows(backend, sid) == []


async def test_a_killed_but_unreaped_holder_counts_as_dead(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI, tmp_path: Path,
    sleeper: subprocess.Popen[bytes],
) -> None:
    """A crashed backend whose parent has not reaped it yet is a zombie: its pid still
    answers kill(0) with its old start time, but it will never refresh or release."""
    rpc = await connect()
    sid = await create_session(rpc, cwd=str(tmp_path))
    put_lease(backend, sid, holder_of(sleeper, local_boot_token(), "turn_zombie"),
              time.time() + FAR_FUTURE_S)
    sleeper.kill()
    deadline = time.monotonic() + 5
    while _state(sleeper.pid) != "Z":  # not reaped: `sleeper` is waited for only at teardown
        assert time.monotonic() < deadline, "the sleeper did not become a zombie"
        await asyncio.sleep(0.02)
    fake_provider.script(Reply(deltas=["the zombie let go"]))

    receipt = await submit(rpc, sid, "after the crash")
    done = await wait_complete(rpc, receipt["admission_id"], timeout=15)
    assert done["data"]["status"] == "completed", done
    assert done["data"]["text"] == "the zombie let go"
    assert _state(sleeper.pid) == "Z", "taken over while the holder was still a zombie"


def _state(pid: int) -> str:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rfind(")") + 2:].split()[0]


async def test_an_expired_lease_of_a_live_holder_is_taken_over_at_once(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI, tmp_path: Path,
    sleeper: subprocess.Popen[bytes],
) -> None:
    rpc = await connect()
    sid = await create_session(rpc, cwd=str(tmp_path))
    put_lease(backend, sid, holder_of(sleeper, local_boot_token(), "turn_other"), time.time() - 5)
    fake_provider.script(Reply(deltas=["expired, so mine"]))

    receipt = await submit(rpc, sid, "take the expired lease")
    done = await wait_complete(rpc, receipt["admission_id"], timeout=15)
    assert done["data"]["status"] == "completed", done
    assert done["data"]["text"] == "expired, so mine"
    assert not any(e["type"] == "lease.waiting" for e in rpc.session_events(sid))
    assert sleeper.poll() is None, "the holder was alive the whole time"
    assert lease_rows(backend, sid) == []


async def test_a_holder_of_unclear_liveness_is_waited_out_and_the_wait_can_be_interrupted(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI, tmp_path: Path,
    sleeper: subprocess.Popen[bytes],
) -> None:
    rpc = await connect()
    sid = await create_session(rpc, cwd=str(tmp_path))
    # Another host (or pid namespace): its pid says nothing here, so it cannot be judged dead.
    elsewhere = holder_of(sleeper, "another-boot-id/pid:[4026531836]", "turn_elsewhere")
    put_lease(backend, sid, elsewhere, time.time() + FAR_FUTURE_S)
    sleeper.kill()
    sleeper.wait(timeout=10)  # even a pid that is free *here* proves nothing about that host

    receipt = await submit(rpc, sid, "text that never ran")
    aid = receipt["admission_id"]
    await rpc.wait_event(is_event("lease.waiting", aid))
    await asyncio.sleep(1.2)
    assert fake_provider.snapshot() == []
    assert (await rpc.call("turn.interrupt", {"session_id": sid}))["interrupted"] is True
    done = await wait_complete(rpc, aid, timeout=15)
    assert done["data"]["status"] == "interrupted", done
    assert done["data"]["text"] == ""

    final = await get_receipt(rpc, aid)
    assert (final["status"], final["outcome"]) == ("terminal", "interrupted"), final
    assert final["failure_reason"], final
    # The input is kept: in the admission row, and on the receipt.
    [admission] = backend.query("SELECT payload_json FROM admissions WHERE admission_id = ?", (aid,))
    assert "text that never ran" in str(admission["payload_json"])
    assert final["text"] == "text that never ran"
    assert await transcript(rpc, sid) == [], "no rows without the lease"
    assert [r["holder"] for r in lease_rows(backend, sid)] == [elsewhere.encode()], "not ours to drop"
    assert fake_provider.snapshot() == []

    delete_lease(backend, sid)  # the other host's turn ended
    fake_provider.script(Reply(deltas=["now it runs"]))
    nxt = await submit(rpc, sid, "again")
    again = await wait_complete(rpc, nxt["admission_id"], timeout=15)
    assert again["data"]["status"] == "completed", again
    assert again["data"]["text"] == "now it runs"
    rows = await transcript(rpc, sid)
    assert [(m["role"], m["content"]) for m in rows] == [("user", "again"),
                                                         ("assistant", "now it runs")]


async def test_waiting_longer_than_wait_s_interrupts_the_turn(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, tmp_path: Path,
    sleeper: subprocess.Popen[bytes],
) -> None:
    backend = backend_factory(fake_provider.base_url, "[lease]\nwait_s = 1.5\n")
    async with opened(backend) as rpc:
        sid = await create_session(rpc, cwd=str(tmp_path))
        elsewhere = holder_of(sleeper, "another-boot-id/pid:[4026531836]", "turn_elsewhere")
        put_lease(backend, sid, elsewhere, time.time() + FAR_FUTURE_S)
        receipt = await submit(rpc, sid, "too busy")
        done = await wait_complete(rpc, receipt["admission_id"], timeout=15)
        assert done["data"]["status"] == "interrupted", done
        assert "busy in another process" in done["data"]["failure_reason"], done
        assert await transcript(rpc, sid) == []
        assert fake_provider.snapshot() == []
        assert [r["holder"] for r in lease_rows(backend, sid)] == [elsewhere.encode()]


# --- losing the lease ------------------------------------------------------------------------


async def test_a_lost_lease_interrupts_the_turn_and_the_next_prompt_works(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, tmp_path: Path,
    sleeper: subprocess.Popen[bytes],
) -> None:
    backend = backend_factory(fake_provider.base_url, "[lease]\nrefresh_s = 0.2\n")
    fake_provider.script(Reply(deltas=["a", "b"], hang_after=1))
    async with opened(backend) as rpc:
        sid = await create_session(rpc, cwd=str(tmp_path))
        receipt = await submit(rpc, sid, "stream slowly")
        aid = receipt["admission_id"]
        await rpc.wait_event(is_event("message.delta", aid))
        [mine] = lease_rows(backend, sid)
        assert mine["pid"] == backend.pid

        # Another process takes the session over (as after wrongly judging us dead).
        thief = holder_of(sleeper, local_boot_token(), "turn_thief")
        before = take_over_as(backend, sid, thief)
        # The lease watch notices within a refresh: the model call is cut off, and the turn
        # ends writing nothing (the taker settled it).
        await wait_for(lambda: fake_provider.snapshot()[0].disconnected, 10, "the call is cut")
        await wait_for(lambda: turn_ended(backend, sid), 10,
                       "the turn ended")
        assert stored_events(backend, sid) == before, "the loser wrote nothing more"
        assert [r["holder"] for r in lease_rows(backend, sid)] == [thief.encode()], \
            "the loser must not release (or overwrite) the new holder's lease"
        assert len(fake_provider.snapshot()) == 1
        assert (await get_receipt(rpc, aid))["status"] == "unknown"

        sleeper.kill()  # the other process ends; its lease is provably dead now
        sleeper.wait(timeout=10)
        fake_provider.script(Reply(deltas=["back to normal"]))
        nxt = await submit(rpc, sid, "next one")
        again = await wait_complete(rpc, nxt["admission_id"], timeout=15)
        assert again["data"]["status"] == "completed", again
        assert again["data"]["text"] == "back to normal"
        assert lease_rows(backend, sid) == []
        assert (await get_receipt(rpc, aid))["outcome"] == "interrupted"  # the person moved on


async def test_a_turn_that_lost_its_lease_writes_nothing_more_to_the_transcript(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, tmp_path: Path,
    sleeper: subprocess.Popen[bytes],
) -> None:
    backend = backend_factory(fake_provider.base_url, "[lease]\nrefresh_s = 0.2\n")
    fake_provider.script(Reply(deltas=["a", "b"], hang_after=1))
    async with opened(backend) as rpc:
        sid = await create_session(rpc, cwd=str(tmp_path))
        receipt = await submit(rpc, sid, "stream slowly")
        await rpc.wait_event(is_event("message.delta", receipt["admission_id"]))
        before = await transcript(rpc, sid)
        take_over_as(backend, sid, holder_of(sleeper, local_boot_token(), "turn_thief"))
        await wait_for(lambda: turn_ended(backend, sid), 15,
                       "the turn ended")
        after = await transcript(rpc, sid)
        assert [(m["role"], m["content"]) for m in after] == [
            (m["role"], m["content"]) for m in before], "the new holder owns the transcript now"


async def test_kill9_while_waiting_for_the_lease_leaves_the_turn_unknown_without_rows(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI, tmp_path: Path,
    sleeper: subprocess.Popen[bytes],
) -> None:
    rpc = await connect(name="before")
    sid = await create_session(rpc, cwd=str(tmp_path))
    elsewhere = holder_of(sleeper, "another-boot-id/pid:[4026531836]", "turn_elsewhere")
    put_lease(backend, sid, elsewhere, time.time() + FAR_FUTURE_S)
    receipt = await submit(rpc, sid, "claimed but never leased")
    aid = receipt["admission_id"]
    await rpc.wait_event(is_event("lease.waiting", aid))
    backend.kill9()
    await rpc.wait_closed()
    backend.start()

    rpc = await connect(name="after")
    after = await get_receipt(rpc, aid)
    assert after["status"] == "unknown", after
    rows = await transcript(rpc, sid)
    assert [(m["role"], m.get("note_kind")) for m in rows] == [("system_note", "recovered")]
    assert [r["holder"] for r in lease_rows(backend, sid)] == [elsewhere.encode()], "not ours to drop"
    assert fake_provider.snapshot() == []

    delete_lease(backend, sid)
    fake_provider.script(Reply(deltas=["moving on"]))
    nxt = await submit(rpc, sid, "next")
    done = await wait_complete(rpc, nxt["admission_id"], timeout=15)
    assert done["data"]["text"] == "moving on"
    assert (await get_receipt(rpc, aid))["outcome"] == "interrupted"
    assert [m["content"] for m in fake_provider.snapshot()[0].body["messages"][1:]] == ["next"]


async def test_writes_are_fenced_on_the_lease_even_before_the_watch_notices(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, tmp_path: Path,
    sleeper: subprocess.Popen[bytes],
) -> None:
    """The lease watch checks only every refresh_s (60 s here); every write of the turn checks
    the lease itself, so a holder that was taken over meanwhile writes nothing more."""
    backend = backend_factory(fake_provider.base_url, "[lease]\nrefresh_s = 60\n")
    release = threading.Event()
    fake_provider.script(Reply(deltas=["kept ", "never stored"], hang_after=1, release=release))
    async with opened(backend) as rpc:
        sid = await create_session(rpc, cwd=str(tmp_path))
        receipt = await submit(rpc, sid, "stream slowly")
        aid = receipt["admission_id"]
        await rpc.wait_event(is_event("message.delta", aid))
        before = take_over_as(backend, sid, holder_of(sleeper, local_boot_token(), "turn_thief"))
        release.set()  # the model goes on streaming to a turn that no longer holds the lease
        await wait_for(lambda: turn_ended(backend, sid), 15,
                       "the turn ended")
        # Neither the rest of the answer nor the turn's end (usage.update, message.complete,
        # admission.settled): the taker settled the turn, the loser writes nothing.
        assert stored_events(backend, sid) == before
        assert [r["holder"] for r in lease_rows(backend, sid)] != [], "the thief keeps the lease"
        assert all(m["content"] != "kept never stored" for m in await transcript(rpc, sid))
