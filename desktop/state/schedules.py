"""Scheduled prompts as people read them (no Qt): the list kept live by `schedule.changed`,
next runs in words ("tomorrow at 09:00"), repeats in words, and the form's presets."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, tzinfo
from zoneinfo import available_timezones

from shared import protocol as p
from shared.methods import ScheduleCreate, ScheduleUpdate

WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


@dataclass(frozen=True)
class Preset:
    label: str
    cron: str | None  # None: the preset asks for a time (once)


# What the form offers first; "Custom (cron)" lets a person type any expression.
PRESETS = (
    Preset("Once, at a time", None),
    Preset("Every weekday at 9:00", "0 9 * * 1-5"),
    Preset("Every day at 9:00", "0 9 * * *"),
    Preset("Every Monday at 9:00", "0 9 * * 1"),
    Preset("Every hour", "0 * * * *"),
    Preset("Custom (cron)", ""),
)


def zone_names() -> list[str]:
    """Every IANA zone name this computer knows, sorted, for the form's list."""
    return sorted(available_timezones())


def preset_for(cron: str | None) -> int:
    """The index of the preset a schedule's repeat matches (the custom one if none does)."""
    for i, preset in enumerate(PRESETS):
        if preset.cron == cron:
            return i
    return len(PRESETS) - 1


def parse_time(stamp: str | None) -> datetime | None:
    if not stamp:
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None


def when_words(stamp: str | None, now: datetime, zone: tzinfo | None = None) -> str:
    """A time as a person says it, in `zone` (default: this computer's): "today at 14:30",
    "tomorrow at 09:00", "Friday at 09:00" within a week, else "12 Jan at 09:00" (with the
    year when it is not this one)."""
    when = parse_time(stamp)
    if when is None:
        return ""
    here = when.astimezone(zone)
    today = now.astimezone(zone).date()
    clock = here.strftime("%H:%M")
    days = (here.date() - today).days
    if days == 0:
        return f"today at {clock}"
    if days == 1:
        return f"tomorrow at {clock}"
    if days == -1:
        return f"yesterday at {clock}"
    if 1 < days < 7:
        return f"{WEEKDAYS[here.weekday()]} at {clock}"
    fmt = "%d %b" if here.year == today.year else "%d %b %Y"
    return f"{here.strftime(fmt).lstrip('0')} at {clock}"


def repeat_words(s: p.Schedule) -> str:
    """How often it runs: "once", a plain sentence for the common shapes of cron ("every
    Monday at 7:30"), else the expression itself."""
    if s.cron is None:
        return "once"
    return cron_words(s.cron) or f"cron {s.cron}"


DAY_NAMES = {"0": "Sunday", "7": "Sunday", "1": "Monday", "2": "Tuesday", "3": "Wednesday",
             "4": "Thursday", "5": "Friday", "6": "Saturday", "sun": "Sunday", "mon": "Monday",
             "tue": "Tuesday", "wed": "Wednesday", "thu": "Thursday", "fri": "Friday",
             "sat": "Saturday"}


def cron_words(expr: str) -> str | None:
    """`M H * * DAYS` and `M * * * *` in words; None for any other shape."""
    parts = expr.split()
    if len(parts) != 5 or parts[2:4] != ["*", "*"] or not parts[0].isdigit():
        return None
    minute, hour, days = int(parts[0]), parts[1], parts[4].lower()
    if hour == "*":
        return "every hour" if minute == 0 and days == "*" else \
            f"every hour at :{minute:02d}" if days == "*" else None
    if not hour.isdigit():
        return None
    clock = f"{int(hour)}:{minute:02d}"
    if days == "*":
        return f"every day at {clock}"
    if days in ("1-5", "mon-fri"):
        return f"every weekday at {clock}"
    names = [DAY_NAMES.get(d) for d in days.split(",")]
    if all(names):
        return f"every {', '.join(n for n in names if n)} at {clock}"
    return None


def next_words(s: p.Schedule, now: datetime, zone: tzinfo | None = None) -> str:
    """The schedule's state in a few words: when it runs next, or why it will not."""
    if not s.enabled:
        return f"off: {s.disabled_reason}" if s.disabled_reason else "off"
    if s.next_fire_at is None:
        return "done" if s.last_fired_at else "will not run"
    when = parse_time(s.next_fire_at)
    if when is not None and when <= now:
        return "running now"
    return when_words(s.next_fire_at, now, zone)


def target_words(s: p.Schedule, titles: dict[str, str]) -> str:
    """Where it runs: its session's title, or "a new session" (in which folder)."""
    if s.session_id is not None:
        return titles.get(s.session_id, s.session_id)
    folder = s.new_session.cwd if s.new_session is not None else None
    return f"a new session in {folder}" if folder else "a new session"


def default_at(now: datetime) -> datetime:
    """The time a new one-shot form proposes: the next full hour, at least 10 minutes away."""
    t = now.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    return t if t - now >= timedelta(minutes=10) else t + timedelta(hours=1)


class ScheduleRows:
    """The list a page shows, kept in step with `schedule.list` and `schedule.changed`."""

    def __init__(self) -> None:
        self.rows: list[p.Schedule] = []

    def load(self, schedules: list[p.Schedule]) -> None:
        self.rows = list(schedules)

    def apply(self, data: p.ScheduleChanged) -> bool:
        """Applies one event; returns whether the list changed."""
        at = next((i for i, s in enumerate(self.rows) if s.schedule_id == data.schedule_id), None)
        if data.deleted or data.schedule is None:
            if at is None:
                return False
            del self.rows[at]
            return True
        if at is None:
            self.rows.append(data.schedule)
        else:
            self.rows[at] = data.schedule
        return True

    def get(self, schedule_id: str) -> p.Schedule | None:
        return next((s for s in self.rows if s.schedule_id == schedule_id), None)


@dataclass(frozen=True)
class Form:
    """What the create/edit form holds, as plain values (the widgets fill it in)."""

    text: str
    session_id: str | None  # None: a new session at each run
    cwd: str
    preset: int  # an index into PRESETS
    cron: str  # the custom expression (used when the preset is the custom one)
    at_local: datetime | None  # the once-time, naive, in `timezone`
    timezone: str
    run_missed: bool  # run the latest missed firing once (else skip)
    enabled: bool = True

    def timing(self) -> tuple[str | None, str | None]:
        """(cron, at) as the methods take them; exactly one is set."""
        preset = PRESETS[self.preset]
        if preset.cron is None:
            at = self.at_local.replace(tzinfo=None) if self.at_local is not None else None
            return None, at.isoformat(timespec="minutes") if at is not None else ""
        return (preset.cron or self.cron.strip()), None

    def create(self) -> ScheduleCreate:
        cron, at = self.timing()
        new = None if self.session_id else p.NewSessionSpec(cwd=self.cwd.strip() or None)
        return ScheduleCreate(
            text=self.text, session_id=self.session_id, new_session=new, cron=cron, at=at,
            timezone=self.timezone, missed="run_once" if self.run_missed else "skip",
            enabled=self.enabled)

    def update(self, schedule_id: str) -> ScheduleUpdate:
        cron, at = self.timing()
        return ScheduleUpdate(
            schedule_id=schedule_id, text=self.text, cron=cron, at=at, timezone=self.timezone,
            missed="run_once" if self.run_missed else "skip")


def delete_question(s: p.Schedule) -> tuple[str, str]:
    """The confirmation a delete asks: (question, detail)."""
    text = " ".join(s.text.split())
    short = text if len(text) <= 60 else text[:59] + "…"
    return (f"Delete the schedule “{short}”?",
            "It will not run again. Sessions its past runs made stay.")
