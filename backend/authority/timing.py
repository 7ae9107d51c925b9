"""When a schedule fires: its repeat (cron or a one-shot time), its zone, and missed firings
(no I/O).

A firing is due when its time has passed.  One whose time came while no scheduler was
watching (before this backend started: it was down) is missed; of several missed, only the
latest counts: `run_once` fires it once, `skip` fires nothing and moves on.  A firing that
came while the scheduler watched is never missed, however late the scheduler wakes (a store
that could not write, a busy loop): it fires once.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from backend.authority import cron
from backend.errors import InvalidParams

Missed = Literal["run_once", "skip"]
PAST_AT_S = 60.0  # a one-shot time this far in the past (or less) is still accepted: it fires now
# Spans looked back over, shortest first, for the latest missed firing: the first span
# holding one bounds the walk (a schedule firing every minute, down for a year, walks an
# hour of slots, not a year of them).  Rarer still, the first missed firing stands for it.
LOOKBACKS = (timedelta(hours=1), timedelta(days=2), timedelta(days=40), timedelta(days=400))


@dataclass(frozen=True)
class Repeat:
    """A schedule's timing: exactly one of `cron` and `at`, in `zone`."""

    zone: ZoneInfo
    cron: cron.Cron | None = None
    at: datetime | None = None  # UTC

    def after(self, t: datetime) -> datetime | None:
        """The first firing strictly after `t`, or None (a one-shot whose time passed)."""
        if self.cron is not None:
            return cron.next_after(self.cron, t, self.zone)
        return self.at if self.at is not None and self.at > t else None


@dataclass(frozen=True)
class Due:
    """What the scheduler does now: fire `fire_at` (or nothing), then wait for `next_at`."""

    fire_at: datetime | None
    next_at: datetime | None


def zone(name: str | None, local: str) -> ZoneInfo:
    """The IANA zone `name`, or the backend's own zone `local` when none is given."""
    key = name if name is not None else local
    try:
        return ZoneInfo(key)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidParams(
            "timezone", f"timezone {key!r} is not an IANA time zone name; use one like "
            "'Europe/Paris', 'America/New_York' or 'UTC'"
        ) from None


def repeat(cron_text: str | None, at_text: str | None, tz: ZoneInfo) -> Repeat:
    """The timing from a request's `cron` / `at`; exactly one must be given."""
    if (cron_text is None) == (at_text is None):
        raise InvalidParams(
            "cron", "give exactly one of cron (a repeating schedule, e.g. '0 9 * * 1-5') "
            "and at (one time, ISO 8601, e.g. '2026-12-24T18:00')"
        )
    if cron_text is not None:
        try:
            return Repeat(tz, cron=cron.parse(cron_text))
        except cron.CronError as exc:
            raise InvalidParams("cron", str(exc)) from None
    assert at_text is not None
    return Repeat(tz, at=parse_at(at_text, tz))


def parse_at(text: str, tz: ZoneInfo) -> datetime:
    """An ISO 8601 time as a UTC instant; one without an offset is a wall-clock time in `tz`."""
    try:
        t = datetime.fromisoformat(text.strip())
    except ValueError:
        raise InvalidParams(
            "at", f"at {text!r} is not an ISO 8601 time; use e.g. '2026-12-24T18:00' "
            "(in the schedule's time zone) or '2026-12-24T17:00:00Z'"
        ) from None
    if t.tzinfo is None:
        return cron.resolve(t, tz)
    return t.astimezone(UTC)


def due(rep: Repeat, next_at: datetime | None, now: datetime, missed: Missed,
        watching_since: datetime) -> Due:
    """What to do at `now` for a schedule waiting for `next_at`, for a scheduler that has
    watched the clock since `watching_since`."""
    if next_at is None or next_at > now:
        return Due(None, next_at)
    latest = latest_slot(rep, next_at, now)
    on_time = latest >= watching_since
    fire = latest if on_time or missed == "run_once" else None
    return Due(fire, rep.after(max(latest, now)) if rep.cron is not None else None)


def latest_slot(rep: Repeat, first: datetime, now: datetime) -> datetime:
    """The latest firing time in [first, now] (first itself is one)."""
    if rep.cron is None:
        return first
    for span in LOOKBACKS:
        start = now - span
        if start <= first:
            break
        probe = rep.after(start)
        if probe is not None and probe <= now:
            return _walk(rep, probe, now)
    return _walk(rep, first, now)


def _walk(rep: Repeat, slot: datetime, now: datetime) -> datetime:
    """The last firing at or before `now`, from `slot` (one) onwards."""
    probe = rep.after(slot)
    while probe is not None and probe <= now:
        slot, probe = probe, rep.after(probe)
    return slot


def iso(t: datetime) -> str:
    """A UTC instant as stored and sent: RFC 3339 with seconds, e.g. 2026-12-01T09:00:00Z."""
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_iso(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))
