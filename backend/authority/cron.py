"""Five-field cron expressions and when a schedule fires next, in a time zone (no I/O).

`parse` reads `minute hour day-of-month month day-of-week` with lists, ranges,
steps and English names, as Vixie cron does: when both day fields are
restricted, a day matching either one matches.  `next_after` walks the local
wall clock and turns each matching local time into an instant:

- a local time that does not exist (the hour skipped when clocks go forward)
  fires once, at the first valid time after the gap;
- a local time that happens twice (clocks go back) fires once, at its first
  occurrence.

Written here rather than taken from PyPI: the one well-known library
(croniter) changed hands and is untyped, and the grammar is small.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
# How far ahead a match is looked for: "0 0 29 2 *" may be 8 years away (2096, then 2104);
# an expression that matches nothing in this span never fires.
HORIZON_YEARS = 30
# The longest wall-clock gap a zone has ever skipped (Samoa skipped a whole day in 2011).
MAX_GAP = timedelta(days=2)


class CronError(ValueError):
    """An expression that cannot be read; the message says what is wrong and what is meant."""


@dataclass(frozen=True)
class _Field:
    name: str
    low: int
    high: int
    names: tuple[str, ...] = ()
    name_base: int = 0


_FIELDS = (
    _Field("minute", 0, 59),
    _Field("hour", 0, 23),
    _Field("day of month", 1, 31),
    _Field("month", 1, 12, MONTHS, 1),
    _Field("day of week", 0, 7, DAYS, 0),
)


@dataclass(frozen=True)
class Cron:
    """A parsed expression: the values each field matches."""

    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday (7 is read as 0)
    days_any: bool  # the day-of-month field was `*`
    weekdays_any: bool  # the day-of-week field was `*`

    def day_matches(self, day: datetime) -> bool:
        in_month = day.day in self.days
        in_week = (day.isoweekday() % 7) in self.weekdays
        if self.days_any or self.weekdays_any:
            return in_month and in_week
        return in_month or in_week


def parse(expr: str) -> Cron:
    """Reads a five-field expression; raises CronError naming the field that is wrong."""
    parts = expr.split()
    if len(parts) != 5:
        raise CronError(
            f"a cron expression has 5 fields (minute hour day-of-month month day-of-week), "
            f"e.g. '0 9 * * 1-5'; {expr!r} has {len(parts)}"
        )
    values = [_parse_field(text, spec) for text, spec in zip(parts, _FIELDS, strict=True)]
    weekdays = frozenset(v % 7 for v in values[4])
    cron = Cron(
        frozenset(values[0]), frozenset(values[1]), frozenset(values[2]), frozenset(values[3]),
        weekdays, parts[2] == "*", parts[4] == "*",
    )
    if not any(_month_has_day(cron, month) for month in cron.months):
        raise CronError(f"{expr!r} names a day that none of its months has; it would never run")
    return cron


def _month_has_day(cron: Cron, month: int) -> bool:
    """Whether some day of `month` can match (a restricted weekday field matches any day)."""
    if cron.days_any or not cron.weekdays_any:
        return True
    longest = 29 if month == 2 else 30 if month in (4, 6, 9, 11) else 31
    return min(cron.days) <= longest


def _parse_field(text: str, spec: _Field) -> set[int]:
    out: set[int] = set()
    for item in text.split(","):
        if not item:
            raise CronError(f"the {spec.name} field {text!r} has an empty list item")
        out |= _parse_item(item, spec)
    return out


def _parse_item(item: str, spec: _Field) -> set[int]:
    body, _, step_text = item.partition("/")
    step = 1
    if step_text or item.endswith("/"):
        if not step_text.isdigit() or int(step_text) == 0:
            raise CronError(f"the {spec.name} field: the step in {item!r} must be a whole number above 0")
        step = int(step_text)
    if body == "*":
        low, high = spec.low, spec.high
    elif "-" in body:
        first, _, last = body.partition("-")
        low, high = _value(first, spec, item), _value(last, spec, item)
        if low > high:
            raise CronError(f"the {spec.name} field: the range {item!r} runs backwards")
    else:
        low = _value(body, spec, item)
        high = spec.high if step_text else low  # "5/15": from 5 to the end, every 15
    return set(range(low, high + 1, step))


def _value(text: str, spec: _Field, item: str) -> int:
    lowered = text.lower()
    if lowered in spec.names:
        return spec.names.index(lowered) + spec.name_base
    if not text.isdigit():
        names = f" or a name ({', '.join(spec.names[:3])}, ...)" if spec.names else ""
        raise CronError(f"the {spec.name} field: {item!r} is not a number{names}")
    value = int(text)
    if not spec.low <= value <= spec.high:
        raise CronError(
            f"the {spec.name} field: {value} is out of range; use {spec.low}-{spec.high}"
        )
    return value


# --- when it fires ----------------------------------------------------------------------------


def next_after(cron: Cron, after: datetime, zone: ZoneInfo) -> datetime | None:
    """The first firing strictly after `after` (aware), as a UTC instant; None if there is
    none within HORIZON_YEARS."""
    local = after.astimezone(zone).replace(tzinfo=None, fold=0, second=0, microsecond=0)
    candidate = local + timedelta(minutes=1)
    end = local.replace(year=local.year + HORIZON_YEARS, day=min(local.day, 28))
    while candidate < end:
        found = _next_local(cron, candidate, end)
        if found is None:
            return None
        instant = resolve(found, zone)
        if instant > after:
            return instant
        # A second occurrence of an ambiguous time (fired at its first one): go on.
        candidate = found + timedelta(minutes=1)
    return None


def _next_local(cron: Cron, t: datetime, end: datetime) -> datetime | None:
    """The first wall-clock minute at or after `t` that the expression matches."""
    while t < end:
        if t.month not in cron.months:
            t = _first_of_next_month(t)
        elif not cron.day_matches(t):
            t = t.replace(hour=0, minute=0) + timedelta(days=1)
        elif t.hour not in cron.hours:
            t = t.replace(minute=0) + timedelta(hours=1)
        elif t.minute not in cron.minutes:
            t += timedelta(minutes=1)
        else:
            return t
    return None


def _first_of_next_month(t: datetime) -> datetime:
    if t.month == 12:
        return t.replace(year=t.year + 1, month=1, day=1, hour=0, minute=0)
    return t.replace(month=t.month + 1, day=1, hour=0, minute=0)


def resolve(local: datetime, zone: ZoneInfo) -> datetime:
    """A naive wall-clock time in `zone` as a UTC instant: the first occurrence of an
    ambiguous time; for a time in a gap, the first valid minute after the gap."""
    t = local
    while not exists(t, zone):
        t += timedelta(minutes=1)
        if t - local > MAX_GAP:  # no zone skips this much: a bug, not a gap
            raise AssertionError(f"no valid local time after {local} in {zone.key}")
    return t.replace(tzinfo=zone, fold=0).astimezone(UTC)


def exists(local: datetime, zone: ZoneInfo) -> bool:
    """Whether a naive wall-clock time happens in `zone` (it does not inside a gap)."""
    instant = local.replace(tzinfo=zone, fold=0).astimezone(UTC)
    return instant.astimezone(zone).replace(tzinfo=None) == local.replace(tzinfo=None)
