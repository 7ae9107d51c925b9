"""Delta coalescing: nothing lost, order kept, far fewer events than deltas while streaming."""

import asyncio

from backend.turn.stream import DeltaWriter


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
