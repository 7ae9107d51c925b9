"""What `schedule.create` and `schedule.update` store: checked params as column values (no I/O
but the clock the caller passes).  Every mistake is an InvalidParams naming the field."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from backend.authority import timing
from backend.errors import InvalidParams
from backend.ids import new_id
from backend.store.schedules import ScheduleRecord
from shared import protocol as p


def text(raw: str) -> str:
    cleaned = raw.replace("\r\n", "\n")
    if not cleaned.strip():
        raise InvalidParams("text", "text is empty; type the prompt to send")
    return cleaned


def first_fire(rep: timing.Repeat, now: datetime) -> datetime | None:
    """When a new (or re-timed, or re-enabled) schedule fires first.  A one-shot time less
    than PAST_AT_S ago fires at once; an older one is refused by `check_at`."""
    if rep.at is not None:
        return rep.at
    return rep.after(now)


def check_at(rep: timing.Repeat, now: datetime) -> None:
    if rep.at is not None and (now - rep.at).total_seconds() > timing.PAST_AT_S:
        raise InvalidParams("at", f"at {timing.iso(rep.at)} is in the past; give a time to come")


def create_values(
    params: p.ScheduleCreateParams, principal: str, local_zone: str, now: datetime,
    cwd: str | None,
) -> dict[str, Any]:
    """The new row's columns.  `cwd`: the new session's folder, already checked (None
    with session_id)."""
    if (params.session_id is None) == (params.new_session is None):
        raise InvalidParams("session_id", "give exactly one of session_id (run in that session) "
                            "and new_session (start a new session at each run)")
    zone_name = params.timezone if params.timezone is not None else local_zone
    rep = timing.repeat(params.cron, params.at, timing.zone(zone_name, local_zone))
    check_at(rep, now)
    spec = None
    if params.new_session is not None:
        spec = json.dumps({"title": params.new_session.title, "cwd": cwd,
                           "model": params.new_session.model})
    fire = first_fire(rep, now) if params.enabled else None
    return {
        "schedule_id": new_id("sch"), "principal": principal, "session_id": params.session_id,
        "new_session": spec, "text": text(params.text), "cron": _cron_text(params.cron),
        "at": timing.iso(rep.at) if rep.at is not None else None, "timezone": zone_name,
        "missed": params.missed, "enabled": params.enabled,
        "next_fire_at": timing.iso(fire) if fire is not None else None,
    }


def update_fields(row: ScheduleRecord, params: p.ScheduleUpdateParams, now: datetime) -> dict[str, Any]:
    """The columns an update changes (empty: nothing to change)."""
    if params.cron is not None and params.at is not None:
        raise InvalidParams("cron", "give cron or at, not both: a schedule repeats or runs once")
    fields: dict[str, Any] = {}
    if params.text is not None:
        fields["text"] = text(params.text)
    if params.missed is not None:
        fields["missed"] = params.missed
    retimed = params.cron is not None or params.at is not None or params.timezone is not None
    enabled = row.enabled if params.enabled is None else params.enabled
    if retimed or (enabled and not row.enabled):
        zone_name = params.timezone if params.timezone is not None else row.timezone
        cron_text = params.cron if params.cron is not None else None if params.at else row.cron
        at_text = params.at if params.at is not None else None if params.cron else row.at
        rep = timing.repeat(cron_text, at_text, timing.zone(zone_name, zone_name))
        if params.at is not None:
            check_at(rep, now)
        fire = first_fire(rep, now)
        if rep.at is not None and params.at is None and rep.at <= now:
            fire = None  # a one-shot whose time passed (it ran, or was off then) runs no more
        fields.update(timezone=zone_name, cron=_cron_text(cron_text),
                      at=timing.iso(rep.at) if rep.at is not None else None,
                      next_fire_at=timing.iso(fire) if fire is not None and enabled else None)
    if params.enabled is not None and params.enabled != row.enabled:
        fields.update(enabled=params.enabled, disabled_reason=None)
        if not params.enabled:
            fields["next_fire_at"] = None
    return fields


def _cron_text(raw: str | None) -> str | None:
    return " ".join(raw.split()) if raw is not None else None
