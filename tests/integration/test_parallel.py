"""Sessions run in parallel; one session runs one turn at a time, in submission order."""

from __future__ import annotations

import asyncio
import itertools
import time

from tests.fakes.openai_server import FakeOpenAI, Recorded, Reply

from .wire import Connect, create_session, submit, wait_complete

SESSIONS = 20
SLOW = Reply(deltas=["a ", "b ", "c ", "d"], delay=0.25)  # about a second per reply


def _duration(r: Recorded) -> float:
    assert r.ended is not None, f"request for {r.last_user_text!r} never ended"
    return r.ended - r.started


async def test_twenty_sessions_run_in_parallel(connect: Connect, fake_provider: FakeOpenAI) -> None:
    fake_provider.default = SLOW
    rpcs = [await connect(name=f"client{i}") for i in range(4)]
    sids = [await create_session(rpcs[i % 4]) for i in range(SESSIONS)]
    t0 = time.monotonic()
    receipts = await asyncio.gather(
        *(submit(rpcs[i % 4], sid, f"parallel {i}") for i, sid in enumerate(sids))
    )
    completes = await asyncio.gather(
        *(wait_complete(rpcs[i % 4], r["admission_id"], timeout=90) for i, r in enumerate(receipts))
    )
    wall = time.monotonic() - t0
    for i, complete in enumerate(completes):
        assert complete["data"]["status"] == "completed", (i, complete["data"])
        assert complete["data"]["text"] == "a b c d"

    requests = fake_provider.snapshot()
    assert sorted(r.last_user_text for r in requests) == sorted(f"parallel {i}" for i in range(20))
    busy = sum(_duration(r) for r in requests)
    assert fake_provider.max_active >= 10, (
        f"at most {fake_provider.max_active} model calls overlapped: sessions must run in parallel"
    )
    assert wall < busy / 2, f"20 turns took {wall:.1f}s; run one after another they take {busy:.1f}s"


async def test_prompts_in_one_session_never_overlap_and_keep_order(
    connect: Connect, fake_provider: FakeOpenAI
) -> None:
    fake_provider.default = Reply(deltas=["x", "y", "z"], delay=0.2)
    rpc = await connect()
    sid = await create_session(rpc)
    other = await create_session(rpc)
    texts = ["one", "two", "three"]
    receipts = [await submit(rpc, sid, t) for t in texts]
    receipts.append(await submit(rpc, other, "elsewhere"))
    completes = [await wait_complete(rpc, r["admission_id"]) for r in receipts]
    assert all(c["data"]["status"] == "completed" for c in completes), completes

    mine = [r for r in fake_provider.snapshot() if r.last_user_text in texts]
    assert [r.last_user_text for r in mine] == texts, "turns of one session run in FIFO order"
    for before, after in itertools.pairwise(mine):
        assert before.ended is not None
        assert before.ended <= after.started, (
            f"{before.last_user_text!r} and {after.last_user_text!r} overlapped at the provider"
        )
    seqs = [c["seq"] for c in completes[:3]]
    assert seqs == sorted(seqs), "message.complete in submission order"
    elsewhere = next(r for r in fake_provider.snapshot() if r.last_user_text == "elsewhere")
    assert elsewhere.started < mine[-1].started, "another session does not wait for this queue"
