"""The backend process's life: epochs across restarts, stale backend.json, clean SIGTERM,
the drain before a package upgrade (SIGUSR1)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
import time
from pathlib import Path

from tests.fakes.openai_server import FakeOpenAI, Reply

from .backend_proc import Backend, BackendFactory
from .wire import Connect, Rpc, create_session, get_receipt, submit, terminal, wait_receipt_status


async def test_epoch_increments_at_every_start(backend: Backend, connect: Connect) -> None:
    first = backend.info["epoch"]
    await asyncio.to_thread(backend.restart)
    assert backend.info["epoch"] > first, "a clean restart bumps the epoch"
    second = backend.info["epoch"]
    backend.kill9()
    backend.start()
    assert backend.info["epoch"] > second, "a start after kill -9 bumps the epoch"
    rpc = await connect()
    assert rpc.init_result["epoch"] == backend.info["epoch"]


async def test_stale_backend_json_is_replaced_after_kill9(backend: Backend, connect: Connect) -> None:
    rpc = await connect()
    sid = await create_session(rpc, title="kept")
    old = json.loads((backend.data_dir / "backend.json").read_text())
    backend.kill9()
    backend.start()  # the old backend.json names a dead pid and a silent port
    new = json.loads((backend.data_dir / "backend.json").read_text())
    assert new["pid"] == backend.pid != old["pid"]
    rpc = await connect()
    session = (await rpc.call("session.get", {"session_id": sid}))["session"]
    assert session["title"] == "kept", "sessions survive kill -9"


async def test_sigterm_exits_zero(backend: Backend, connect: Connect, fake_provider: FakeOpenAI) -> None:
    rpc = await connect()
    await create_session(rpc)
    # In a thread: the event loop must keep running so the client answers the closing handshake.
    status = await asyncio.to_thread(backend.terminate, 15)
    assert status == 0, "SIGTERM is a clean exit with status 0"
    assert await rpc.wait_closed() is not None, "clients are disconnected"


async def test_shutdown_method_stops_the_backend(backend: Backend, connect: Connect) -> None:
    rpc = await connect()
    assert await rpc.call("shutdown", {}) == {}
    assert backend.proc is not None
    for _ in range(200):
        if not backend.alive():
            break
        await asyncio.sleep(0.05)
    assert backend.proc.poll() == 0, "shutdown exits with status 0"


async def test_sigterm_during_a_turn_exits_cleanly_and_loses_nothing(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI
) -> None:
    fake_provider.routes["long haul"] = Reply(deltas=["still ", "going", " LOST"], hang_after=2)
    rpc = await connect()
    sid = await create_session(rpc)
    running = await submit(rpc, sid, "long haul")
    behind = await submit(rpc, sid, "waiting behind")
    await rpc.wait_event(lambda e: e["type"] == "message.delta" and e["session_id"] == sid)
    started = time.monotonic()
    status = await asyncio.to_thread(backend.terminate, 20)
    assert status == 0, "SIGTERM exits 0 even with a turn streaming"
    assert time.monotonic() - started < 12, "SIGTERM settles what it can within 10 s"

    stopped_at = time.monotonic()
    early = [r for r in fake_provider.snapshot() if r.last_user_text == "waiting behind"]
    assert early == [], "SIGTERM starts nothing new: the queued prompt ran during shutdown"

    backend.start()
    rpc = await connect(name="after-restart")
    first = await get_receipt(rpc, running["admission_id"])
    assert first["status"] in ("terminal", "unknown"), first
    assert first.get("outcome") in (None, "interrupted"), f"stopped, not completed: {first}"
    if first["status"] == "unknown":  # not settled at shutdown: it holds the queue
        second = await get_receipt(rpc, behind["admission_id"])
        assert second["status"] == "queued", f"the queued prompt is kept: {second}"
    else:  # settled as interrupted at shutdown: the queue drains in the new process
        second = await wait_receipt_status(rpc, behind["admission_id"], "terminal")
        assert second.get("outcome") == "completed", second
        [ran] = [r for r in fake_provider.snapshot() if r.last_user_text == "waiting behind"]
        assert ran.started > stopped_at
    texts = [r.last_user_text for r in fake_provider.snapshot()]
    assert texts.count("long haul") == 1, "a started turn is never re-run"


async def test_sigusr1_lets_the_running_turn_finish_keeps_new_input_queued_then_exits(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI
) -> None:
    """What the package's prerm asks before an upgrade replaces the files: the turn that
    runs finishes (not cut off as SIGTERM's grace would), nothing new starts, and input that
    arrives meanwhile is kept for the next start."""
    release = threading.Event()
    fake_provider.routes["long haul"] = Reply(deltas=["finished ", "in the drain"], hang_after=1,
                                              release=release)
    rpc = await connect()
    sid = await create_session(rpc)
    other = await create_session(rpc)
    running = await submit(rpc, sid, "long haul")
    await rpc.wait_event(lambda e: e["type"] == "message.delta" and e["session_id"] == sid)
    os.kill(backend.pid, signal.SIGUSR1)
    await _logged(backend, "draining")
    behind = await submit(rpc, sid, "queued behind it")
    elsewhere = await submit(rpc, other, "arrived during the drain")
    assert backend.alive(), "the drain waits for the running turn"
    release.set()
    done = await rpc.wait_event(lambda e: e["type"] == "message.complete" and e["session_id"] == sid)
    assert done["data"]["status"] == "completed", done
    assert backend.proc is not None
    status = await asyncio.to_thread(backend.proc.wait, 30)
    assert status == 0, "a drain ends in a clean exit"
    asked = [r.last_user_text for r in fake_provider.snapshot()]
    assert asked == ["long haul"], f"nothing new started during the drain: {asked}"

    backend.start()
    rpc = await connect(name="after-the-drain")
    first = await get_receipt(rpc, running["admission_id"])
    assert (first["status"], first.get("outcome")) == ("terminal", "completed"), first
    for receipt in (behind, elsewhere):
        settled = await wait_receipt_status(rpc, receipt["admission_id"], "terminal")
        assert settled.get("outcome") == "completed", settled
    asked = [r.last_user_text for r in fake_provider.snapshot()]
    assert sorted(asked) == ["arrived during the drain", "long haul", "queued behind it"], asked


async def test_a_drain_waits_for_a_turn_whose_approval_a_person_has_yet_to_give(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    """Before an upgrade, the approval card still open is answered, not cut off: the turn
    goes on with the person's decision and only then does the backend exit."""
    fake_provider.script(
        Reply.calls(terminal("rm -rf scratch"), text="Cleaning up."),
        Reply(deltas=["Left it alone, as you said."]),
    )
    (tmp_path / "scratch").mkdir()
    rpc = await connect()
    sid = await create_session(rpc, cwd=str(tmp_path))
    receipt = await submit(rpc, sid, "clean up")
    request = await rpc.wait_event(lambda e: e["type"] == "approval.request"
                                   and e.get("session_id") == sid and "seq" in e)
    os.kill(backend.pid, signal.SIGUSR1)
    await _logged(backend, "draining")
    # A drain that did not wait for the person would stop at its next look (every 0.25 s);
    # this one cannot, whatever the wait, so the check cannot fail for a slow machine.
    await asyncio.sleep(1.0)
    assert "backend stopping" not in (backend.data_dir / "logs" / "backend.log").read_text()
    await rpc.call("approval.respond", {"approval_id": request["data"]["approval"]["approval_id"],
                                        "decision": "deny"})
    assert backend.proc is not None
    assert await asyncio.to_thread(backend.proc.wait, 30) == 0
    backend.start()
    rpc = await connect(name="after-the-drain")
    settled = await get_receipt(rpc, receipt["admission_id"])
    assert (settled["status"], settled.get("outcome")) == ("terminal", "completed"), settled
    assert (tmp_path / "scratch").is_dir()


async def _logged(backend: Backend, words: str, timeout: float = 30.0) -> None:
    log = backend.data_dir / "logs" / "backend.log"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if log.exists() and words in log.read_text():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{words!r} not in {log} within {timeout} s")


async def test_idle_exit_waits_for_clients_and_work(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI
) -> None:
    """With idle_exit_minutes set, the backend exits only once no client and no turn is left."""
    idle = backend_factory(fake_provider.base_url, extra_config="idle_exit_minutes = 0.02")
    rpc = await Rpc.open(idle.port, idle.token)
    sid = await create_session(rpc)
    fake_provider.default = Reply(deltas=["slow ", "answer"], delay=1.0)
    receipt = await submit(rpc, sid, "take your time")
    await asyncio.sleep(2.5)  # two idle periods: a connected client keeps it alive
    assert idle.alive(), "a connected client keeps the backend alive"
    await wait_receipt_status(rpc, receipt["admission_id"], "terminal")
    await rpc.close()
    assert idle.proc is not None
    status = await asyncio.to_thread(idle.proc.wait, 30)
    assert status == 0, "idle exit is a clean exit"
    assert not (idle.data_dir / "backend.json").exists(), "backend.json is withdrawn"


async def test_idle_exit_waits_for_turns_running_and_queued_without_a_client(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI
) -> None:
    """No client connected, but a turn running and one queued behind it: the backend
    stays up until both are done, then exits on its own."""
    idle = backend_factory(fake_provider.base_url, extra_config="idle_exit_minutes = 0.02")
    rpc = await Rpc.open(idle.port, idle.token)
    sid = await create_session(rpc)
    fake_provider.default = Reply(deltas=["slow ", "answer"], delay=1.0)  # ~2 s a turn
    await submit(rpc, sid, "first")
    await submit(rpc, sid, "queued behind")
    await rpc.close()  # nobody connected from here on
    await asyncio.sleep(3.0)  # more than two idle periods (1.2 s each)
    assert idle.alive(), "a running turn and a queued one keep the backend up"
    assert idle.proc is not None
    status = await asyncio.to_thread(idle.proc.wait, 30)
    assert status == 0, "idle exit is a clean exit"
    ran = {r.last_user_text: r for r in fake_provider.snapshot()}
    assert set(ran) == {"first", "queued behind"}, "both turns ran before the exit"
    assert not any(r.disconnected for r in ran.values()), "no reply was cut off"


async def test_idle_defaults_are_30_minutes_for_the_backend_and_5_for_the_model_server(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI
) -> None:
    """The shipped defaults, as config.get reports them."""
    started = backend_factory(fake_provider.base_url)
    rpc = await Rpc.open(started.port, started.token)
    config = await rpc.call("config.get", {})
    await rpc.close()
    assert config["idle_exit_minutes"] == 30
    assert config["local_model_idle_minutes"] == 5
