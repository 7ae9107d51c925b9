"""The sessions sidebar without Qt: every backend's sessions as rows (grouped by day or folder,
ranked when searching, under a row naming each backend when there are several), where a
session or a row is, what the rows say, and what the sidebar lists, offers and asks."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from desktop.state.sessions import SessionRows
from desktop.state.sidebar import (
    EMPTY,
    BackendHeader,
    Header,
    Note,
    Section,
    SidebarRows,
    age_words,
    backend_state,
    backend_tip,
    day_group,
    session_tip,
    session_words,
    snippet_spans,
)
from shared import protocol as p
from tests.unit.desktop.factories import event, session

NOON = datetime(2026, 3, 31, 12, tzinfo=UTC)
TODAY = NOON.astimezone().date()  # the day as this computer reads it


def _days_ago(n: int) -> str:
    return (NOON - timedelta(days=n)).isoformat().replace("+00:00", "Z")


@dataclass
class FakeLink:
    """A backend's link as the list reads it (desktop.link.Link's properties)."""

    key: str = "local"
    title: str = "This computer"
    current: str = "connected"
    refusal: str = ""
    remote_host: str = ""


def _section(*sessions: p.Session, link: FakeLink | None = None, query: str = "",
             cursor: str | None = None) -> Section[FakeLink]:
    rows = SessionRows()
    rows.load(list(sessions), cursor, query)
    return Section(link or FakeLink(), rows)


def _rows(*sections: Section[FakeLink], grouping: str = "day") -> SidebarRows[FakeLink]:
    rows = SidebarRows(list(sections))
    rows.grouping = grouping
    rows.rebuild(TODAY)
    return rows


def _match(sid: str, snippet: str, highlights: list[tuple[int, int]] | None = None) -> p.SearchMatch:
    return p.SearchMatch(session_id=sid, message_id=None, snippet=snippet,
                         highlights=highlights or [])


def _s(sid: str, days: int = 0, cwd: str = "/srv/a", **extra: Any) -> p.Session:
    return session(sid, updated_at=_days_ago(days), cwd=cwd, **extra)


# --- the rows -----------------------------------------------------------------------------


def test_days_are_grouped_as_people_say_them() -> None:
    assert day_group(_days_ago(0), TODAY) == "Today"
    assert day_group(_days_ago(1), TODAY) == "Yesterday"
    assert day_group(_days_ago(6), TODAY) == "Previous 7 days"
    assert day_group(_days_ago(7), TODAY) == "Previous 30 days"
    assert day_group(_days_ago(29), TODAY) == "Previous 30 days"
    assert day_group(_days_ago(45), TODAY) == "February 2026"
    assert day_group("not a time", TODAY) == "Older"
    assert day_group("2026-03-31T12:00:00", TODAY) == "Today", "no zone: UTC"


def test_one_backends_sessions_by_day_a_header_before_each_day() -> None:
    rows = _rows(_section(_s("a"), _s("b"), _s("c", 1), _s("d", 50)))
    assert rows.entries == [Header("Today"), (0, 0), (0, 1), Header("Yesterday"), (0, 2),
                            Header("February 2026"), (0, 3)]


def test_by_folder_the_folders_come_in_the_order_of_their_latest_session() -> None:
    home = str(Path.home())
    rows = _rows(_section(_s("a", cwd=f"{home}/x"), _s("b", cwd="/srv"), _s("c", cwd=f"{home}/x")),
                 grouping="folder")
    assert rows.entries == [Header("~/x"), (0, 0), (0, 2), Header("/srv"), (0, 1)]


def test_search_results_are_one_ranked_group_counted() -> None:
    assert _rows(_section(_s("a"), _s("b", 40), query="x")).entries == [
        Header("2 results"), (0, 0), (0, 1)]
    assert _rows(_section(_s("a"), query="x", cursor="c1")).entries[0] == Header("1 result+")


def test_several_backends_each_under_its_header_and_an_empty_one_says_why() -> None:
    rows = _rows(_section(_s("a")),
                 _section(link=FakeLink("r1", current="reconnecting", refusal="wrong certificate")),
                 _section(link=FakeLink("r2", current="connecting")),
                 _section(link=FakeLink("r3"), query="zebra"),
                 _section(link=FakeLink("r4")))
    assert rows.entries == [
        BackendHeader(0), Header("Today"), (0, 0),
        BackendHeader(1), Note("Pair again to list its sessions"),
        BackendHeader(2), Note("Its sessions show once it answers"),
        BackendHeader(3), Note("Nothing matches"),
        BackendHeader(4), Note("No sessions yet")]


def test_where_a_session_and_a_row_are() -> None:
    there = FakeLink("remote", "build-box")
    rows = _rows(_section(_s("a"), _s("b", 1)), _section(_s("c", title=""), link=there))
    assert rows.locate("c") == (1, 0)
    assert rows.row_of("c") == 7  # its header, Today, a, Yesterday, b; its header, Today, c
    assert rows.locate("gone") is None
    assert rows.row_of("gone") is None
    assert rows.session_at(2) is not None
    assert rows.session_at(1) is None, "a header"
    assert rows.session_at(99) is None
    assert rows.link_of("c") is there
    assert rows.link_of("gone") is None
    assert rows.section_at(5) is rows.sections[1], "a backend's header"
    assert rows.section_at(4) is rows.sections[0]
    assert rows.section_at(-1) is rows.sections[0], "nowhere: the first"
    assert rows.section_of(there) is rows.sections[1]
    assert rows.section_of(None) is rows.sections[0]
    assert rows.listed_title("c") == "New session"
    assert rows.listed_title("a") == "A session"
    assert rows.listed_title("gone") == "gone"


# --- what the sidebar lists ----------------------------------------------------------------


def test_the_first_backend_is_always_listed_again_the_others_once_connected() -> None:
    first = _section(link=FakeLink(current="reconnecting"))
    up, down = _section(link=FakeLink("up")), _section(link=FakeLink("down", current="connecting"))
    rows = _rows(first, up, down)
    assert rows.to_reload() == [first, up]


def test_a_listing_replaces_its_own_backends_matches_and_keeps_the_others() -> None:
    here, there = _section(_s("a"), _s("b")), _section(_s("c"), link=FakeLink("r"))
    rows = _rows(here, there)
    old = {sid: _match(sid, sid) for sid in ("a", "b", "c", "gone")}
    rows.matches = dict(old)
    rows.listed(here, [_match("b", "new")])
    assert rows.matches == {"c": old["c"], "b": _match("b", "new")}


def test_only_backends_with_another_page_wait_for_it() -> None:
    more = _section(_s("a"), cursor="next")
    rows = _rows(_section(_s("b")), more)
    assert rows.waiting() == [more]


def test_the_empty_list_says_why_only_with_one_backend() -> None:
    assert _rows(_section()).empty_words() == EMPTY
    assert _rows(_section(query="zebra")).empty_words() == "Nothing matches “zebra”."
    assert _rows(_section(_s("a"))).empty_words() is None
    assert _rows(_section(), _section(link=FakeLink("r"))).empty_words() is None, "notes say it"


def test_before_the_first_listing_the_empty_list_says_nothing() -> None:
    """At start-up the list is empty until its listing arrives: "No sessions yet" then would
    be a frame that is wrong and then jumps."""
    waiting = _rows(Section(FakeLink(), SessionRows()))
    assert waiting.empty_words() is None
    waiting.sections[0].rows.load([], None)
    assert waiting.empty_words() == EMPTY


def test_only_session_broadcasts_change_the_list() -> None:
    created = event("session.created", {"session": _s("a")}, session_id="a")
    deleted = event("session.deleted", {"session_id": "a"}, session_id="a")
    broadcast = event("session.updated", {"session": _s("a")}, session_id="a")
    own = event("session.updated", {"session": _s("a")}, session_id="a", seq=4)
    other = event("some.later.event", {}, session_id="a")
    assert [SidebarRows.lists(e) for e in (created, deleted, broadcast, own, other)] == [
        True, True, True, False, False]


def test_a_backends_menu_only_with_several_and_only_a_remote_one_is_removed() -> None:
    there = FakeLink("remote", "build-box")
    rows = _rows(_section(_s("a")), _section(_s("b"), link=there))
    assert rows.backend_actions(None) is None
    first = rows.backend_actions(2)
    assert first is not None
    assert (first.name, first.key, first.removable) == ("This computer", "local", False)
    second = rows.backend_actions(rows.row_of("b"))
    assert second is not None
    assert (second.name, second.key, second.removable) == ("build-box", "remote", True)
    assert _rows(_section(_s("a"))).backend_actions(1) is None


def test_the_backend_label_shows_only_for_one_remote_backend() -> None:
    one = _rows(_section())
    assert one.backend_label("build-box") == (
        "On build-box", "These sessions live on the backend at build-box; their tools run there",
        True)
    assert one.backend_label("") == ("", "", False)
    assert _rows(_section(), _section()).backend_label("build-box")[2] is False


def test_a_change_of_connection_redraws_the_header_or_an_empty_sections_note() -> None:
    full, empty = _section(_s("a")), _section(link=FakeLink("r"))
    rows = _rows(full, empty)
    assert rows.redraws(full) == "header"
    assert rows.redraws(empty) == "all"
    assert rows.redraws(_section()) == "", "a section removed meanwhile"
    assert _rows(full).redraws(full) == "", "one backend: no header"


def test_a_busy_session_is_forced_on_the_second_delete_only() -> None:
    rows = _rows(_section(_s("a"), _s("b")))
    assert rows.forcing("a", False) is False
    rows.busy("a")
    assert rows.forcing("b", False) is False
    assert rows.forcing("a", False) is True
    assert rows.forcing("a", False) is False, "once"
    assert rows.forcing("b", True) is True


# --- what a row says -------------------------------------------------------------------


def test_a_sessions_row_in_words() -> None:
    s = _s("a", status="waiting_approval", cwd=str(Path.home() / "code" / "app"), cost_usd=0.5)
    said = session_words(s, "build-box", ["Also in Matrix: Ops"])
    assert said.startswith("A session, Needs approval, $0.50, ")
    assert said.endswith(", on build-box, Also in Matrix: Ops")
    assert ", on " not in session_words(s, "", [])
    tip = session_tip(s, ["Also in Matrix: Ops"]).split("\n")
    assert tip[:2] == ["A session", "~/code/app · some-model"]
    assert tip[2].startswith("0 messages · $0.50 · ")
    assert tip[3] == "Also in Matrix: Ops"


def test_a_sessions_age_names_its_folder_unless_grouped_by_it() -> None:
    s = _s("a", days=0, cwd="/srv/project")
    assert age_words(s, "day").endswith(" · project")
    assert " · " not in age_words(s, "folder")
    assert age_words(_s("b", cwd="/"), "day").endswith(" · /")


def test_a_snippet_splits_into_runs_around_its_matches() -> None:
    match = _match("a", "one two\nthree four", [(8, 13), (4, 7), (5, 9), (15, 99)])
    assert snippet_spans(match) == [("one ", False), ("two", True), (" ", False),
                                    ("three", True), (" four", False)]
    assert snippet_spans(_match("a", "title")) == [("title", False)]


def test_a_backends_connection_in_words_and_tone() -> None:
    assert backend_state(FakeLink()) == ("Connected", "success")
    assert backend_state(FakeLink(current="failed", refusal="wrong certificate")) == (
        "Refused: wrong certificate", "danger")
    assert backend_state(FakeLink(current="starting")) == ("Connecting…", "muted")
    assert backend_state(FakeLink(current="reconnecting")) == ("Reconnecting…", "warning")
    assert backend_tip(FakeLink(remote_host="10.0.0.5", current="connecting")) == (
        "Sessions on 10.0.0.5; their tools run there.\nConnecting…")
    assert backend_tip(FakeLink()).startswith("Sessions on this computer;")


def test_today_defaults_to_this_computers_day() -> None:
    assert day_group(datetime.now(UTC).isoformat()) == "Today"
