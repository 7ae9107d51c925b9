"""The firing transaction on a real store: once per (schedule, time), and the ways it stops."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from backend.authority import schedules as firing
from backend.store import admissions, schedules, sessions, tokens
from backend.store.db import Database, Tx

AT = datetime(2026, 12, 1, 9, tzinfo=UTC)
LATER = AT + timedelta(seconds=5)
STARTED = AT - timedelta(hours=1)  # the scheduler watched since before the firing: on time


def _schedule(tx: Tx, **fields: Any) -> str:
    values: dict[str, Any] = dict(
        schedule_id="sch_1", principal="owner", session_id="ses_1", new_session=None,
        text="water the plants", cron=None, at="2026-12-01T09:00:00Z", timezone="UTC",
        missed="run_once", enabled=True, next_fire_at="2026-12-01T09:00:00Z")
    values.update(fields)
    return schedules.insert(tx, values).schedule_id


async def _setup(db: Database, **fields: Any) -> None:
    def job(tx: Tx) -> None:
        sessions.insert(tx, "ses_1", "Plants", "/", "fake-model")
        _schedule(tx, **fields)

    await db.write(job)


async def _fire(db: Database, now: datetime = LATER) -> firing.Fired | None:
    return await db.write(lambda tx: firing.fire_due(tx, "sch_1", now, STARTED, "fake-model"))


async def _row(db: Database) -> schedules.ScheduleRecord:
    row = await db.read(lambda tx: schedules.get(tx, "sch_1"))
    assert row is not None
    return row


async def test_fires_once_and_records_it(db: Database) -> None:
    await _setup(db)
    fired = await _fire(db)
    assert fired is not None
    assert fired.fire_at == "2026-12-01T09:00:00Z"
    receipt = fired.receipt
    assert (receipt.request_id, receipt.origin) == ("schedule:sch_1:2026-12-01T09:00:00Z", "schedule:sch_1")
    assert receipt.status == "queued"
    row = await _row(db)
    assert (row.next_fire_at, row.last_fired_at, row.last_admission_id) == (
        None, "2026-12-01T09:00:00Z", receipt.admission_id)
    assert await _fire(db) is None, "nothing more to fire"


async def test_a_second_firing_of_the_same_time_does_nothing(db: Database) -> None:
    """As if a crash lost the move of next_fire_at, or a second process read the old row."""
    await _setup(db)
    assert await _fire(db) is not None
    await db.write(lambda tx: schedules.update(tx, "sch_1", {"next_fire_at": "2026-12-01T09:00:00Z"}))
    assert await _fire(db) is None
    count = await db.read(lambda tx: len(admissions.list_for(tx, "ses_1", None)))
    assert count == 1
    assert (await _row(db)).next_fire_at is None, "moved on all the same"


async def test_a_deleted_session_disables_it(db: Database) -> None:
    await _setup(db)
    await db.write(lambda tx: sessions.delete(tx, "ses_1"))
    assert await _fire(db) is None
    row = await _row(db)
    assert (row.enabled, row.next_fire_at) == (False, None)
    assert row.disabled_reason is not None
    assert "deleted" in row.disabled_reason


async def test_a_revoked_token_disables_it(db: Database) -> None:
    await _setup(db, principal="tok_1")
    await db.write(lambda tx: tokens.insert(tx, "tok_1", "hash", ["read", "submit"], "script"))
    await db.write(lambda tx: tokens.revoke(tx, "tok_1"))
    assert await _fire(db) is None
    row = await _row(db)
    assert row.enabled is False
    assert "revoked" in (row.disabled_reason or "")


async def test_an_unreadable_zone_disables_it(db: Database) -> None:
    await _setup(db, timezone="Gone/Zone")
    assert await _fire(db) is None
    assert "timing cannot be read" in ((await _row(db)).disabled_reason or "")


async def test_a_new_session_each_time(db: Database, tmp_path: Path) -> None:
    spec = json.dumps({"title": None, "cwd": str(tmp_path), "model": None})
    await _setup(db, session_id=None, new_session=spec, cron="0 9 * * *", at=None)
    fired = await _fire(db)
    assert fired is not None
    made = await db.read(lambda tx: sessions.row(tx, fired.receipt.session_id))
    assert made is not None
    assert (made.cwd, made.model, made.title) == (str(tmp_path), "fake-model", "water the plants")
    row = await _row(db)
    assert row.last_session_id == made.session_id
    assert row.next_fire_at == "2026-12-02T09:00:00Z"


async def test_a_folder_that_went_disables_it(db: Database, tmp_path: Path) -> None:
    spec = json.dumps({"cwd": str(tmp_path / "gone")})
    await _setup(db, session_id=None, new_session=spec)
    assert await _fire(db) is None
    assert "no longer exists" in ((await _row(db)).disabled_reason or "")


async def test_skip_moves_past_missed_firings_without_one(db: Database) -> None:
    await _setup(db, cron="0 * * * *", at=None, missed="skip", next_fire_at="2026-12-01T06:00:00Z")
    now = AT + timedelta(minutes=30)
    assert await db.write(lambda tx: firing.fire_due(tx, "sch_1", now, now, "m")) is None
    assert (await _row(db)).next_fire_at == "2026-12-01T10:00:00Z"
