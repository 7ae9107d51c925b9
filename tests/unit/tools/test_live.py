"""Live output chunks: in order, nothing lost within the limits, skips marked, bounded whatever is printed."""

from __future__ import annotations

import re
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from backend.tools.live import (
    BACKLOG_BYTES,
    BUDGET_BYTES,
    CHUNK_BYTES,
    EVENT_COST,
    FLUSH_S,
    RATE_BYTES,
    SLOW_BYTES,
    SLOW_FLUSH_S,
    Chunk,
    LiveOutput,
    head_of,
    human_bytes,
    marker,
    tail_of,
    utf8_len,
)

MARKER = re.compile(r"\n?… [^\n]* not shown live; see the result …\n")


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def drain(live: LiveOutput) -> list[Chunk]:
    out: list[Chunk] = []
    while (chunk := live.take(final=True)) is not None:
        out.append(chunk)
    return out


def rebuild(printed: str, chunks: list[Chunk]) -> None:
    """Checks that the chunks are `printed` in order with some stretches replaced by a marker
    line each, whose chunk says how many bytes it stands for; and that they end as it does."""
    source = printed.encode()
    pos, sent = 0, ""
    for chunk in chunks:
        text = chunk.text
        if chunk.elided_bytes:
            m = MARKER.match(text)
            assert m is not None, text[:200]
            assert m.group().startswith("\n") == (sent != "" and not sent.endswith("\n"))
            pos += chunk.elided_bytes
            text = text[m.end():]
        else:
            assert MARKER.search(text) is None
        body = text.encode()
        assert source[pos:pos + len(body)] == body
        pos += len(body)
        sent += chunk.text
    assert pos == len(source), "the chunks reach the end of the output"


def test_what_comes_within_an_interval_goes_out_in_one_chunk_in_order() -> None:
    clock = Clock()
    live = LiveOutput(clock)
    live.write("line 1\n")
    assert live.take() == Chunk("line 1\n")
    live.write("line 2\n")
    live.write("line 3\n")
    clock.now = FLUSH_S / 2
    assert live.take() is None, "too soon after the last chunk"
    clock.now = FLUSH_S
    assert live.take() == Chunk("line 2\nline 3\n")
    clock.now += FLUSH_S
    assert live.take() is None, "nothing new"
    assert drain(live) == []


def test_forty_lines_over_ten_seconds_arrive_whole() -> None:
    clock = Clock()
    live = LiveOutput(clock)
    chunks: list[Chunk] = []
    printed = ""
    for i in range(1, 41):
        live.write(f"line {i}\n")
        printed += f"line {i}\n"
        for _ in range(2):  # the executor's tick, twice between lines
            clock.now += 0.125
            if (chunk := live.take()) is not None:
                chunks.append(chunk)
    chunks += drain(live)
    assert "".join(c.text for c in chunks) == printed
    assert len(chunks) == 40


def test_a_flood_is_skipped_with_a_marker_and_the_end_still_arrives() -> None:
    clock = Clock()
    live = LiveOutput(clock)
    printed = "".join(f"row {i:07d}\n" for i in range(400_000))  # 4.8 MB in 12-byte lines
    chunks: list[Chunk] = []
    for start in range(0, len(printed), 65536):
        live.write(printed[start:start + 65536])
        assert live.held_bytes <= BACKLOG_BYTES
        clock.now += 0.01  # 6.5 MB/s
        if (chunk := live.take()) is not None:
            chunks.append(chunk)
    chunks += drain(live)
    rebuild(printed, chunks)
    skipped = [c for c in chunks if c.elided_bytes]
    assert skipped, "a flood must be skipped"
    first = skipped[0].text
    assert re.match(r"\n?… [\d,]+ lines \([\d.]+ [KM]B\) not shown live; see the result …\n", first), first
    assert all(MARKER.sub("", c.text).startswith("row ") for c in skipped), "a skip ends at a line start"
    assert chunks[-1].text.endswith(printed[-1000:])
    sent = sum(utf8_len(c.text) for c in chunks)
    elapsed = clock.now
    assert sent <= RATE_BYTES * elapsed + CHUNK_BYTES + BACKLOG_BYTES + 200 * len(skipped)


def test_the_marker_gets_a_line_of_its_own() -> None:
    clock = Clock()
    live = LiveOutput(clock)
    live.write("partial")
    assert live.take() == Chunk("partial")
    live.write("x" * (3 * BACKLOG_BYTES) + "\nthe end\n")
    clock.now += FLUSH_S
    chunk = live.take()
    assert chunk is not None
    assert chunk.text.startswith("\n… 128.0 KB not shown live; see the result …\nxxx")
    assert chunk.elided_bytes == 3 * BACKLOG_BYTES + 9 - BACKLOG_BYTES
    assert "".join(c.text for c in drain(live)).endswith("xxx\nthe end\n")


def test_the_rate_is_held_and_the_budget_then_slows_it_down() -> None:
    clock = Clock()
    live = LiveOutput(clock)
    line = "0123456789abcde\n"
    times: list[float] = []
    sizes: list[int] = []
    for _ in range(int(60 / 0.05)):  # a minute of 320 KB/s, ticked every 50 ms
        live.write(line * 1024)
        clock.now += 0.05
        if (chunk := live.take()) is not None:
            times.append(clock.now)
            sizes.append(utf8_len(chunk.text))
    spent_at = next(i for i in range(len(sizes)) if sum(max(s, EVENT_COST) for s in sizes[:i + 1])
                    >= BUDGET_BYTES)
    fast, slow = sizes[:spent_at + 1], sizes[spent_at + 1:]
    seconds = times[spent_at]
    assert sum(fast) <= RATE_BYTES * seconds + CHUNK_BYTES
    assert sum(fast) >= BUDGET_BYTES - CHUNK_BYTES
    assert all(b - a >= FLUSH_S - 1e-9 for a, b in pairwise(times[:spent_at + 1]))
    assert slow, "after the budget, chunks still come"
    assert all(b - a >= SLOW_FLUSH_S - 1e-9 for a, b in pairwise(times[spent_at:]))
    assert max(slow) <= SLOW_BYTES + 100  # the newest kilobyte and a marker
    assert len(slow) <= (clock.now - times[spent_at]) / SLOW_FLUSH_S + 1


def test_a_slow_trickle_is_not_skipped_after_the_budget() -> None:
    clock = Clock()
    live = LiveOutput(clock)
    live.spent = BUDGET_BYTES
    printed = ""
    chunks: list[Chunk] = []
    for i in range(100):
        live.write(f"step {i}\n")
        printed += f"step {i}\n"
        clock.now += 0.5
        if (chunk := live.take()) is not None:
            chunks.append(chunk)
    chunks += drain(live)
    assert "".join(c.text for c in chunks) == printed
    assert len(chunks) <= 26


def test_held_output_is_bounded_whatever_is_written() -> None:
    live = LiveOutput(Clock())
    block = "é" * 40_000 + "\n"  # 80 KB, no chance to send
    for _ in range(200):
        live.write(block)
        assert live.held_bytes <= BACKLOG_BYTES
    chunks = drain(live)
    assert chunks[0].elided_bytes > 0
    assert sum(utf8_len(c.text) for c in chunks) <= BACKLOG_BYTES + 200
    assert all(utf8_len(c.text) <= CHUNK_BYTES + 100 for c in chunks)
    assert "".join(c.text for c in chunks).endswith("é" * 1000 + "\n")


@given(st.text(alphabet="ab\n\ré€\U0001f600", max_size=300), st.integers(1, 300))
def test_cuts_never_split_a_character(text: str, limit: int) -> None:
    head, tail = head_of(text, limit), tail_of(text, limit)
    assert text.startswith(head)
    assert text.endswith(tail)
    assert utf8_len(head) <= limit
    assert utf8_len(tail) <= limit
    assert utf8_len(head) > limit - 4 or head == text
    assert utf8_len(tail) > limit - 4 or tail == text


writes = st.lists(
    st.tuples(
        st.one_of(st.text(alphabet="xy\n\r\té", max_size=50),
                  st.builds(lambda n, c: c * n, st.integers(1, 200_000), st.sampled_from("z\né"))),
        st.floats(0, 0.5),
    ),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(writes)
def test_any_writes_rebuild_the_output_and_stay_bounded(steps: list[tuple[str, float]]) -> None:
    clock = Clock()
    live = LiveOutput(clock)
    chunks: list[Chunk] = []
    for text, wait in steps:
        live.write(text)
        assert live.held_bytes <= BACKLOG_BYTES
        clock.now += wait
        if (chunk := live.take()) is not None:
            chunks.append(chunk)
    chunks += drain(live)
    rebuild("".join(t for t, _ in steps), chunks)
    assert all(c.text for c in chunks), "no empty chunk"
    assert all(utf8_len(c.text) <= CHUNK_BYTES + 100 for c in chunks)


@pytest.mark.parametrize(("lines", "size", "words"), [
    (0, 1, "… 1 byte not shown live; see the result …\n"),
    (1, 700, "… 1 line (700 bytes) not shown live; see the result …\n"),
    (12_345, 1_258_291, "… 12,345 lines (1.2 MB) not shown live; see the result …\n"),
    (0, 3 * 1024 ** 3, "… 3.0 GB not shown live; see the result …\n"),
])
def test_marker_words(lines: int, size: int, words: str) -> None:
    assert marker(lines, size) == words
    assert human_bytes(2048) == "2.0 KB"
