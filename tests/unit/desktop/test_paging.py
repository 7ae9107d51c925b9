"""A conversation's paging: which older page comes next, and when reading back over a
finished turn stops."""

from __future__ import annotations

from desktop.state.paging import TOP_SLACK, at_top, older_page, turn_read
from tests.unit.desktop.factories import assistant, tool, user


def test_the_next_older_page_is_read_before_the_oldest_message() -> None:
    assert older_page(True, "m100") == "m100"


def test_no_older_page_while_one_is_read_when_none_is_left_or_nothing_is_loaded() -> None:
    assert older_page(True, "m100", fetching=True) is None
    assert older_page(False, "m100") is None
    assert older_page(True, None) is None
    assert older_page(True, "") is None


def test_the_top_is_the_first_few_pixels_of_a_loaded_transcript() -> None:
    assert at_top(0, 0, loaded=True)
    assert at_top(TOP_SLACK, 0, loaded=True)
    assert not at_top(TOP_SLACK + 1, 0, loaded=True)
    assert at_top(-3, -3, loaded=True)
    assert not at_top(0, 0, loaded=False), "nothing is paged before the session is loaded"


def test_reading_back_stops_at_the_turns_prompt() -> None:
    page = [user("m1", "do it", "t2"), assistant("m2", "done", "t2")]
    assert turn_read("t2", page, True, page)


def test_reading_back_goes_on_while_the_page_is_all_the_turn() -> None:
    page = [tool("m5", "c1", "out", "t2"), assistant("m6", "done", "t2")]
    assert not turn_read("t2", page, True, page)


def test_reading_back_stops_when_nothing_is_older_or_nothing_was_read() -> None:
    page = [assistant("m6", "done", "t2")]
    assert turn_read("t2", page, False, page)
    assert turn_read("t2", [], True, [])


def test_reading_back_stops_at_an_earlier_turns_row() -> None:
    earlier = [assistant("m1", "before", "t1"), assistant("m2", "after", "t2")]
    assert turn_read("t2", earlier, True, earlier)


def test_the_prompt_counts_only_in_the_page_just_read() -> None:
    older = [tool("m3", "c1", "", "t2")]
    rows = [*older, user("m4", "again?", "t3"), assistant("m5", "", "t2")]
    assert not turn_read("t2", older, True, rows), "another turn's prompt does not stop it"
