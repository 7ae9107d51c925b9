"""The schedules and schedule_fires tables: prompts to submit later, and each firing once."""

from __future__ import annotations

from typing import Any

from backend.ids import now
from backend.store import events
from backend.store.db import Tx
from backend.store.records import Record
from shared.literals import MissedPolicy


class ScheduleRecord(Record, frozen=True):
    """A schedules row."""

    schedule_id: str
    principal: str
    session_id: str | None
    new_session: str | None  # JSON: the title, cwd and model of each firing's new session
    text: str
    cron: str | None
    at: str | None
    timezone: str
    missed: MissedPolicy
    enabled: bool
    disabled_reason: str | None
    next_fire_at: str | None
    last_fired_at: str | None
    last_admission_id: str | None
    last_session_id: str | None
    created_at: str
    updated_at: str


class ScheduleChange(events.Report, frozen=True, tag="schedule"):
    """A schedule was created, updated, fired (`fired`) or deleted (`row` None) in the
    committed job: `schedule.changed`."""

    schedule_id: str
    row: ScheduleRecord | None = None
    fired: bool = False


COLUMNS = ("schedule_id", "principal", "session_id", "new_session", "text", "cron", "at",
           "timezone", "missed", "enabled", "next_fire_at")


def insert(tx: Tx, values: dict[str, Any]) -> ScheduleRecord:
    ts = now()
    row = {**values, "created_at": ts, "updated_at": ts}
    names = ", ".join(row)
    marks = ", ".join(f":{k}" for k in row)
    tx.execute(f"INSERT INTO schedules ({names}) VALUES ({marks})", row)
    found = get(tx, values["schedule_id"])
    assert found is not None
    return found


def get(tx: Tx, schedule_id: str) -> ScheduleRecord | None:
    r = tx.one("SELECT * FROM schedules WHERE schedule_id = ?", (schedule_id,))
    return ScheduleRecord.from_row(r) if r is not None else None


def all_(tx: Tx) -> list[ScheduleRecord]:
    return ScheduleRecord.from_rows(tx.all("SELECT * FROM schedules ORDER BY created_at, schedule_id"))


def update(tx: Tx, schedule_id: str, fields: dict[str, Any], *, fired: bool = False) -> ScheduleRecord:
    """Sets `fields` (column names of ours, never a caller's) and announces the change
    (`fired`: the change is a firing)."""
    sets = ", ".join(f"{k} = :{k}" for k in fields)
    tx.execute(f"UPDATE schedules SET {sets}, updated_at = :updated_at WHERE schedule_id = :id",
               {**fields, "updated_at": now(), "id": schedule_id})
    found = get(tx, schedule_id)
    assert found is not None
    changed(tx, found, fired=fired)
    return found


def delete(tx: Tx, schedule_id: str) -> bool:
    cur = tx.execute("DELETE FROM schedules WHERE schedule_id = ?", (schedule_id,))
    if cur.rowcount:
        tx.publish(ScheduleChange(ts=now(), schedule_id=schedule_id))
    return bool(cur.rowcount)


def changed(tx: Tx, row: ScheduleRecord, *, fired: bool = False) -> None:
    """Reports the change (the edge broadcasts `schedule.changed` to every reader) when
    this job commits."""
    tx.publish(ScheduleChange(ts=now(), schedule_id=row.schedule_id, row=row, fired=fired))


def due(tx: Tx, at: str) -> list[str]:
    """Enabled schedules whose next firing is at or before `at` (same string format)."""
    return [r[0] for r in tx.all(
        "SELECT schedule_id FROM schedules WHERE enabled <> 0 AND next_fire_at IS NOT NULL "
        "AND next_fire_at <= ? ORDER BY next_fire_at", (at,),
    )]


def earliest(tx: Tx) -> str | None:
    """The soonest next firing of any enabled schedule."""
    r = tx.one("SELECT MIN(next_fire_at) FROM schedules WHERE enabled <> 0")
    return str(r[0]) if r is not None and r[0] is not None else None


def claim_fire(tx: Tx, schedule_id: str, fire_at: str) -> bool:
    """Records the firing of (schedule, time); False when it was recorded already: then it
    fired (or is firing) elsewhere, and the caller must do nothing."""
    cur = tx.execute(
        "INSERT INTO schedule_fires (schedule_id, fire_at) VALUES (?, ?) ON CONFLICT DO NOTHING",
        (schedule_id, fire_at),
    )
    return cur.rowcount == 1


def fired(tx: Tx, schedule_id: str, fire_at: str, admission_id: str, session_id: str) -> None:
    tx.execute("UPDATE schedule_fires SET admission_id = ?, session_id = ? "
               "WHERE schedule_id = ? AND fire_at = ?",
               (admission_id, session_id, schedule_id, fire_at))


def fires(tx: Tx, schedule_id: str) -> list[tuple[str, str | None]]:
    """Every recorded firing of a schedule: (fire_at, admission_id), oldest first."""
    return [(r[0], r[1]) for r in tx.all(
        "SELECT fire_at, admission_id FROM schedule_fires WHERE schedule_id = ? ORDER BY fire_at",
        (schedule_id,),
    )]
