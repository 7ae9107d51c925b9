"""The Schedules window's Qt-free parts: times and repeats in words, the live list, the form."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from desktop.state import schedules as w
from shared import protocol as p

PARIS = ZoneInfo("Europe/Paris")
NOW = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)  # a Tuesday; 11:00 in Paris


def schedule(**fields: object) -> p.Schedule:
    base: dict[str, object] = dict(
        schedule_id="sch_1", session_id="ses_1", new_session=None, text="hello", cron="0 9 * * 1-5",
        at=None, timezone="Europe/Paris", missed="run_once", enabled=True,
        next_fire_at="2026-12-02T08:00:00Z", last_fired_at=None, last_admission_id=None,
        last_session_id=None, created_at="2026-12-01T09:00:00Z", updated_at="2026-12-01T09:00:00Z")
    base.update(fields)
    return p.Schedule(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize(("stamp", "words"), [
    ("2026-12-01T13:30:00Z", "today at 14:30"),
    ("2026-12-02T08:00:00Z", "tomorrow at 09:00"),
    ("2026-11-30T08:00:00Z", "yesterday at 09:00"),
    ("2026-12-04T08:00:00Z", "Friday at 09:00"),
    ("2026-12-24T17:00:00Z", "24 Dec at 18:00"),
    ("2027-01-05T08:00:00Z", "5 Jan 2027 at 09:00"),
    ("2026-12-01T23:30:00Z", "tomorrow at 00:30"),  # already tomorrow in Paris
    (None, ""),
    ("not a time", ""),
])
def test_when_words(stamp: str | None, words: str) -> None:
    assert w.when_words(stamp, NOW, PARIS) == words


@pytest.mark.parametrize(("cron", "words"), [
    ("0 9 * * 1-5", "every weekday at 9:00"),
    ("30 7 * * 1", "every Monday at 7:30"),
    ("0 18 * * mon,wed,fri", "every Monday, Wednesday, Friday at 18:00"),
    ("0 9 * * *", "every day at 9:00"),
    ("0 * * * *", "every hour"),
    ("15 * * * *", "every hour at :15"),
    ("*/5 * * * *", None),
    ("0 9 1 * *", None),
    ("0 9-17 * * *", None),
])
def test_cron_words(cron: str, words: str | None) -> None:
    assert w.cron_words(cron) == words
    assert w.repeat_words(schedule(cron=cron)) == (words or f"cron {cron}")


def test_repeat_and_next_words() -> None:
    assert w.repeat_words(schedule(cron=None, at="2026-12-24T17:00:00Z")) == "once"
    assert w.next_words(schedule(), NOW, PARIS) == "tomorrow at 09:00"
    assert w.next_words(schedule(enabled=False, next_fire_at=None), NOW) == "off"
    gone = schedule(enabled=False, next_fire_at=None, disabled_reason="its session was deleted")
    assert w.next_words(gone, NOW) == "off: its session was deleted"
    ran = schedule(cron=None, next_fire_at=None, last_fired_at="2026-12-01T09:00:00Z")
    assert w.next_words(ran, NOW) == "done"
    assert w.next_words(schedule(next_fire_at="2026-12-01T09:59:00Z"), NOW) == "running now"


def test_target_words() -> None:
    assert w.target_words(schedule(), {"ses_1": "Builds"}) == "Builds"
    assert w.target_words(schedule(), {}) == "ses_1"
    new = schedule(session_id=None, new_session=p.NewSessionSpecWire(cwd="/srv/app"))
    assert w.target_words(new, {}) == "a new session in /srv/app"


def test_rows_follow_the_events() -> None:
    rows = w.ScheduleRows()
    rows.load([schedule()])
    assert rows.apply(p.ScheduleChanged(schedule_id="sch_2", schedule=schedule(schedule_id="sch_2")))
    assert [s.schedule_id for s in rows.rows] == ["sch_1", "sch_2"]
    assert rows.apply(p.ScheduleChanged(schedule_id="sch_1", schedule=schedule(text="changed")))
    assert rows.rows[0].text == "changed"
    assert rows.apply(p.ScheduleChanged(schedule_id="sch_1", deleted=True))
    assert not rows.apply(p.ScheduleChanged(schedule_id="sch_1", deleted=True)), "already gone"
    assert [s.schedule_id for s in rows.rows] == ["sch_2"]


def test_form_builds_the_requests() -> None:
    form = w.Form(text="hi", session_id=None, cwd="/srv/app", preset=1, cron="", at_local=None,
                  timezone="Europe/Paris", run_missed=False)
    made = form.create()
    assert (made.cron, made.at, made.missed, made.session_id) == ("0 9 * * 1-5", None, "skip", None)
    assert made.new_session is not None
    assert made.new_session.cwd == "/srv/app"
    once = w.Form(text="hi", session_id="ses_1", cwd="", preset=0, cron="",
                  at_local=datetime(2026, 12, 24, 18, 0), timezone="Europe/Paris", run_missed=True)
    changed = once.update("sch_1")
    assert (changed.cron, changed.at, changed.missed) == (None, "2026-12-24T18:00", "run_once")
    custom = w.Form(text="hi", session_id="ses_1", cwd="", preset=len(w.PRESETS) - 1,
                    cron=" */10 * * * * ", at_local=None, timezone="UTC", run_missed=True)
    assert custom.timing() == ("*/10 * * * *", None)
    assert w.preset_for("0 9 * * *") == 2
    assert w.preset_for("*/10 * * * *") == len(w.PRESETS) - 1
    assert w.preset_for(None) == 0


def test_default_at_and_zones() -> None:
    assert w.default_at(datetime(2026, 12, 1, 10, 20, tzinfo=UTC)) == datetime(2026, 12, 1, 11, tzinfo=UTC)
    assert w.default_at(datetime(2026, 12, 1, 10, 55, tzinfo=UTC)) == datetime(2026, 12, 1, 12, tzinfo=UTC)
    assert "Europe/Paris" in w.zone_names()
