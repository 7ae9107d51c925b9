"""`session.resume`'s running turn is the one its own transaction sees.

A turn's end is committed a moment before the runner leaves the running registry.  A window
that took its snapshot in that moment got the stored answer *and* the answer's streamed text
as a running turn's, and no end event came afterwards to take the copy away: the answer
stayed on screen twice (tests/desktop/test_compression_view.py, seen in CI)."""

from __future__ import annotations

import asyncio

from backend.authority.sessions import SessionService
from backend.providers.base import TextChunk
from backend.store import admissions
from backend.tools.checkpoints import Checkpoints
from tests.unit.turn.harness import MODEL, Harness, Pause, text


def service(harness: Harness) -> SessionService:
    return SessionService(harness.db, harness.authority,
                          Checkpoints(harness.db, harness.data_dir), lambda: MODEL)


async def test_a_snapshot_names_the_running_turn_and_its_streamed_text(harness: Harness) -> None:
    sid = await harness.session()
    pause = Pause()
    harness.provider.script([TextChunk("Half an "), pause, *text("answer")])
    receipt = await harness.submit(sid, "go")
    await asyncio.wait_for(pause.reached.wait(), 10)
    snapshot = await service(harness).resume(sid, None)
    for _ in range(500):  # the deltas are stored in batches, a moment after they stream
        if snapshot.active_turn is None or snapshot.active_turn.text:
            break
        await asyncio.sleep(0.01)
        snapshot = await service(harness).resume(sid, None)
    assert snapshot.active_turn is not None
    assert snapshot.active_turn.admission_id == receipt.admission_id
    assert snapshot.active_turn.text == "Half an "
    pause.release.set()
    await harness.settled(receipt.admission_id)
    assert (await service(harness).resume(sid, None)).active_turn is None


async def test_a_turn_whose_end_is_written_is_not_running_in_a_snapshot(harness: Harness) -> None:
    sid = await harness.session()
    pause = Pause()
    harness.provider.script([TextChunk("Half an "), pause, *text("answer")])
    receipt = await harness.submit(sid, "go")
    await asyncio.wait_for(pause.reached.wait(), 10)
    assert harness.authority.running(sid) is not None
    # The end as its transaction leaves it, the runner not yet out of the registry.
    await harness.db.write(lambda tx: admissions.settle(
        tx, receipt.admission_id, "completed", final_text="Half an answer"))
    assert harness.authority.running(sid) is not None
    snapshot = await service(harness).resume(sid, None)
    assert snapshot.active_turn is None
    harness.authority.interrupt(sid)
