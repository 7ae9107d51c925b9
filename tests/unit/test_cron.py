"""Cron parsing and next-firing times, daylight saving included, and the missed-firing policy."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from backend.authority import cron, timing
from backend.errors import InvalidParams
from shared.zones import local_zone_name

PARIS = ZoneInfo("Europe/Paris")
NEW_YORK = ZoneInfo("America/New_York")


UTC_ZONE = ZoneInfo("UTC")


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


def local(zone: ZoneInfo, year: int, month: int, day: int, hour: int = 0, minute: int = 0, *,
          fold: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=zone, fold=fold)


def nxt(expr: str, after: datetime, zone: ZoneInfo = UTC_ZONE) -> datetime | None:
    return cron.next_after(cron.parse(expr), after, zone)


# --- parsing ------------------------------------------------------------------------------------


def test_fields_lists_ranges_steps_and_names() -> None:
    c = cron.parse("*/15 9-17/4 1,15 jan-mar MON-fri")
    assert c.minutes == {0, 15, 30, 45}
    assert c.hours == {9, 13, 17}
    assert c.days == {1, 15}
    assert c.months == {1, 2, 3}
    assert c.weekdays == {1, 2, 3, 4, 5}
    assert cron.parse("0 0 * * 7").weekdays == {0}, "7 is Sunday too"
    assert cron.parse("5/20 * * * *").minutes == {5, 25, 45}


@pytest.mark.parametrize(("expr", "words"), [
    ("* * * *", "5 fields"),
    ("60 * * * *", "minute field: 60 is out of range; use 0-59"),
    ("* 24 * * *", "hour field"),
    ("* * 0 * *", "day of month field"),
    ("* * * 13 *", "month field"),
    ("* * * * 8", "day of week field"),
    ("*/0 * * * *", "step"),
    ("5-1 * * * *", "backwards"),
    ("a * * * *", "not a number"),
    ("* * * * sunday", "not a number or a name"),
    ("1,,2 * * * *", "empty list item"),
    ("0 0 30 2 *", "never run"),
])
def test_bad_expressions_say_what_is_wrong(expr: str, words: str) -> None:
    with pytest.raises(cron.CronError, match=words):
        cron.parse(expr)


def test_day_fields_match_either_when_both_are_restricted() -> None:
    # 1 December 2026 is a Tuesday: "the 1st, or any Friday" fires that day, then on Friday the 4th.
    assert nxt("0 9 1 * fri", utc(2026, 11, 30)) == utc(2026, 12, 1, 9)
    assert nxt("0 9 1 * fri", utc(2026, 12, 1, 9)) == utc(2026, 12, 4, 9)
    assert nxt("0 9 * * fri", utc(2026, 12, 1)) == utc(2026, 12, 4, 9), "one restricted: and"


# --- next firing --------------------------------------------------------------------------------


def test_next_is_strictly_after() -> None:
    assert nxt("0 9 * * *", utc(2026, 12, 1, 9)) == utc(2026, 12, 2, 9)
    assert nxt("0 9 * * *", utc(2026, 12, 1, 8, 59, 59)) == utc(2026, 12, 1, 9)
    assert nxt("* * * * *", utc(2026, 12, 1, 9, 0, 30)) == utc(2026, 12, 1, 9, 1)


def test_weekdays_in_a_zone() -> None:
    # Friday 4 December 2026, 10:00 in Paris: the next weekday 09:00 is Monday the 7th.
    after = local(PARIS, 2026, 12, 4, 10).astimezone(UTC)
    assert nxt("0 9 * * 1-5", after, PARIS) == local(PARIS, 2026, 12, 7, 9).astimezone(UTC)


def test_leap_day() -> None:
    assert nxt("0 0 29 2 *", utc(2026, 3, 1)) == utc(2028, 2, 29)


def test_spring_forward_gap_fires_once_after_it() -> None:
    # New York, 8 March 2026: 02:00 jumps to 03:00.  02:30 does not exist that day.
    before = local(NEW_YORK, 2026, 3, 8, 1).astimezone(UTC)
    first = nxt("30 2 * * *", before, NEW_YORK)
    assert first == local(NEW_YORK, 2026, 3, 8, 3).astimezone(UTC), "the first valid time after the gap"
    assert nxt("30 2 * * *", first, NEW_YORK) == local(NEW_YORK, 2026, 3, 9, 2, 30).astimezone(UTC)


def test_every_quarter_hour_through_the_gap_fires_once_for_it() -> None:
    t = local(NEW_YORK, 2026, 3, 8, 1, 40).astimezone(UTC)
    fired = []
    for _ in range(4):
        got = nxt("*/15 * * * *", t, NEW_YORK)
        assert got is not None
        fired.append(got.astimezone(NEW_YORK).strftime("%H:%M"))
        t = got
    assert fired == ["01:45", "03:00", "03:15", "03:30"]


def test_fall_back_ambiguous_time_fires_once() -> None:
    # Paris, 25 October 2026: 03:00 goes back to 02:00; 02:30 happens twice.
    before = local(PARIS, 2026, 10, 25, 1).astimezone(UTC)
    first = nxt("30 2 * * *", before, PARIS)
    assert first == local(PARIS, 2026, 10, 25, 2, 30, fold=0).astimezone(UTC)
    second = nxt("30 2 * * *", first, PARIS)
    assert second == local(PARIS, 2026, 10, 26, 2, 30).astimezone(UTC), "not again an hour later"


@settings(max_examples=200, deadline=None)
@given(st.datetimes(min_value=datetime(2020, 1, 1), max_value=datetime(2035, 1, 1)),
       st.sampled_from(["*/7 * * * *", "0 2 * * *", "30 1,2,3 * * 0", "15 9 1 * mon-fri"]),
       st.sampled_from([PARIS, NEW_YORK, ZoneInfo("Australia/Lord_Howe"), ZoneInfo("UTC")]))
def test_next_matches_and_nothing_is_skipped_between(start: datetime, expr: str, zone: ZoneInfo) -> None:
    """The answer is after `start`; and no matching, existing, first-occurrence local minute
    lies strictly between them."""
    after = start.replace(tzinfo=UTC)
    got = nxt(expr, after, zone)
    assert got is not None
    assert got > after
    c = cron.parse(expr)
    t = after.astimezone(zone).replace(second=0, microsecond=0, tzinfo=None) + timedelta(minutes=1)
    stop = min(got.astimezone(zone).replace(tzinfo=None), t + timedelta(days=40))
    while t < stop:
        if (t.month in c.months and c.day_matches(t) and t.hour in c.hours and t.minute in c.minutes
                and cron.exists(t, zone)):
            assert cron.resolve(t, zone) <= after, f"{t} matched before {got}"
        t += timedelta(minutes=1)


# --- missed firings -----------------------------------------------------------------------------


def rep(expr: str) -> timing.Repeat:
    return timing.Repeat(ZoneInfo("UTC"), cron=cron.parse(expr))


def test_on_time_firing_fires_whatever_the_policy() -> None:
    r = rep("0 9 * * *")
    started = utc(2026, 12, 1, 8)
    for missed in ("run_once", "skip"):
        d = timing.due(r, utc(2026, 12, 1, 9), utc(2026, 12, 1, 9, 0, 3), missed, started)
        assert (d.fire_at, d.next_at) == (utc(2026, 12, 1, 9), utc(2026, 12, 2, 9))


def test_not_yet_due() -> None:
    d = timing.due(rep("0 9 * * *"), utc(2026, 12, 1, 9), utc(2026, 12, 1, 8), "run_once", utc(2026, 12, 1))
    assert (d.fire_at, d.next_at) == (None, utc(2026, 12, 1, 9))


def test_three_missed_slots_fire_the_latest_once() -> None:
    r = rep("0 * * * *")
    started = utc(2026, 12, 1, 12, 30)  # down from before 10:00 to 12:30
    d = timing.due(r, utc(2026, 12, 1, 10), utc(2026, 12, 1, 12, 30, 5), "run_once", started)
    assert (d.fire_at, d.next_at) == (utc(2026, 12, 1, 12), utc(2026, 12, 1, 13))
    skipped = timing.due(r, utc(2026, 12, 1, 10), utc(2026, 12, 1, 12, 30, 5), "skip", started)
    assert (skipped.fire_at, skipped.next_at) == (None, utc(2026, 12, 1, 13))


def test_a_year_of_missed_minutes_is_one_firing() -> None:
    now = utc(2026, 12, 1, 12, 0, 30)
    d = timing.due(rep("* * * * *"), utc(2025, 12, 1), now, "run_once", now)
    assert (d.fire_at, d.next_at) == (utc(2026, 12, 1, 12), utc(2026, 12, 1, 12, 1))


def test_rare_schedule_missed_long_ago() -> None:
    now = utc(2026, 12, 1)
    d = timing.due(rep("0 0 29 2 *"), utc(2024, 2, 29), now, "run_once", now)
    assert (d.fire_at, d.next_at) == (utc(2024, 2, 29), utc(2028, 2, 29))


def test_one_shot() -> None:
    r = timing.Repeat(ZoneInfo("UTC"), at=utc(2026, 12, 1, 9))
    now = utc(2026, 12, 1, 10)
    assert timing.due(r, r.at, now, "run_once", now) == timing.Due(utc(2026, 12, 1, 9), None)
    assert timing.due(r, r.at, now, "skip", now) == timing.Due(None, None)
    assert timing.due(r, r.at, now, "skip", utc(2026, 12, 1)) == timing.Due(utc(2026, 12, 1, 9), None)


def test_at_without_offset_is_wall_clock_in_the_zone() -> None:
    assert timing.parse_at("2026-07-01T09:00", PARIS) == utc(2026, 7, 1, 7)
    assert timing.parse_at("2026-07-01T09:00Z", PARIS) == utc(2026, 7, 1, 9)
    assert timing.parse_at("2026-03-08T02:30", NEW_YORK) == local(NEW_YORK, 2026, 3, 8, 3).astimezone(UTC)
    with pytest.raises(InvalidParams, match="ISO 8601"):
        timing.parse_at("next tuesday", PARIS)


def test_zone_names() -> None:
    assert timing.zone("Europe/Paris", "UTC") == PARIS
    assert timing.zone(None, "America/New_York") == NEW_YORK
    for bad in ("Mars/Olympus", "../../etc/passwd", ""):
        with pytest.raises(InvalidParams, match="IANA"):
            timing.zone(bad, "UTC")
    assert timing.zone(local_zone_name(), "UTC") is not None
