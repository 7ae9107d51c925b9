"""Turns whose end was never recorded: after a crash (recover) and in place (settle_lost)."""

from __future__ import annotations

import sqlite3
import time

import pytest

from backend.authority.recovery import RECOVERED_NOTE, UNSAVED_NOTE, recover, settle_lost
from backend.errors import StoreUnavailable
from backend.store import admissions, events, leases, messages, sessions
from backend.store.db import Database, Tx
from backend.store.fenced import COUNTS
from backend.store.leases import Holder
from backend.turn.finalize import UNRECORDED_RESULT
from backend.turn.lease import LEASE_EXPIRED_NOTE, TAKEN_OVER_RESULT, try_take

HOLDER = Holder(pid=1, pid_start="then", boot_token="boot", epoch=1, turn_id="turn_1")
OTHER = Holder(pid=2, pid_start="now", boot_token="boot", epoch=1, turn_id="turn_2")


def a_turn(tx: Tx) -> None:
    """Session s runs turn_1 (admission adm_1, epoch 1), which called a tool; HOLDER holds
    the lease."""
    sessions.insert(tx, "s", "t", "/", "m")
    admissions.insert(tx, "adm_1", "p", "s", "r1", '{"text": "hi"}', "d")
    admissions.mark_started(tx, "adm_1", 1, "turn_1")
    leases.put(tx, "s", HOLDER, time.time(), 300)
    messages.insert(tx, "s", "user", "hi", turn_id="turn_1")
    messages.insert(tx, "s", "assistant", "", turn_id="turn_1",
                    tool_calls=[{"call_id": "c1", "name": "terminal", "arguments": {}}])
    events.append(tx, "s", "tool.start", {"call_id": "c1"}, turn_id="turn_1")


def a_turn_mid_tool(tx: Tx) -> None:
    """turn_1 while its call c1 runs."""
    a_turn(tx)


def a_turn_mid_stream(tx: Tx) -> None:
    """turn_1 after c1 returned, while the next answer streams: "partial " so far."""
    a_turn(tx)
    messages.insert(tx, "s", "tool", "done", turn_id="turn_1", status="ok", call_id="c1",
                    tool_name="terminal")
    events.append(tx, "s", "tool.complete", {"call_id": "c1"}, turn_id="turn_1")
    events.append(tx, "s", "message.delta", {"text": "partial "}, turn_id="turn_1")


def shape(tx: Tx) -> list[tuple[str, str | None, str | None, str]]:
    return [(r["role"], r["status"], r["note_kind"], r["content"])
            for r in tx.all("SELECT * FROM messages WHERE session_id = 's' ORDER BY id")]


def status(tx: Tx) -> str:
    row = admissions.by_id(tx, "adm_1")
    assert row is not None
    return row.status


async def test_settle_lost_keeps_what_was_streamed(db: Database) -> None:
    await db.write(a_turn_mid_stream)
    assert await db.write(lambda tx: settle_lost(tx, "adm_1", "turn_1", HOLDER))
    assert await db.read(status) == "unknown"
    assert await db.read(shape) == [
        ("user", None, None, "hi"),
        ("assistant", None, None, ""),
        ("tool", "ok", None, "done"),
        ("assistant", "unknown", None, "partial "),  # what people saw, marked
        ("system_note", None, "recovered", UNSAVED_NOTE),
    ]
    assert await db.read(lambda tx: leases.current(tx, "s")) is None, "the lease is released"
    assert await db.read(lambda tx: sessions.status(tx, "s")) == "unknown"

    rows = await db.read(shape)
    assert not await db.write(lambda tx: settle_lost(tx, "adm_1", "turn_1", HOLDER)), "once"
    assert await db.read(shape) == rows


async def test_settle_lost_gives_a_running_call_an_unknown_result(db: Database) -> None:
    await db.write(a_turn_mid_tool)
    assert await db.write(lambda tx: settle_lost(tx, "adm_1", "turn_1", HOLDER))
    assert await db.read(shape) == [
        ("user", None, None, "hi"),
        ("assistant", None, None, ""),
        ("tool", "unknown", None, UNRECORDED_RESULT),  # never a made-up success
        ("system_note", None, "recovered", UNSAVED_NOTE),
    ]


async def test_settle_lost_does_nothing_to_a_settled_admission(db: Database) -> None:
    await db.write(a_turn_mid_stream)
    await db.write(lambda tx: admissions.settle(tx, "adm_1", "failed", failure_reason="x"))
    assert not await db.write(lambda tx: settle_lost(tx, "adm_1", "turn_1", HOLDER))
    assert await db.read(status) == "terminal"
    assert not await db.write(lambda tx: settle_lost(tx, "adm_9", "turn_1", HOLDER))


async def test_settle_lost_writes_nothing_under_another_holders_lease(db: Database) -> None:
    """Whoever took the lease took the turn and settles it (turn/lease.take_turn): the
    holder that lost it writes nothing at all, not even its receipt."""
    await db.write(a_turn_mid_stream)
    before = await db.read(shape)
    await db.write(lambda tx: leases.put(tx, "s", OTHER, time.time(), 300))
    assert await db.write(lambda tx: settle_lost(tx, "adm_1", "turn_1", HOLDER))
    assert await db.read(status) == "started"
    assert await db.read(shape) == before, "the transcript is the other holder's to write"
    lease = await db.read(lambda tx: leases.current(tx, "s"))
    assert lease is not None
    assert lease.holder == OTHER


async def test_recovery_after_a_crash_leaves_the_same_shape(db: Database) -> None:
    await db.write(a_turn_mid_stream)
    await db.write(lambda tx: leases.release(tx, "s", HOLDER))  # the dead holder's ran out
    await db.write(lambda tx: recover(tx, epoch=2))
    assert await db.read(status) == "unknown"
    rows = await db.read(shape)
    assert [r[:3] for r in rows] == [
        ("user", None, None), ("assistant", None, None), ("tool", "ok", None),
        ("assistant", "unknown", None), ("system_note", None, "recovered")]
    assert rows[-1][3] == RECOVERED_NOTE


async def test_write_patiently_outlasts_a_brief_failure(db: Database) -> None:
    failures = [sqlite3.OperationalError("database or disk is full")] * 2

    def job(tx: Tx) -> str:
        if failures:
            raise failures.pop()
        return "saved"

    assert await db.write_patiently(job, (0.0, 0.0, 0.0)) == "saved"
    assert not failures


async def test_write_patiently_gives_up_after_its_delays(db: Database) -> None:
    tries = []

    def job(tx: Tx) -> None:
        tries.append(1)
        raise sqlite3.OperationalError("database or disk is full")

    with pytest.raises(StoreUnavailable, match="disk is full") as caught:
        await db.write_patiently(job, (0.0, 0.0))
    assert len(tries) == 3, "once, then once after each delay"
    assert isinstance(caught.value.__cause__, sqlite3.OperationalError), "SQLite's error kept"


async def test_recovery_cancels_a_sub_agents_task_nobody_waits_for_any_more(db: Database) -> None:
    def job(tx: Tx) -> None:
        sessions.insert(tx, "s", "t", "/", "m")
        sessions.insert(tx, "q", "t", "/", "m")
        admissions.insert(tx, "adm_child", "delegate:s", "s", "delegate:c1", '{"text": "go"}', "d")
        admissions.insert(tx, "adm_person", "owner", "q", "r1", '{"text": "hi"}', "d")

    await db.write(job)
    queued = await db.write(lambda tx: recover(tx, epoch=2))
    assert queued == ["q"], "a person's queued prompt still runs after a restart"
    child = await db.read(lambda tx: admissions.by_id(tx, "adm_child"))
    assert child is not None
    assert (child.status, child.outcome) == ("terminal", "cancelled")
    assert child.failure_reason is not None
    assert "its parent's call is unknown" in child.failure_reason
    settled = await db.read(lambda tx: events.since(tx, "s", 0, 10))
    assert [e.type for e in settled][-1] == "admission.settled"


async def test_taking_an_expired_lease_takes_its_turn_and_counts_it(db: Database) -> None:
    """The taker ends the turn it took `unknown` (its open call too, with what it streamed
    kept), since the holder's own end is fenced from now on; a second look changes nothing."""
    await db.write(a_turn_mid_tool)
    await db.write(lambda tx: leases.put(tx, "s", HOLDER, time.time() - 400, 300))  # expired
    before = COUNTS.takeovers
    assert await db.write(lambda tx: try_take(tx, "s", OTHER, 300)) is None
    assert await db.read(status) == "unknown"
    assert COUNTS.takeovers == before + 1
    assert await db.read(shape) == [
        ("user", None, None, "hi"),
        ("assistant", None, None, ""),
        ("tool", "unknown", None, TAKEN_OVER_RESULT),
        ("system_note", None, "recovered", LEASE_EXPIRED_NOTE),
    ]
    lease = await db.read(lambda tx: leases.current(tx, "s"))
    assert lease is not None
    assert lease.holder == OTHER
    assert await db.write(lambda tx: try_take(tx, "s", OTHER, 300)) is None  # its own: no-op
    assert COUNTS.takeovers == before + 1


async def test_a_live_holders_lease_is_not_taken(db: Database) -> None:
    await db.write(a_turn_mid_tool)
    held = await db.write(lambda tx: try_take(tx, "s", OTHER, 300))
    assert held is not None
    assert held.holder == HOLDER
    assert await db.read(status) == "started"
