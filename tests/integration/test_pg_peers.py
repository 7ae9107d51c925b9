"""Two backend processes on one PostgreSQL database, each with its own clients.

Every admission runs exactly once, two turns of one session never overlap, events of a
turn run by one backend reach the other's clients (NOTIFY, replayed from the table), an
interrupt sent to one backend stops the turn the other runs, and kill -9 of a backend
mid-turn leaves that turn `unknown` while the other takes over the session's queue once
the lease's TTL has run out.  The two backends are the `pair` fixture (conftest.py).
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import uuid

from tests.fakes.openai_server import FakeOpenAI, Recorded, Reply

from .backend_proc import Backend
from .wire import Rpc, create_session, get_receipt, submit, wait_complete, wait_receipt_status


async def _open(backend: Backend, name: str) -> Rpc:
    return await Rpc.open(backend.port, backend.token, name=name)


def _overlaps(requests: list[Recorded]) -> list[tuple[str, str]]:
    ordered = sorted(requests, key=lambda r: r.started)
    return [(x.last_user_text, y.last_user_text) for x, y in itertools.pairwise(ordered)
            if x.ended is None or x.ended > y.started]


async def test_two_backends_run_every_admission_once_and_never_overlap_a_session(
    pair: tuple[Backend, Backend], fakes: tuple[FakeOpenAI, FakeOpenAI],
) -> None:
    a, b = pair
    for fake in fakes:
        fake.default = Reply(deltas=["x", "y"], delay=0.02)
    ra, rb = await _open(a, "client-a"), await _open(b, "client-b")
    sessions = [await create_session(ra if i % 2 else rb) for i in range(3)]
    prompts = [(sid, f"p{i}-{sid[-6:]}") for i in range(6) for sid in sessions]
    receipts = await asyncio.gather(*(
        submit(ra if i % 2 else rb, sid, text) for i, (sid, text) in enumerate(prompts)))
    # Each client hears its own admissions' answers, whichever backend ran them.
    completes = await asyncio.gather(*(
        wait_complete(ra if i % 2 else rb, r["admission_id"], timeout=120)
        for i, r in enumerate(receipts)))
    assert all(c["data"]["status"] == "completed" for c in completes)

    asked = fakes[0].snapshot() + fakes[1].snapshot()
    texts = sorted(r.last_user_text for r in asked)
    assert texts == sorted(text for _, text in prompts), "every admission ran exactly once"
    print(f"backend A ran {len(fakes[0].snapshot())} turns, B ran {len(fakes[1].snapshot())}")
    for sid in sessions:
        mine = [r for r in asked if r.last_user_text.endswith(sid[-6:])]
        assert _overlaps(mine) == [], f"two turns of {sid} overlapped"
    rows = a.query("SELECT status, outcome, COUNT(*) AS n FROM admissions "
                   "GROUP BY status, outcome")
    assert [(r["status"], r["outcome"], r["n"]) for r in rows] == [
        ("terminal", "completed", len(prompts))]
    for sid in sessions:
        seqs = [r["seq"] for r in a.query(
            "SELECT seq FROM events WHERE session_id = ? ORDER BY seq", (sid,))]
        assert seqs == list(range(1, len(seqs) + 1)), "each session's seqs are gapless"
    await ra.close()
    await rb.close()


async def test_a_window_opened_on_one_backend_shows_what_the_others_turn_streamed_so_far(
    pair: tuple[Backend, Backend], fakes: tuple[FakeOpenAI, FakeOpenAI],
) -> None:
    """session.resume through B of a session whose turn runs on A names that turn and the
    text it streamed so far, so a window opened mid-stream shows it and appends the rest."""
    a, b = pair
    release = threading.Event()
    fakes[0].default = Reply(deltas=["so far ", "and the rest"], hang_after=1, release=release)
    ra, rb = await _open(a, "client-a"), await _open(b, "client-b")
    sid = await create_session(ra)
    receipt = await submit(ra, sid, "long job")
    await ra.wait_event(lambda e: e.get("type") == "message.delta", 30)
    resumed = await rb.call("session.resume", {"session_id": sid})
    assert resumed["active_turn"]["admission_id"] == receipt["admission_id"]
    assert resumed["active_turn"]["text"] == "so far "
    release.set()
    await wait_complete(ra, receipt["admission_id"], timeout=30)
    assert (await rb.call("session.resume", {"session_id": sid})).get("active_turn") is None
    await ra.close()
    await rb.close()


async def test_an_interrupt_sent_to_one_backend_stops_the_turn_the_other_runs(
    pair: tuple[Backend, Backend], fakes: tuple[FakeOpenAI, FakeOpenAI],
) -> None:
    a, b = pair
    release = threading.Event()
    fakes[0].default = Reply(deltas=["working", "never"], hang_after=1, release=release)
    ra, rb = await _open(a, "client-a"), await _open(b, "client-b")
    sid = await create_session(ra)
    receipt = await submit(ra, sid, "long job")
    await ra.wait_event(lambda e: e.get("type") == "message.delta", 30)
    await rb.call("session.subscribe", {"session_id": sid, "since_seq": 0})
    result = await rb.call("turn.interrupt", {"session_id": sid})
    assert result["interrupted"] is True
    settled = await wait_receipt_status(ra, receipt["admission_id"], "terminal", timeout=30)
    assert settled["outcome"] == "interrupted"
    # B's client saw the whole turn, replayed and then live through the other backend.
    await rb.wait_event(lambda e: e.get("type") == "admission.settled", 30)
    release.set()
    await ra.close()
    await rb.close()


async def test_kill9_of_one_backend_mid_turn_leaves_it_unknown_and_the_other_takes_over(
    pair: tuple[Backend, Backend], fakes: tuple[FakeOpenAI, FakeOpenAI],
) -> None:
    a, b = pair
    fakes[0].default = Reply(deltas=["half an ans", "wer"], hang_after=1)  # hangs until cut
    fakes[1].default = Reply(deltas=["done on B"])
    ra, rb = await _open(a, "client-a"), await _open(b, "client-b")
    sid = await create_session(ra)
    first = await submit(ra, sid, "started on A")
    await ra.wait_event(lambda e: e.get("type") == "message.delta", 30)
    queued = await submit(rb, sid, f"queued behind it {uuid.uuid4().hex[:6]}")
    assert queued["status"] == "queued"

    a.kill9()
    # After the lease's TTL B's sweep finds A's heartbeat stale: A's turn is unknown, never re-run.
    lost = await wait_receipt_status(rb, first["admission_id"], "unknown", timeout=30)
    assert lost["status"] == "unknown"
    # An unknown turn holds its session's queue until someone moves on: B takes it from there.
    await rb.call("admission.resolve", {"admission_id": first["admission_id"],
                                        "resolution": "interrupted"})
    complete = await wait_complete(rb, queued["admission_id"], timeout=60)
    assert complete["data"]["text"] == "done on B"

    assert [r.last_user_text for r in fakes[0].snapshot()] == ["started on A"]
    assert [r.last_user_text for r in fakes[1].snapshot()] == [queued_text(fakes[1])]
    assert (await get_receipt(rb, first["admission_id"]))["outcome"] == "interrupted"
    notes = b.query("SELECT COUNT(*) AS n FROM messages WHERE session_id = ? "
                    "AND note_kind = 'recovered'", (sid,))
    assert notes[0]["n"] == 1, "one recovered note closes the lost turn"
    streamed = b.query("SELECT content FROM messages WHERE session_id = ? AND role = 'assistant' "
                       "AND status = 'unknown'", (sid,))
    assert [r["content"] for r in streamed] == ["half an ans"], "delivered text is kept"
    await rb.close()
    await ra.close()


def queued_text(fake: FakeOpenAI) -> str:
    (only,) = [r.last_user_text for r in fake.snapshot()]
    assert only.startswith("queued behind it"), only
    return only
