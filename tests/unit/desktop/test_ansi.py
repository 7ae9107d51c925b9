"""Escape sequences out of command output, also when the pieces cut them anywhere."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from desktop.state.ansi import SGR_AND_EL, AnsiStripper, strip_ansi

CASES = [
    ("\x1b[1;31mred\x1b[0m plain", "red plain"),
    ("\x1b[38;5;208morange\x1b[38:2:1:2:3mrgb\x1b[m", "orangergb"),
    ("a\x1b[2Kb\x1b[1A\x1b[10;20Hc\x1b[?25l\x1b[?25h", "abc"),  # erase, cursor, private modes
    ("\x1b]0;window title\x07after", "after"),  # OSC ended by BEL
    ("\x1b]8;;https://example.com\x1b\\link\x1b]8;;\x1b\\", "link"),  # OSC 8 hyperlink, ST
    ("\x1bPq#0;2;0;0;0#1!14~\x1b\\sixel gone", "sixel gone"),  # DCS
    ("\x1b(B\x1b7\x1b8\x1b=\x1b>x", "x"),  # two-character sequences
    ("\x9b31mC1 CSI\x9b0m", "C1 CSI"),
    ("bell\x07 nul\x00 del\x7f vt\x0b", "bell nul del vt"),
    ("keeps\ttabs\r\nreturns\bbackspaces\n", "keeps\ttabs\r\nreturns\bbackspaces\n"),
    ("\x1b[31\nbroken", "\nbroken"),  # a CSI broken by a newline: the newline stays
    ("\x1b\nlone escape", "\nlone escape"),
    ("üñí©ødé \U0001f600 \x1b[1mbold\x1b[22m", "üñí©ødé \U0001f600 bold"),
]


@pytest.mark.parametrize(("raw", "clean"), CASES)
def test_strips_whole_text(raw: str, clean: str) -> None:
    assert strip_ansi(raw) == clean


@pytest.mark.parametrize(("raw", "clean"), CASES)
def test_strips_the_same_whatever_the_cuts(raw: str, clean: str) -> None:
    for size in (1, 2, 3, 5):
        stripper = AnsiStripper()
        assert "".join(stripper.feed(raw[i:i + size]) for i in range(0, len(raw), size)) == clean


def test_a_title_longer_than_any_piece_holds_nothing() -> None:
    stripper = AnsiStripper()
    assert stripper.feed("before\x1b]2;") == "before"
    for _ in range(1000):
        assert stripper.feed("t" * 1000) == ""
    assert stripper.feed("\x07after") == "after"


def test_a_terminal_may_keep_colours_and_erasing() -> None:
    stripper = AnsiStripper(SGR_AND_EL)
    raw = "\x1b[1;32mok\x1b[0m\x1b[2K\r\x1b[3Aup\x1b]0;t\x07 \x1b[K"
    pieces = [raw[i:i + 2] for i in range(0, len(raw), 2)]
    assert "".join(stripper.feed(p) for p in pieces) == "\x1b[1;32mok\x1b[0m\x1b[2K\rup \x1b[K"


raw_output = st.lists(st.sampled_from([
    "text", "é", "\n", "\r", "\t", "\b", "\x1b", "[", "]", "31", ";", "m", "K", "\x07", "\\",
    "P", "\x9b", "\x9d", "\x00", "(", "B",
]), max_size=60).map("".join)


@given(raw_output, st.lists(st.integers(1, 10), max_size=10))
def test_never_shows_an_escape_and_cuts_change_nothing(raw: str, sizes: list[int]) -> None:
    whole = strip_ansi(raw)
    assert "\x1b" not in whole
    assert not any("\x80" <= c <= "\x9f" or c in "\x00\x07" for c in whole)
    stripper, out, i = AnsiStripper(), [], 0
    for size in [*sizes, len(raw)]:
        out.append(stripper.feed(raw[i:i + size]))
        i += size
    assert "".join(out) == whole
