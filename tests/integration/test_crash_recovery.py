"""kill -9 of the backend: started work becomes `unknown`, queued work survives and runs FIFO."""

from __future__ import annotations

import asyncio

import pytest

from tests.fakes.openai_server import FakeOpenAI, Reply

from .backend_proc import Backend
from .wire import (
    Connect,
    Json,
    Rpc,
    RpcError,
    create_session,
    get_receipt,
    is_event,
    submit,
    wait_complete,
    wait_settled,
)

QUIET_S = 1.5  # how long the restarted backend is watched for doing nothing it should not
HANG = Reply(deltas=["streaming ", "until ", "the crash"], hang_after=1)  # hangs until hung up


async def _status(rpc: Rpc, admission_id: str) -> tuple[str, str | None]:
    receipt = await get_receipt(rpc, admission_id)
    return receipt["status"], receipt.get("outcome")


async def _crash_mid_stream(
    backend: Backend, connect: Connect, fake: FakeOpenAI, queued_texts: list[str]
) -> tuple[str, Json, list[Json]]:
    """A session whose first prompt streams when the backend is killed, with prompts behind it."""
    fake.routes["crash me"] = HANG
    rpc = await connect(name="before-crash")
    sid = await create_session(rpc)
    running = await submit(rpc, sid, "crash me", request_id="req-running")
    queued = [await submit(rpc, sid, text, request_id=f"req-{text}") for text in queued_texts]
    for receipt in queued:
        assert receipt["status"] == "queued", f"behind a streaming turn: {receipt}"
    await rpc.wait_event(is_event("message.delta", running["admission_id"]), timeout=30)
    backend.kill9()
    await rpc.wait_closed()
    backend.start()
    return sid, running, queued


async def _texts_after(fake: FakeOpenAI, first_index: int, count: int) -> list[str]:
    requests = await fake.async_wait_requests(first_index + count)
    return [r.last_user_text for r in requests[first_index:]]


async def test_kill9_mid_stream_unknown_holds_queue_until_next_prompt(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI
) -> None:
    sid, running, queued = await _crash_mid_stream(
        backend, connect, fake_provider, ["queued one", "queued two"]
    )
    rpc = await connect(name="after-restart")
    await rpc.call("session.subscribe", {"session_id": sid})
    run_id = running["admission_id"]
    assert await _status(rpc, run_id) == ("unknown", None), "a started turn of a dead process"
    for receipt in queued:
        assert await _status(rpc, receipt["admission_id"]) == ("queued", None)

    await asyncio.sleep(QUIET_S)
    assert len(fake_provider.snapshot()) == 1, "nothing may run while an unknown one holds"
    assert await _status(rpc, run_id) == ("unknown", None)
    for receipt in queued:
        assert await _status(rpc, receipt["admission_id"]) == ("queued", None), "queue is held"

    new = await submit(rpc, sid, "after crash", request_id="req-new")
    assert new["status"] == "queued", new
    settled = await wait_settled(rpc, run_id)
    receipt = settled["data"]["receipt"]
    assert (receipt["status"], receipt["outcome"]) == ("terminal", "interrupted"), receipt
    assert await _status(rpc, run_id) == ("terminal", "interrupted")

    order = [*queued, new]
    completes = [await wait_complete(rpc, r["admission_id"]) for r in order]
    for complete in completes:
        assert complete["data"]["status"] == "completed", complete["data"]
    seqs = [c["seq"] for c in completes]
    assert seqs == sorted(seqs), f"turns must finish in FIFO order: {seqs}"
    assert settled["seq"] < min(seqs), "the unknown one is settled before the queue drains"
    texts = await _texts_after(fake_provider, 1, 3)
    assert texts == ["queued one", "queued two", "after crash"], "FIFO, earlier prompts first"
    await asyncio.sleep(0.3)
    assert len(fake_provider.snapshot()) == 4, "the unknown admission must never be re-run"
    assert not [e for e in rpc.events if is_event("message.complete", run_id)(e)], (
        "resolving an unknown admission emits admission.settled, not message.complete"
    )


async def test_admission_resolve_frees_the_queue(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI
) -> None:
    sid, running, [behind] = await _crash_mid_stream(backend, connect, fake_provider, ["waiting behind"])
    rpc = await connect(name="after-restart")
    await rpc.call("session.subscribe", {"session_id": sid})
    run_id, behind_id = running["admission_id"], behind["admission_id"]
    with pytest.raises(RpcError) as not_unknown:
        await rpc.call("admission.resolve", {"admission_id": behind_id, "resolution": "interrupted"})
    assert not_unknown.value.code == -32012, "only an unknown admission can be resolved"

    result = await rpc.call("admission.resolve", {"admission_id": run_id, "resolution": "interrupted"})
    receipt = result["receipt"]
    assert (receipt["status"], receipt["outcome"]) == ("terminal", "interrupted"), receipt
    settled = await wait_settled(rpc, run_id)
    assert settled["data"]["receipt"]["outcome"] == "interrupted"

    complete = await wait_complete(rpc, behind_id)
    assert complete["data"]["status"] == "completed", complete["data"]
    assert await _texts_after(fake_provider, 1, 1) == ["waiting behind"]
    with pytest.raises(RpcError) as again:
        await rpc.call("admission.resolve", {"admission_id": run_id, "resolution": "interrupted"})
    assert again.value.code == -32012, "a resolved admission cannot be resolved twice"


async def test_queued_admissions_survive_kill9_and_run_fifo(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI
) -> None:
    fake_provider.routes["blocker"] = HANG
    rpc = await connect(name="before-crash")
    sid = await create_session(rpc)
    blocker = await submit(rpc, sid, "blocker")
    queued = {t: await submit(rpc, sid, t) for t in ["q1", "q2", "q3", "q4", "q5"]}
    await fake_provider.async_wait_requests(1)  # the blocker is started and streaming
    cancelled = await rpc.call("admission.cancel", {"admission_id": queued["q2"]["admission_id"]})
    assert (cancelled["receipt"]["status"], cancelled["receipt"]["outcome"]) == (
        "terminal",
        "cancelled",
    ), cancelled
    backend.kill9()
    backend.start()

    rpc = await connect(name="after-restart")
    await rpc.call("session.subscribe", {"session_id": sid})
    listed = (await rpc.call("admission.list", {"session_id": sid, "status": "queued"}))["receipts"]
    assert [r["request_id"] for r in listed] == [queued[t]["request_id"] for t in ["q1", "q3", "q4", "q5"]], (
        f"queued admissions survive kill -9, in FIFO order: {listed}"
    )
    assert await _status(rpc, queued["q2"]["admission_id"]) == ("terminal", "cancelled")
    after = await rpc.call("admission.cancel", {"admission_id": queued["q4"]["admission_id"]})
    assert after["receipt"]["outcome"] == "cancelled", "a surviving queued one can be cancelled"

    await rpc.call(
        "admission.resolve", {"admission_id": blocker["admission_id"], "resolution": "interrupted"}
    )
    runs = [queued[t] for t in ["q1", "q3", "q5"]]
    completes = [await wait_complete(rpc, r["admission_id"]) for r in runs]
    assert [c["data"]["status"] for c in completes] == ["completed"] * 3
    seqs = [c["seq"] for c in completes]
    assert seqs == sorted(seqs), f"FIFO completion order: {seqs}"
    assert await _texts_after(fake_provider, 1, 3) == ["q1", "q3", "q5"]
    await asyncio.sleep(0.5)
    texts = [r.last_user_text for r in fake_provider.snapshot()]
    assert "q2" not in texts, "a cancelled admission never runs"
    assert "q4" not in texts, "a cancelled admission never runs"
    with pytest.raises(RpcError) as late:
        await rpc.call("admission.cancel", {"admission_id": queued["q1"]["admission_id"]})
    assert late.value.code == -32012, "only a queued admission can be cancelled"


async def test_resubmitting_after_a_crash_is_a_duplicate_and_resolves_nothing(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI
) -> None:
    """A client retrying its in-flight prompts after the crash must not run or settle anything."""
    sid, running, [behind] = await _crash_mid_stream(backend, connect, fake_provider, ["queued one"])
    rpc = await connect(name="after-restart")
    again = await submit(rpc, sid, "crash me", request_id="req-running")
    assert again["admission_id"] == running["admission_id"]
    assert again["duplicate"] is True, again
    assert again["status"] == "unknown", again
    queued_again = await submit(rpc, sid, "queued one", request_id="req-queued one")
    assert queued_again["admission_id"] == behind["admission_id"]
    assert queued_again["duplicate"] is True
    assert queued_again["status"] == "queued", queued_again
    with pytest.raises(RpcError) as conflict:
        await submit(rpc, sid, "crash me, but different", request_id="req-running")
    assert conflict.value.code == -32010, conflict.value

    await asyncio.sleep(QUIET_S)
    assert len(fake_provider.snapshot()) == 1, "a duplicate runs nothing"
    assert await _status(rpc, running["admission_id"]) == ("unknown", None), (
        "only a new prompt (or admission.resolve) acknowledges an unknown admission"
    )
    assert await _status(rpc, behind["admission_id"]) == ("queued", None)


async def test_transcript_after_a_crash_keeps_what_was_delivered_and_invents_nothing(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI
) -> None:
    """The text clients saw stays in the transcript, marked unknown; no answer is made up."""
    sid, running, _ = await _crash_mid_stream(backend, connect, fake_provider, [])
    rpc = await connect(name="after-restart")
    before = (await rpc.call("session.events.since", {"session_id": sid, "since_seq": 0}))["events"]
    delivered = "".join(
        e["data"]["text"] for e in before
        if e["type"] == "message.delta" and e["admission_id"] == running["admission_id"]
    )
    assert delivered, "the crash happened after at least one delta was stored"
    rows = (await rpc.call("session.messages", {"session_id": sid}))["messages"]
    shape = [(m["role"], m.get("status"), m.get("note_kind")) for m in rows]
    assert shape == [("user", None, None), ("assistant", "unknown", None),
                     ("system_note", None, "recovered")], shape
    assert rows[1]["content"] == delivered, "exactly the delivered text, not more, not less"
    assert not any(e["type"] == "message.complete" for e in before), "no completion is invented"

    fake_provider.default = Reply(deltas=["fresh answer"])
    new = await submit(rpc, sid, "carry on", request_id="req-carry-on")
    complete = await wait_complete(rpc, new["admission_id"])
    assert complete["data"]["text"] == "fresh answer"
    sent = fake_provider.snapshot()[-1].body["messages"]
    roles = [(m["role"], m["content"]) for m in sent[1:]]
    assert roles == [("user", "crash me"), ("assistant", delivered), ("user", "carry on")], (
        "the model sees the delivered partial answer; notes are for people only"
    )
