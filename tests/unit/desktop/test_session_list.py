"""SessionRows: the browser's rows kept current by session events; the small formatting helpers."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pytest

from desktop.state.sessions import STATUS_LABELS, SessionRows, ago, cost, status_label
from shared import protocol as p
from shared.client import Incoming
from tests.unit.desktop.factories import approval, event, session


class Notices:
    def __init__(self) -> None:
        self.resets = 0
        self.rows: list[int] = []

    def reset(self) -> None:
        self.resets += 1

    def row(self, index: int) -> None:
        self.rows.append(index)


def listing(*sessions: p.Session, query: str = "", cursor: str | None = None) -> tuple[SessionRows, Notices]:
    n = Notices()
    sl = SessionRows(on_reset=n.reset, on_row=n.row)
    sl.load(list(sessions), cursor, query)
    n.resets = 0
    return sl, n


def ids(sl: SessionRows) -> list[str]:
    return [r.session_id for r in sl.rows]


def at(minute: int) -> str:
    return f"2026-11-29T18:{minute:02d}:00.000Z"


def created(sid: str, minute: int) -> Incoming:
    return event("session.created", {"session": session(sid, updated_at=at(minute))}, session_id=sid)


def updated(sid: str, minute: int, **fields: Any) -> Incoming:
    """`session.updated` carries the whole Session (shared/PROTOCOL.md, "Objects")."""
    whole = session(sid, updated_at=at(minute), **fields)
    return event("session.updated", {"session": whole}, session_id=sid)


def deleted(sid: str) -> Incoming:
    return event("session.deleted", {"session_id": sid}, session_id=sid)


# --- loading and paging ------------------------------------------------------------------------------


def test_load_and_extend() -> None:
    n = Notices()
    sl = SessionRows(on_reset=n.reset)
    page = [session("s3", updated_at=at(3)), session("s2", updated_at=at(2))]
    sl.load(page, "cur-1")
    assert ids(sl) == ["s3", "s2"]
    assert sl.next_cursor == "cur-1"
    assert sl.query == ""
    assert sl.rows is not page, "the list owns its rows"
    sl.extend([session("s2", updated_at=at(2)), session("s1", updated_at=at(1))], None)
    assert ids(sl) == ["s3", "s2", "s1"], "a row seen already (it moved between pages) is not doubled"
    assert sl.next_cursor is None
    assert n.resets == 2
    assert sl.index("s1") == 2
    assert sl.index("nope") is None


# --- events in the normal (most recent first) mode ------------------------------------------------------


def test_a_created_session_goes_on_top_once() -> None:
    sl, n = listing(session("s1", updated_at=at(1)))
    sl.apply(created("s2", 5))
    sl.apply(created("s2", 5))  # the creating window got it twice
    assert ids(sl) == ["s2", "s1"]
    assert n.resets == 1


def test_an_update_with_a_new_time_moves_the_session_to_its_place() -> None:
    sl, n = listing(session("s3", updated_at=at(3)), session("s2", updated_at=at(2)),
                    session("s1", updated_at=at(1)))
    sl.apply(updated("s1", 9, status="running", title="Now busy"))
    assert ids(sl) == ["s1", "s3", "s2"]
    assert n.resets == 1
    assert n.rows == []
    row = sl.rows[0]
    assert (row.status, row.title, row.updated_at) == ("running", "Now busy", at(9))


def test_an_update_replaces_the_row_with_the_whole_session_it_carries() -> None:
    sl, _ = listing(session("s1", updated_at=at(1), message_count=3, child_session_id="s0"))
    new = updated("s1", 2, title="New", message_count=5)
    sl.apply(new)
    assert isinstance(new.data, p.SessionEvent)
    assert sl.rows[0] == new.data.session
    assert (sl.rows[0].title, sl.rows[0].message_count) == ("New", 5)
    assert sl.rows[0].child_session_id is None, "nothing of the old row is kept"


def test_an_update_without_a_new_time_changes_only_its_row() -> None:
    sl, n = listing(session("s2", updated_at=at(2)), session("s1", updated_at=at(1)))
    sl.apply(updated("s1", 1, title="Renamed"))  # same times as before
    sl.apply(updated("s2", 2, status="queued"))
    assert ids(sl) == ["s2", "s1"]
    assert sl.rows[1].title == "Renamed"
    assert sl.rows[0].status == "queued"
    assert n.rows == [1, 0]
    assert n.resets == 0


def test_ordering_is_by_updated_at_most_recent_first() -> None:
    sl, _ = listing(*(session(f"s{i}", updated_at=at(i)) for i in (5, 4, 3, 2, 1)))
    for sid, minute in [("s2", 10), ("s4", 11), ("s1", 7)]:
        sl.apply(updated(sid, minute))
    assert ids(sl) == ["s4", "s2", "s1", "s5", "s3"]
    stamps = [r.updated_at for r in sl.rows]
    assert stamps == sorted(stamps, reverse=True)


def test_an_older_session_beyond_the_page_that_comes_back_to_life_is_listed() -> None:
    sl, n = listing(session("s2", updated_at=at(2)), session("s1", updated_at=at(1)))
    sl.apply(updated("s9", 30, title="Not on this page"))
    assert ids(sl) == ["s9", "s2", "s1"]
    assert n.resets == 1
    sl.apply(updated("s9", 31, title="Again"))
    assert ids(sl) == ["s9", "s2", "s1"], "listed once"


def test_search_results_take_no_session_that_was_not_found() -> None:
    sl, n = listing(session("s1", updated_at=at(1)))
    sl.query = "parser"
    sl.apply(updated("s9", 30, title="Not a match"))
    assert ids(sl) == ["s1"]
    assert n.resets == 0


def test_a_deleted_session_leaves_the_list() -> None:
    sl, n = listing(session("s2", updated_at=at(2)), session("s1", updated_at=at(1)))
    sl.apply(deleted("s2"))
    assert ids(sl) == ["s1"]
    assert n.resets == 1
    sl.apply(deleted("s2"))
    assert n.resets == 1


def test_a_deletion_goes_by_the_session_its_data_names() -> None:
    sl, _ = listing(session("s2", updated_at=at(2)), session("s1", updated_at=at(1)))
    sl.apply(event("session.deleted", {"session_id": "s1"}, session_id="s2"))
    assert ids(sl) == ["s2"]


def test_other_event_types_are_ignored() -> None:
    sl, n = listing(session("s1", updated_at=at(1)))
    sl.apply(event("message.delta", {"text": "x"}, seq=4, session_id="s1"))
    sl.apply(event("approval.request", {"approval": approval("a1", "c1", session_id="s1")},
                   session_id="s1"))
    sl.apply(event("session.unheard_of", {"session": {"session_id": "s1"}}, session_id="s1"))
    assert ids(sl) == ["s1"]
    assert n.resets == 0
    assert n.rows == []


# --- search mode ---------------------------------------------------------------------------------------


def test_search_results_keep_the_backends_ranking() -> None:
    sl, n = listing(session("s1", updated_at=at(1)), session("s3", updated_at=at(3)), query="build")
    assert sl.query == "build"
    sl.apply(created("s9", 50))
    assert ids(sl) == ["s1", "s3"], "a new session is not a search hit"
    sl.apply(updated("s3", 40, title="build fixed"))
    assert ids(sl) == ["s1", "s3"], "no re-sort of ranked results"
    assert sl.rows[1].title == "build fixed"
    assert n.rows == [1]
    assert n.resets == 0
    sl.apply(deleted("s1"))
    assert ids(sl) == ["s3"]
    assert n.resets == 1


def test_leaving_search_mode() -> None:
    sl, _ = listing(session("s1", updated_at=at(1)), query="x")
    sl.load([session("s2", updated_at=at(2)), session("s1", updated_at=at(1))], None)
    assert sl.query == ""
    sl.apply(created("s3", 3))
    assert ids(sl) == ["s3", "s2", "s1"]


# --- helpers -------------------------------------------------------------------------------------------


NOW = datetime(2026, 11, 29, 18, 0, 0, tzinfo=UTC)


@pytest.fixture
def tokyo_tz(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The local zone `ago` shows dates in, fixed for the test."""
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.parametrize(("delta", "expected"), [
    (timedelta(seconds=0), "just now"),
    (timedelta(seconds=59), "just now"),
    (timedelta(seconds=60), "1 min ago"),
    (timedelta(minutes=59, seconds=59), "59 min ago"),
    (timedelta(hours=1), "1 h ago"),
    (timedelta(hours=23, minutes=59), "23 h ago"),
    (timedelta(seconds=-30), "just now"),  # a clock slightly behind the backend's
])
def test_ago(delta: timedelta, expected: str) -> None:
    stamp = (NOW - delta).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    assert ago(stamp, NOW) == expected


@pytest.mark.usefixtures("tokyo_tz")
def test_ago_shows_the_local_date_after_a_day() -> None:
    # 2026-11-27 20:00 UTC is already the 28th in Tokyo (UTC+9)
    assert ago("2026-11-27T20:00:00.000Z", NOW) == "2026-11-28"
    assert ago("2026-11-27T10:00:00+00:00", NOW) == "2026-11-27"


def test_ago_reads_offsets_and_naive_times_as_utc() -> None:
    assert ago("2026-11-29T19:55:00+02:00", NOW) == "5 min ago"
    assert ago("2026-11-29T17:30:00", NOW) == "30 min ago"


def test_ago_defaults_to_the_clock() -> None:
    recent = (datetime.now(UTC) - timedelta(minutes=10)).isoformat()
    assert ago(recent) in ("10 min ago", "9 min ago", "11 min ago")


@pytest.mark.parametrize("stamp", [None, ""])
def test_ago_of_nothing(stamp: str | None) -> None:
    assert ago(stamp, NOW) == ""


def test_ago_shows_an_unreadable_time_as_is() -> None:
    assert ago("yesterday-ish", NOW) == "yesterday-ish"


@pytest.mark.parametrize(("value", "expected"), [
    (0.0, "$0.00"),
    (0.004, "<$0.01"),
    (0.0099, "<$0.01"),
    (0.01, "$0.01"),
    (1.234, "$1.23"),
    (12.5, "$12.50"),
])
def test_cost(value: float, expected: str) -> None:
    s = session()
    s = msgspec.structs.replace(s, usage=msgspec.structs.replace(s.usage, cost_usd=value))
    assert cost(s) == expected


@pytest.mark.parametrize(("status", "label"), [
    ("idle", "Idle"),
    ("queued", "Queued"),
    ("running", "Working"),
    ("waiting_approval", "Needs approval"),
    ("unknown", "Outcome unknown"),
    ("compressing_now", "Compressing now"),
])
def test_status_label(status: str, label: str) -> None:
    assert status_label(status) == label


def test_every_session_status_of_the_protocol_has_a_label() -> None:
    assert {"idle", "queued", "running", "waiting_approval"} <= set(STATUS_LABELS)


def test_what_arrives_while_a_listing_is_on_its_way_is_applied_again_over_it() -> None:
    old = session("s_old", updated_at="2026-12-01T10:00:00+00:00")
    sl, _ = listing(old)
    sl.loading()
    created = session("s_new", updated_at="2026-12-01T10:05:00+00:00")
    sl.apply(event("session.created", {"session": created}, session_id="s_new"))
    newer = session("s_old", title="renamed", updated_at="2026-12-01T10:06:00+00:00")
    sl.apply(event("session.updated", {"session": newer}, session_id="s_old"))
    # The listing's snapshot was taken before both: without them it would drop the new
    # session and the rename.
    sl.load([old], None)
    assert sorted(ids(sl)) == ["s_new", "s_old"]
    assert next(r for r in sl.rows if r.session_id == "s_old").title == "renamed"
    # An update older than what a later listing holds is not applied over it.
    sl.loading()
    stale = session("s_old", title="stale", updated_at="2026-12-01T10:01:00+00:00")
    sl.apply(event("session.updated", {"session": stale}, session_id="s_old"))
    sl.load([newer, created], None)
    assert next(r for r in sl.rows if r.session_id == "s_old").title == "renamed"
    # Once loaded, events apply once as usual (nothing kept for the next listing).
    sl.load([newer], None)
    assert ids(sl) == ["s_old"]
