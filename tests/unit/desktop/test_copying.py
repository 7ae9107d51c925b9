"""What the transcript copies: a selection's part of each row as rows come and go, and an exchange
as markdown."""

from __future__ import annotations

from desktop.state.copying import (
    Selection,
    Spot,
    code_span,
    exchange_markdown,
    exchange_rows,
    joined,
    quoted,
)
from desktop.state.transcript import items_from_messages
from tests.unit.desktop.factories import assistant, call, note, tool, user


def test_a_selection_gives_each_row_its_part_whichever_end_came_first() -> None:
    down = Selection(Spot(1, 4), Spot(3, 2))
    up = Selection(Spot(3, 2), Spot(1, 4))
    for chosen in (down, up):
        assert (chosen.start, chosen.end, chosen.rows) == (Spot(1, 4), Spot(3, 2), range(1, 4))
        assert [chosen.part(row, 10) for row in range(5)] == [None, (4, 10), (0, 10), (0, 2), None]
        assert chosen.whole(2, 10)
        assert not chosen.whole(1, 10)
    within = Selection(Spot(2, 7), Spot(2, 3))
    assert within.part(2, 10) == (3, 7)
    assert within.part(2, 5) == (3, 5), "a row whose text got shorter: what is left of it"
    assert Selection(Spot(2, 3), Spot(2, 3)).empty
    assert Selection(Spot(2, 3), Spot(2, 3)).part(2, 10) is None
    assert Selection(Spot(1, 10), Spot(2, 0)).part(1, 10) is None, "nothing of a row past its end"


def test_a_selection_keeps_its_text_as_rows_are_added_and_removed() -> None:
    chosen = Selection(Spot(5, 1), Spot(3, 2))
    assert chosen.inserted(0, 4) == Selection(Spot(9, 1), Spot(7, 2)), "an older page above"
    assert chosen.inserted(3, 1) == Selection(Spot(6, 1), Spot(4, 2))
    assert chosen.inserted(6, 2) == chosen, "below it"
    assert chosen.removed(0, 2) == Selection(Spot(3, 1), Spot(1, 2))
    assert chosen.removed(6, 3) == chosen
    assert chosen.removed(4, 1) is None, "a row of it is gone"
    assert chosen.removed(1, 3) is None


def test_selected_parts_join_with_a_blank_line() -> None:
    assert joined(["end of one\n", "", "two\nlines", "\nstart"]) == "end of one\n\ntwo\nlines\n\nstart"


def test_quoted_and_code_spans() -> None:
    assert quoted("a\n\n  b\n") == "> a\n>\n>   b"
    assert code_span("ls -la") == "`ls -la`"
    assert code_span("a `b` c") == "``a `b` c``"
    assert code_span("`x`") == "`` `x` ``"


def test_an_exchange_runs_from_its_prompt_to_the_next() -> None:
    items = items_from_messages([
        assistant("m0", "the end of an older exchange"),
        user("m1", "go"), assistant("m2", "", calls=[call("c1", command="ls")]), tool("m3", "c1", "a"),
        assistant("m4", "done"), user("m5", "again"), assistant("m6", "ok"),
    ])
    assert [exchange_rows(items, row) for row in range(len(items))] == [
        range(0, 1), range(1, 4), range(1, 4), range(1, 4), range(4, 6), range(4, 6)]
    assert exchange_markdown(items[1:4]) == "> go\n\n- `terminal` `ls` — done\n\ndone\n"


def test_an_exchange_as_markdown_says_mcp_calls_and_notes_shortly() -> None:
    items = items_from_messages([
        user("m1", "# not a heading, typed"),
        assistant("m2", "", calls=[call("c1", "mcp__files__search", query="todo")]),
        note("m3", "failed", "The model did not answer."),
    ])
    assert exchange_markdown(items) == (
        "> # not a heading, typed\n\n- `search` (files · MCP) `todo` — queued\n\n"
        "**Note:** The model did not answer.\n")
