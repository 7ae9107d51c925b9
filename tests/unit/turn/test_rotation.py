"""A compression rotation moves a running turn: its routing state follows it to the child."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from backend.providers.base import ChatRequest, TextChunk
from backend.store import leases, messages
from backend.store.db import Tx
from tests.unit.turn.harness import Harness, Pause, Step, config_toml, text

WINDOW = 6000
REFRESH_S = 0.05  # the lease watch refreshes often: one refreshing the wrong session loses it


@pytest.fixture
def harness_config() -> str:
    return config_toml(WINDOW, extra=(
        "[compression]\nrotate = true\ntail_tokens_min = 300\n"
        f"[lease]\nrefresh_s = {REFRESH_S}\n"))


def is_summary(request: ChatRequest) -> bool:
    return not request.tools and "Next steps" in request.messages[0].content


async def test_a_rotation_moves_the_turn_so_an_interrupt_of_the_child_reaches_it(
    harness: Harness,
) -> None:
    parent = await harness.session()

    def history(tx: Tx) -> None:  # earlier turns, well over the window's threshold
        for n in range(8):
            messages.insert(tx, parent, "user", f"question {n}: " + "filler " * 300)
            messages.insert(tx, parent, "assistant", f"answer {n}: " + "word " * 300)

    await harness.db.write(history)
    pause = Pause()

    def respond(request: ChatRequest) -> Sequence[Step]:
        if is_summary(request):
            return text("## Goal\nSUMMARY: testing.\n## Next steps\nkeep going")
        return [TextChunk("Work"), pause, *text("ing on.")]

    harness.provider.responder = respond
    receipt = await harness.submit(parent, "go on")
    await asyncio.wait_for(pause.reached.wait(), 10)

    [done] = harness.events(parent, "compression.complete")
    child = done.data["child_session_id"]
    assert child
    assert child != parent
    turn = harness.authority.running(child)
    assert turn is not None
    assert turn.session_id == child
    assert harness.authority.running(parent) is None, "the turn is found where it runs now"
    held = await harness.db.read(lambda tx: leases.current(tx, child))
    assert held is not None
    assert held.holder == turn.holder
    await asyncio.sleep(REFRESH_S * 6)  # several refreshes of the lease, in the child
    assert not turn.interrupted, f"the lease watch lost the lease: {turn.reason}"

    assert not harness.authority.interrupt(parent)
    assert harness.authority.interrupt(child, "Interrupted in the child.")
    settled = await harness.settled(receipt.admission_id)
    assert (settled.session_id, settled.outcome) == (child, "interrupted")
    assert settled.turn_id == turn.turn_id
    assert settled.final_text == "Work"
    [complete] = harness.events(child, "message.complete")
    assert complete.data["status"] == "interrupted"
    assert not harness.events(parent, "message.complete")
    rows = await harness.messages(child)
    assert (rows[-1].note_kind, rows[-1].content) == ("interrupted", "Interrupted in the child.")
    assert await harness.db.read(lambda tx: leases.current(tx, child)) is None, "released"
    assert harness.authority.running(child) is None
