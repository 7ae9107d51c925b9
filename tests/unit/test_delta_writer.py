"""Delta coalescing: nothing lost, order kept, far fewer events than deltas while streaming."""

import asyncio
import json
from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from backend.turn.stream import MAX_DELTA_BYTES, DeltaWriter, pieces


async def test_coalesces_and_keeps_every_character() -> None:
    stored: list[tuple[float, str]] = []
    loop = asyncio.get_running_loop()

    async def write(text: str) -> None:
        stored.append((loop.time(), text))

    writer = DeltaWriter(write, interval=0.05)
    sent = [f"t{i} " for i in range(200)]
    for piece in sent:
        writer.add(piece)
        await asyncio.sleep(0.001)
    await writer.close()
    assert "".join(t for _, t in stored) == "".join(sent) == writer.streamed
    assert len(stored) < 50, f"200 tiny deltas became {len(stored)} events"


async def test_first_delta_after_quiet_goes_out_at_once() -> None:
    stored: list[str] = []

    async def write(text: str) -> None:
        stored.append(text)

    writer = DeltaWriter(write, interval=10.0)
    writer.add("hello")
    await asyncio.sleep(0.05)
    assert stored == ["hello"], "a lone delta is not held for the interval"
    writer.add(" world")
    await writer.close()
    assert stored == ["hello", " world"], "close flushes what is buffered"


def _stored_size(piece: str) -> int:
    return len(json.dumps({"text": piece}))


@pytest.mark.parametrize(
    "text",
    [
        "a" * (3 * MAX_DELTA_BYTES + 17),
        "é" * 40_000,  # 6 bytes each once escaped
        "\U0001f600" * 20_000,  # 12 bytes each: a surrogate pair once escaped
        '"\\\n\x01' * 30_000,
        ("mixed ascii, ü, 漢字 and \U0001f600 " * 5000),
    ],
    ids=["ascii", "latin", "astral", "escapes", "mixed"],
)
def test_pieces_keep_every_character_and_fit_the_bound(text: str) -> None:
    cut = pieces(text)
    assert "".join(cut) == text
    assert all(0 < _stored_size(p) <= MAX_DELTA_BYTES for p in cut)
    assert all(_stored_size(p) > MAX_DELTA_BYTES - 12 for p in cut[:-1]), "pieces are full"


@given(st.text(), st.integers(min_value=24, max_value=200))
def test_pieces_of_any_text_join_back_and_each_fits(text: str, limit: int) -> None:
    cut = pieces(text, limit)
    assert "".join(cut) == text
    assert all(0 < _stored_size(p) <= limit for p in cut)
    assert all(_stored_size(a + b[0]) > limit for a, b in pairwise(cut)), (
        "each piece is as long as the bound allows"
    )


async def test_one_huge_delta_is_stored_as_bounded_events_in_order() -> None:
    stored: list[str] = []

    async def write(text: str) -> None:
        stored.append(text)

    writer = DeltaWriter(write)
    big = "".join(f"{i:07d} " for i in range(1_300_000))  # ~10 MB
    writer.add("start ")
    writer.add(big)
    writer.add(" end")
    await writer.close()
    assert "".join(stored) == writer.streamed == "start " + big + " end"
    assert max(_stored_size(t) for t in stored) <= MAX_DELTA_BYTES
    assert len(stored) >= len(big) // MAX_DELTA_BYTES


async def test_a_stream_that_ends_within_the_grace_hands_its_text_over_unstored() -> None:
    stored: list[str] = []

    async def write(text: str) -> None:
        stored.append(text)

    writer = DeltaWriter(write, grace=10.0)
    writer.add("o")
    writer.add("k")
    await asyncio.sleep(0.01)  # the writer is waiting out the grace
    assert await writer.close(hand_over=True) == "ok"
    assert stored == [], "the closing commit stores it, not a commit of its own"
    assert writer.streamed == "ok"


async def test_the_first_delta_is_stored_once_the_grace_is_over() -> None:
    stored: list[str] = []

    async def write(text: str) -> None:
        stored.append(text)

    writer = DeltaWriter(write, grace=0.001)
    writer.add("hello")
    await asyncio.sleep(0.05)
    assert stored == ["hello"]
    writer.add(" world")
    assert await writer.close(hand_over=True) == " world", "only what was not stored"
    assert stored == ["hello"]


async def test_hand_over_waits_for_the_write_under_way_and_returns_what_came_after() -> None:
    stored: list[str] = []
    started, release = asyncio.Event(), asyncio.Event()

    async def write(text: str) -> None:
        started.set()
        await release.wait()
        stored.append(text)

    writer = DeltaWriter(write, grace=0.0)
    writer.add("a")
    await started.wait()  # "a" is being stored
    writer.add("b")
    closing = asyncio.create_task(writer.close(hand_over=True))
    await asyncio.sleep(0.01)
    assert not closing.done(), "the write under way is waited for"
    release.set()
    assert await closing == "b"
    assert stored == ["a"]
    assert writer.streamed == "ab"
