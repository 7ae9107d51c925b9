"""Scheduled prompts through the real backend: on time once, across kill -9, after downtime,
from two processes at once, and with bad input."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from backend.server.discovery import SHARE_DIR_ENV
from tests.fakes.openai_server import FakeOpenAI, Reply

from .backend_proc import REPO, Backend, Stores
from .test_full_disk import fill, small_disk, wait_for_line  # noqa: F401  (small_disk: a fixture)
from .wire import Connect, Json, Rpc, RpcError, create_session, is_event, wait_settled

QUIET_S = 1.5  # how long a backend is watched for firing something it must not
HANG = Reply(deltas=["working on it"], hang_after=1)  # streams, then hangs until hung up


def _iso(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _soon(seconds: float) -> str:
    return _iso(datetime.now(UTC) + timedelta(seconds=seconds))


async def _create(rpc: Rpc, **params: object) -> Json:
    return dict((await rpc.call("schedule.create", params))["schedule"])


async def _schedule(rpc: Rpc, schedule_id: str) -> Json:
    found = [s for s in (await rpc.call("schedule.list"))["schedules"]
             if s["schedule_id"] == schedule_id]
    assert len(found) == 1, found
    return dict(found[0])


async def _admissions(rpc: Rpc, sid: str) -> list[Json]:
    return list((await rpc.call("admission.list", {"session_id": sid}))["receipts"])


async def _wait_for(rpc: Rpc, schedule_id: str, check: Callable[[Json], bool],
                    timeout: float = 30.0) -> Json:
    """The schedule once `check` holds for it (polled: it may have changed before this
    connection could see the event)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not check(found := await _schedule(rpc, schedule_id)):
        assert asyncio.get_running_loop().time() < deadline, f"schedule still {found}"
        await asyncio.sleep(0.05)
    return found


def _fires(backend: Backend, schedule_id: str) -> list[tuple[str, str | None]]:
    return [(r["fire_at"], r["admission_id"]) for r in backend.query(
        "SELECT fire_at, admission_id FROM schedule_fires WHERE schedule_id = ?", (schedule_id,))]


def _set_next(backend: Backend, schedule_id: str, when: datetime) -> None:
    """Moves a stopped backend's schedule back in time: the same state as being down past it."""
    backend.query("UPDATE schedules SET next_fire_at = ? WHERE schedule_id = ?",
                  (_iso(when), schedule_id))


# --- on time -----------------------------------------------------------------------------------


async def test_at_fires_exactly_one_turn(connect: Connect, fake_provider: FakeOpenAI) -> None:
    fake_provider.routes["water the plants"] = Reply(deltas=["watered"])
    rpc = await connect()
    sid = await create_session(rpc)
    sched = await _create(rpc, session_id=sid, text="water the plants", at=_soon(1.5),
                          timezone="UTC")
    assert sched["next_fire_at"] == sched["at"]
    assert sched["enabled"] is True
    queued = await rpc.wait_event(is_event("admission.queued"), timeout=30)
    receipt = queued["data"]["receipt"]
    assert receipt["origin"] == f"schedule:{sched['schedule_id']}", receipt
    settled = await wait_settled(rpc, receipt["admission_id"])
    final = settled["data"]["receipt"]
    assert (final["outcome"], final["final_text"]) == ("completed", "watered"), final
    assert final["origin"] == f"schedule:{sched['schedule_id']}"

    await asyncio.sleep(QUIET_S)
    assert [a["admission_id"] for a in await _admissions(rpc, sid)] == [receipt["admission_id"]]
    after = await _schedule(rpc, sched["schedule_id"])
    assert after["next_fire_at"] is None, "a one-shot fires no more"
    assert (after["last_fired_at"], after["last_admission_id"], after["last_session_id"]) == (
        sched["at"], receipt["admission_id"], sid)
    changes = [e for e in rpc.events if e["type"] == "schedule.changed"]
    assert [e["data"].get("fired", False) for e in changes] == [False, True], "created, fired"
    assert changes
    assert changes[-1]["data"]["schedule"]["last_admission_id"] == receipt["admission_id"]
    assert len(fake_provider.snapshot()) == 1


async def test_new_session_each_firing(connect: Connect, fake_provider: FakeOpenAI,
                                       tmp_path: Path) -> None:
    fake_provider.routes["daily report"] = Reply(deltas=["reported"])
    rpc = await connect()
    sched = await _create(rpc, new_session={"title": "Report", "cwd": str(tmp_path)},
                          text="daily report", at=_soon(1), timezone="Europe/Paris")
    created = await rpc.wait_event(lambda e: e["type"] == "session.created", timeout=30)
    session = created["data"]["session"]
    assert (session["title"], session["cwd"]) == ("Report", str(tmp_path))
    await rpc.wait_until(lambda: any(
        e["type"] == "schedule.changed" and (e["data"].get("schedule") or {}).get("last_session_id")
        for e in rpc.events))
    after = await _schedule(rpc, sched["schedule_id"])
    assert after["last_session_id"] == session["session_id"]
    receipts = await _admissions(rpc, session["session_id"])
    assert len(receipts) == 1
    assert receipts[0]["origin"] == f"schedule:{sched['schedule_id']}"


async def test_deleted_session_disables_the_schedule(connect: Connect) -> None:
    rpc = await connect()
    sid = await create_session(rpc)
    sched = await _create(rpc, session_id=sid, text="never runs", at=_soon(1.5), timezone="UTC")
    await rpc.call("session.delete", {"session_id": sid})
    await rpc.wait_until(lambda: any(
        e["type"] == "schedule.changed" and (e["data"].get("schedule") or {}).get("disabled_reason")
        for e in rpc.events), timeout=30)
    after = await _schedule(rpc, sched["schedule_id"])
    assert after["enabled"] is False
    assert after["next_fire_at"] is None
    assert "deleted" in after["disabled_reason"]


# --- crashes and downtime ------------------------------------------------------------------------


async def test_kill9_at_fire_time_runs_once(backend: Backend, connect: Connect,
                                            fake_provider: FakeOpenAI) -> None:
    fake_provider.routes["crash at fire"] = HANG
    rpc = await connect(name="before")
    sid = await create_session(rpc)
    sched = await _create(rpc, session_id=sid, text="crash at fire", at=_soon(1), timezone="UTC")
    queued = await rpc.wait_event(is_event("admission.queued"), timeout=30)
    await rpc.wait_event(is_event("turn.started", queued["data"]["receipt"]["admission_id"]))
    backend.kill9()  # the firing committed, its turn runs: it must not fire again
    await rpc.wait_closed()
    backend.start()
    rpc = await connect(name="after")
    await asyncio.sleep(QUIET_S)
    receipts = await _admissions(rpc, sid)
    assert len(receipts) == 1, receipts
    assert receipts[0]["status"] == "unknown", "a started turn of a dead process is recovered"
    assert receipts[0]["request_id"] == f"schedule:{sched['schedule_id']}:{sched['at']}"
    assert _fires(backend, sched["schedule_id"]) == [(sched["at"], receipts[0]["admission_id"])]
    assert fake_provider.snapshot() == [], "killed before its model call, nothing re-runs it"


async def _downtime(backend: Backend, connect: Connect,
                    missed: str) -> tuple[Json, list[Json], datetime]:
    """A schedule firing every minute whose backend was down for 3 of its slots; returns the
    schedule, the admissions of slots before the restart (a minute that turns while the
    test watches fires on time, whatever the policy) and when the backend was started.

    The schedule's next slot is compared with that start, never with the clock after the
    read: a minute that turns between the read and the check left a due slot that has not
    fired yet (seen in CI: next 15:40:00, checked at 15:40:00.0013)."""
    rpc = await connect(name="before")
    sid = await create_session(rpc)
    sched = await _create(rpc, session_id=sid, text="every minute", cron="* * * * *",
                          timezone="UTC", missed=missed)
    await rpc.close()
    backend.terminate()
    # Stopped, it slept through three slots: as if down since 3 minutes before its next one.
    _set_next(backend, sched["schedule_id"],
              datetime.fromisoformat(sched["next_fire_at"]) - timedelta(minutes=3))
    starting = datetime.now(UTC)
    backend.start()
    restarted = _iso(datetime.now(UTC))  # the scheduler started before READY: slots after it are on time
    rpc = await connect(name="after")
    # Its first round, at start, moved it past the missed slots (firing one, or none).
    await _wait_for(rpc, sched["schedule_id"],
                    lambda s: datetime.fromisoformat(s["next_fire_at"]) > datetime.now(UTC))
    await asyncio.sleep(QUIET_S)
    missed_ones = [r for r in await _admissions(rpc, sid)
                   if _slot(r) < restarted]
    return await _schedule(rpc, sched["schedule_id"]), missed_ones, starting


def _slot(receipt: Json) -> str:
    """The fire time in a scheduled admission's request id (schedule:ID:TIME)."""
    return str(receipt["request_id"]).split(":", 2)[2]


async def test_missed_slots_fire_once_with_run_once(backend: Backend, connect: Connect,
                                                    fake_provider: FakeOpenAI) -> None:
    sched, receipts, starting = await _downtime(backend, connect, "run_once")
    assert len(receipts) == 1, f"three missed slots fire once: {receipts}"
    fires = dict(_fires(backend, sched["schedule_id"]))
    assert fires[_slot(receipts[0])] == receipts[0]["admission_id"]
    latest = datetime.fromisoformat(_slot(receipts[0]))
    assert datetime.now(UTC) - latest < timedelta(minutes=2), "the latest missed slot fires"
    assert datetime.fromisoformat(sched["next_fire_at"]) > starting, "moved past missed slots"


async def test_missed_slots_are_skipped_with_skip(backend: Backend, connect: Connect) -> None:
    sched, receipts, starting = await _downtime(backend, connect, "skip")
    assert receipts == [], "skip: nothing missed runs"
    assert datetime.fromisoformat(sched["next_fire_at"]) > starting, "moved past missed slots"


async def test_one_shot_missed_while_down_fires_on_start(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI
) -> None:
    rpc = await connect(name="before")
    sid = await create_session(rpc)
    sched = await _create(rpc, session_id=sid, text="while down", at=_soon(60), timezone="UTC")
    await rpc.close()
    backend.terminate()
    _set_next(backend, sched["schedule_id"], datetime.now(UTC) - timedelta(minutes=5))
    backend.start()
    rpc = await connect(name="after")
    fired = await _wait_for(rpc, sched["schedule_id"], lambda s: s["last_fired_at"] is not None)
    assert fired["next_fire_at"] is None
    await asyncio.sleep(QUIET_S)
    assert len(await _admissions(rpc, sid)) == 1


# --- two processes, one database ----------------------------------------------------------------

FIRE_PROC = Path(__file__).with_name("schedule_fire_proc.py")


async def test_two_processes_fire_the_same_slot_once(backend: Backend, connect: Connect,
                                                     tmp_path: Path) -> None:
    rpc = await connect()
    sid = await create_session(rpc)
    sched = await _create(rpc, session_id=sid, text="only once", at=_soon(120), timezone="UTC")
    await rpc.close()
    backend.terminate()  # its scheduler must not fire it: the two processes below race for it
    go = tmp_path / "go"
    now = _iso(datetime.fromisoformat(sched["at"]) + timedelta(seconds=1))
    procs = [await asyncio.create_subprocess_exec(
        sys.executable, str(FIRE_PROC), backend.store or str(backend.data_dir / "state.db"),
        sched["schedule_id"],
        now, str(go), str(tmp_path / f"ready{i}"), cwd=REPO, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    ) for i in range(2)]
    deadline = asyncio.get_running_loop().time() + 30
    while not all((tmp_path / f"ready{i}").exists() for i in range(2)):  # both opened the database
        assert asyncio.get_running_loop().time() < deadline, "the firing processes did not start"
        await asyncio.sleep(0.02)
    go.touch()
    outputs = [await asyncio.wait_for(proc.communicate(), 60) for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0], outputs
    results = sorted(out.decode().strip() for out, _ in outputs)
    assert results[0].startswith("fired adm_"), results
    assert results[1] == "none", results
    fires = _fires(backend, sched["schedule_id"])
    assert fires == [(sched["at"], results[0].split()[1])]
    [count] = backend.query("SELECT COUNT(*) AS n FROM admissions WHERE session_id = ?", (sid,))
    assert count["n"] == 1


# --- bad input and scopes -------------------------------------------------------------------------


async def _refused(rpc: Rpc, params: Json) -> RpcError:
    try:
        await rpc.call("schedule.create", params)
    except RpcError as exc:
        return exc
    raise AssertionError(f"schedule.create accepted {params}")


async def test_bad_input_is_refused_with_a_helpful_message(connect: Connect, tmp_path: Path) -> None:
    rpc = await connect()
    sid = await create_session(rpc)
    base: Json = {"session_id": sid, "text": "hi", "timezone": "UTC"}
    cases: list[tuple[Json, str, str]] = [
        ({**base, "cron": "61 * * * *"}, "cron", "out of range"),
        ({**base, "cron": "0 9 * *"}, "cron", "5 fields"),
        ({**base, "cron": "0 9 * * funday"}, "cron", "day of week"),
        ({**base, "cron": "0 0 31 2 *"}, "cron", "never"),
        ({**base, "cron": "0 9 * * *", "timezone": "Mars/Olympus"}, "timezone", "IANA"),
        ({**base, "cron": "0 9 * * *", "at": _soon(60)}, "cron", "exactly one"),
        ({**base}, "cron", "exactly one"),
        ({**base, "at": "tomorrow"}, "at", "ISO 8601"),
        ({**base, "at": "2001-01-01T00:00Z"}, "at", "past"),
        ({"text": "hi", "cron": "0 9 * * *"}, "session_id", "exactly one"),
        ({**base, "cron": "0 9 * * *", "new_session": {"cwd": str(tmp_path)}}, "session_id", "exactly one"),
        ({"text": " ", "session_id": sid, "cron": "0 9 * * *"}, "text", "empty"),
    ]
    for params, field, words in cases:
        exc = await _refused(rpc, params)
        assert exc.code == -32602, (params, exc)
        assert exc.data.get("field") == field, (params, exc)
        assert words in exc.message, (params, exc)
    missing = await _refused(rpc, {**base, "session_id": "ses_nope", "cron": "0 9 * * *"})
    assert missing.code == -32004
    assert (await rpc.call("schedule.list"))["schedules"] == []


async def test_update_and_delete(connect: Connect) -> None:
    rpc = await connect()
    sid = await create_session(rpc)
    sched = await _create(rpc, session_id=sid, text="weekdays", cron="0 9 * * 1-5",
                          timezone="Europe/Paris")
    nxt = datetime.fromisoformat(sched["next_fire_at"]).astimezone(
        ZoneInfo("Europe/Paris"))
    assert (nxt.hour, nxt.minute) == (9, 0)
    assert nxt.isoweekday() <= 5
    off = (await rpc.call("schedule.update", {"schedule_id": sched["schedule_id"], "enabled": False}))
    assert off["schedule"]["enabled"] is False
    assert off["schedule"]["next_fire_at"] is None
    on = (await rpc.call("schedule.update", {"schedule_id": sched["schedule_id"], "enabled": True,
                                             "cron": "30 7 * * *", "text": "daily"}))["schedule"]
    assert (on["cron"], on["text"], on["enabled"]) == ("30 7 * * *", "daily", True)
    assert on["next_fire_at"] is not None
    with pytest.raises(RpcError) as bad:
        await rpc.call("schedule.update", {"schedule_id": sched["schedule_id"], "cron": "bad"})
    assert bad.value.code == -32602
    assert (await rpc.call("schedule.delete", {"schedule_id": sched["schedule_id"]})) == {"deleted": True}
    assert (await rpc.call("schedule.list"))["schedules"] == []
    deleted = [e for e in rpc.events if e["type"] == "schedule.changed" and e["data"].get("deleted")]
    assert [e["data"]["schedule_id"] for e in deleted] == [sched["schedule_id"]]
    with pytest.raises(RpcError) as twice:
        await rpc.call("schedule.delete", {"schedule_id": sched["schedule_id"]})
    assert twice.value.code == -32004


async def test_read_only_token_cannot_schedule(connect: Connect) -> None:
    owner = await connect()
    minted = await owner.call("token.create", {"label": "reader", "scopes": ["read"]})
    reader = await connect(token=minted["token"])
    assert (await reader.call("schedule.list"))["schedules"] == []
    with pytest.raises(RpcError) as refused:
        await reader.call("schedule.create", {"session_id": "x", "text": "hi", "cron": "* * * * *"})
    assert refused.value.code == -32003


async def test_a_revoked_tokens_schedule_does_not_fire(connect: Connect) -> None:
    owner = await connect()
    minted = await owner.call("token.create", {"label": "script", "scopes": ["read", "submit"]})
    script = await connect(token=minted["token"], name="script")
    sid = await create_session(script)
    sched = await _create(script, session_id=sid, text="from a script", at=_soon(2), timezone="UTC")
    await owner.call("token.revoke", {"token_id": minted["token_id"]})
    await owner.wait_until(lambda: any(
        e["type"] == "schedule.changed" and (e["data"].get("schedule") or {}).get("disabled_reason")
        for e in owner.events), timeout=30)
    after = await _schedule(owner, sched["schedule_id"])
    assert after["enabled"] is False
    assert "revoked" in after["disabled_reason"]
    assert await _admissions(owner, sid) == []


@pytest.mark.parametrize("ending", ["scopes", "expiry"])
async def test_a_token_that_lost_submit_or_expired_fires_its_schedule_no_more(
    connect: Connect, ending: str,
) -> None:
    owner = await connect()
    lifetime = {"expires_in_s": 2} if ending == "expiry" else {}
    minted = await owner.call("token.create", {"label": "script", "scopes": ["read", "submit"],
                                               **lifetime})
    script = await connect(token=minted["token"], name="script")
    sid = await create_session(script)
    sched = await _create(script, session_id=sid, text="from a script", at=_soon(4), timezone="UTC")
    if ending == "scopes":
        await owner.call("token.update", {"token_id": minted["token_id"], "scopes": ["read"]})
    after = await _wait_for(owner, sched["schedule_id"], lambda s: not s["enabled"])
    reason = after["disabled_reason"]
    assert ("submit scope" if ending == "scopes" else "expired at") in reason, reason
    assert await _admissions(owner, sid) == []


# --- a store that cannot write -------------------------------------------------------------------

SCHEDULER_WAITS = "scheduler: cannot fire schedules"  # the backend's stderr line


@pytest.mark.sqlite_only("fills the disk under DATA_DIR/state.db")
async def test_a_full_disk_at_fire_time_delays_the_firing_and_it_runs_once(
    small_disk: Path, tmp_path: Path, fake_provider: FakeOpenAI,  # noqa: F811  (the fixture)
) -> None:
    fake_provider.routes["after the disk"] = Reply(deltas=["room again"])
    backend = Backend(small_disk, fake_provider.base_url)
    backend.stderr_path = tmp_path / "backend-stderr.log"  # off the disk that fills
    backend.start()
    try:
        rpc = await Rpc.open(backend.port, backend.token)
        sid = await create_session(rpc)
        sched = await _create(rpc, session_id=sid, text="after the disk", at=_soon(2),
                              timezone="UTC", missed="skip")
        ballast = fill(small_disk)
        await wait_for_line(backend, SCHEDULER_WAITS)  # it came, and could not be saved
        assert await _admissions(rpc, sid) == []
        ballast.unlink()
        # Late, but it came while the scheduler watched: not "missed", even with skip.
        fired = await _wait_for(rpc, sched["schedule_id"], lambda s: s["last_admission_id"] is not None)
        settled = await wait_settled(rpc, fired["last_admission_id"])
        assert settled["data"]["receipt"]["final_text"] == "room again"
        await asyncio.sleep(QUIET_S)
        assert len(await _admissions(rpc, sid)) == 1
        assert backend.alive()
        await rpc.close()
    finally:
        backend.close()


async def test_two_backends_on_one_folder_fire_a_schedule_once(
    tmp_path: Path, fake_provider: FakeOpenAI, store: Stores
) -> None:
    """Two whole backends on one data folder (the folder lock bypassed, as in test_lease.py),
    so on one store (on PostgreSQL: one database), both schedulers armed for the same moment:
    one admission, one turn, one model call."""
    env = {SHARE_DIR_ENV: "1"}
    data_dir = tmp_path / "shared"
    shared = store.new()
    a = Backend(data_dir, fake_provider.base_url, extra_env=env, store=shared)
    b = Backend(data_dir, fake_provider.base_url, extra_env=env, store=shared)
    fake_provider.routes["fire me once"] = Reply(deltas=["Fired once."])
    rpcs: list[Rpc] = []
    try:
        a.start()
        rpcs.append(rpc_a := await Rpc.open(a.port, a.token, name="a"))
        sid = await create_session(rpc_a)
        sched = await _create(rpc_a, session_id=sid, text="fire me once", at=_soon(10),
                              timezone="UTC")
        b.start()
        rpcs.append(rpc_b := await Rpc.open(b.port, b.token, name="b"))
        # B read the schedule at its start; an update through B arms its scheduler now too
        # (a scheduler hears of changes made through its own process at once).
        armed = (await rpc_b.call("schedule.update", {"schedule_id": sched["schedule_id"],
                                                      "enabled": True}))["schedule"]
        assert not armed.get("last_admission_id"), "both were up before the fire time"
        await _wait_for(rpc_a, sched["schedule_id"], lambda s: bool(s.get("last_admission_id")))
        await asyncio.sleep(QUIET_S)  # a second firing, by the other backend, would show now
        receipts = await _admissions(rpc_a, sid)
        assert len(receipts) == 1, receipts
        assert receipts[0]["request_id"] == f"schedule:{sched['schedule_id']}:{sched['at']}"
        assert _fires(a, sched["schedule_id"]) == [(sched["at"], receipts[0]["admission_id"])]
        done = await _wait_for_terminal(rpc_b, receipts[0]["admission_id"])
        assert done["final_text"] == "Fired once."
        asked = [r for r in fake_provider.snapshot() if r.last_user_text == "fire me once"]
        assert len(asked) == 1, "one turn, run by one of the two backends"
    finally:
        for rpc in rpcs:
            await rpc.close()
        for backend in (a, b):
            backend.close()
        errors = a.logged_errors()
        assert not errors, "a backend logged errors:\n" + "\n".join(errors[:20])


async def _wait_for_terminal(rpc: Rpc, admission_id: str, timeout: float = 30.0) -> Json:
    deadline = asyncio.get_running_loop().time() + timeout
    while (receipt := (await rpc.call("admission.get", {"admission_id": admission_id}))["receipt"]
           )["status"] != "terminal":
        assert asyncio.get_running_loop().time() < deadline, receipt
        await asyncio.sleep(0.05)
    return dict(receipt)
