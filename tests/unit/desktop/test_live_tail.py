"""The live output tail: lines as a terminal leaves them, progress bars redrawn, bounded."""

from __future__ import annotations

from desktop.state.live_tail import LINE_CHARS, Lines, LiveTail


def test_lines_end_at_newlines_and_split_chunks_join() -> None:
    lines = Lines()
    assert lines.feed("line 1\nli") == ["line 1"]
    assert lines.current == "li"
    assert lines.feed("ne 2\n\nline") == ["line 2", ""]
    assert lines.current == "line"


def test_a_return_without_newline_starts_the_line_over() -> None:
    lines = Lines()
    assert lines.feed("10%\r20%\r") == []
    assert lines.current == "20%"  # until something replaces it
    assert lines.feed("100%") == []
    assert lines.current == "100%"
    assert lines.feed("\r") == []
    assert lines.feed("\n") == ["100%"], "\\r\\n split across chunks is a newline"
    assert lines.feed("a\r\r\nb\r\n") == ["a", "b"]


def test_backspace_takes_back_a_character() -> None:
    lines = Lines()
    assert lines.feed("spin |\b/\b-\b\\\bdone\n") == ["spin done"]


def test_a_line_without_end_keeps_its_end() -> None:
    lines = Lines()
    lines.feed("x" * (3 * LINE_CHARS) + "END")
    assert len(lines.current) == LINE_CHARS
    assert lines.current.endswith("END")


def test_tail_of_a_progress_bar_with_colours() -> None:
    tail = LiveTail()
    chunks = ["\x1b[32mDownloading\x1b[0m\n", "\r 10% |█", "       |", "\r 50% |████   |\x1b",
              "[K\r100% |████████|", "\r\n", "\x1b[1mSaved\x1b[0m to out.bin\n"]
    for chunk in chunks:
        tail.feed(chunk)
    assert tail.text == "Downloading\n100% |████████|\nSaved to out.bin\n"


def test_tail_keeps_the_last_lines_and_characters() -> None:
    tail = LiveTail(keep_lines=5, keep_chars=40)
    for i in range(100):
        tail.feed(f"line {i}\n")
    assert tail.text == "".join(f"line {i}\n" for i in range(95, 100))
    tail.feed("a" * 30)
    assert len(tail.text) <= 40
    assert tail.text == "line 99\n" + "a" * 30
    tail.feed("".join(f"{i}\n" for i in range(10_000)))  # one big chunk
    assert tail.text == "9995\n9996\n9997\n9998\n9999\n"
