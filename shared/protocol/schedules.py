"""Scheduled prompts (addition): a schedule, its params and results, and schedule.changed."""

from __future__ import annotations

from typing import Annotated

import msgspec

from shared.literals import MissedPolicy
from shared.protocol.base import EventData, EventSpec, Folder, Id, ModelName, Params, Title, Wire

CRON_MAX = 200
SCHEDULE_TEXT_MAX = 64 * 1024  # characters of a scheduled prompt (it is stored and re-sent)
CronText = Annotated[str, msgspec.Meta(max_length=CRON_MAX)]
IsoTime = Annotated[str, msgspec.Meta(max_length=64)]
ZoneName = Annotated[str, msgspec.Meta(max_length=100)]
ScheduleText = Annotated[str, msgspec.Meta(max_length=SCHEDULE_TEXT_MAX)]


class NewSessionSpec(Params):
    """The session each firing starts (as `session.create`'s params)."""

    title: Title | None = None
    cwd: Folder | None = None
    model: ModelName | None = None


class NewSessionSpecWire(Wire):
    title: str | None = None
    cwd: str | None = None
    model: str | None = None


class Schedule(Wire):
    """A prompt submitted later, once (`at`) or repeatedly (`cron`).  Times are UTC RFC 3339;
    `next_fire_at` null: it will not fire again (a one-shot that fired, or disabled)."""

    schedule_id: str
    session_id: str | None
    new_session: NewSessionSpecWire | None
    text: str
    cron: str | None
    at: str | None
    timezone: str
    missed: MissedPolicy
    enabled: bool
    next_fire_at: str | None
    last_fired_at: str | None
    last_admission_id: str | None
    last_session_id: str | None
    created_at: str
    updated_at: str
    disabled_reason: str | None = None  # why the backend disabled it (its session was deleted)


class ScheduleCreateParams(Params):
    """Exactly one of `session_id` and `new_session`; exactly one of `cron` and `at`.
    `timezone`: an IANA name, default the backend's own zone."""

    text: ScheduleText
    session_id: Id | None = None
    new_session: NewSessionSpec | None = None
    cron: CronText | None = None
    at: IsoTime | None = None
    timezone: ZoneName | None = None
    missed: MissedPolicy = "run_once"
    enabled: bool = True


class ScheduleUpdateParams(Params):
    """Fields left out stay as they are.  Giving `cron` clears `at` and the other way round."""

    schedule_id: Id
    text: ScheduleText | None = None
    cron: CronText | None = None
    at: IsoTime | None = None
    timezone: ZoneName | None = None
    missed: MissedPolicy | None = None
    enabled: bool | None = None


class ScheduleIdParams(Params):
    schedule_id: Id


class ScheduleResult(Wire):
    schedule: Schedule


class SchedulesResult(Wire):
    schedules: list[Schedule]


class ScheduleChanged(EventData):
    """Addition: a schedule was created, updated, fired or deleted; session-less
    (`session_id` ""), sent to every reader.  `schedule` is absent when `deleted`; `fired`:
    this change is a firing (its prompt was just admitted in `schedule.last_session_id`)."""

    schedule_id: str
    deleted: bool = False
    schedule: Schedule | None = None
    fired: bool = False


SCHEDULE_EVENTS = (
    EventSpec("schedule.changed", ScheduleChanged,
              "addition, session-less (like `mcp.server`): `schedule_id`, and `schedule` (a "
              "Schedule) when one was created, changed or fired, or `deleted: true`; `fired: "
              "true` when the change is a firing (its prompt was just admitted in "
              "`schedule.last_session_id`)"),
)
