"""Idempotent prompt.submit: one key, one run — duplicates, conflicts, and across restarts."""

from __future__ import annotations

import asyncio
import threading

import pytest

from tests.fakes.openai_server import FakeOpenAI, Reply

from .backend_proc import Backend
from .wire import Connect, Json, Rpc, RpcError, create_session, get_receipt, wait_complete, wait_settled

QUIET_S = 0.5  # how long "nothing else reached the provider" is watched


async def _submit_raw(rpc: Rpc, sid: str, request_id: str, text: str) -> Json:
    params = {"session_id": sid, "request_id": request_id, "text": text}
    return dict((await rpc.call("prompt.submit", params))["receipt"])


async def _assert_duplicate_and_conflict(
    rpc: Rpc, sid: str, first: Json, fake: FakeOpenAI, calls_before: int
) -> None:
    dup = await _submit_raw(rpc, sid, "req-1", "hello once")
    assert dup["admission_id"] == first["admission_id"], "same key, same text: same admission"
    assert dup["duplicate"] is True, f"the repeat must say duplicate: {dup}"
    assert dup["request_id"] == "req-1"
    assert dup["status"] == "terminal", dup
    assert dup["outcome"] == "completed", dup
    with pytest.raises(RpcError) as conflict:
        await _submit_raw(rpc, sid, "req-1", "hello TWICE")
    assert conflict.value.code == -32010, f"same key, other text: admission conflict, got {conflict.value}"
    await asyncio.sleep(QUIET_S)
    assert len(fake.snapshot()) == calls_before, "a duplicate or a conflict must not call the model"
    receipts = (await rpc.call("admission.list", {"session_id": sid}))["receipts"]
    assert [r["admission_id"] for r in receipts] == [first["admission_id"]], receipts


async def test_duplicate_submit_runs_once_and_conflict_is_refused(
    connect: Connect, fake_provider: FakeOpenAI
) -> None:
    rpc = await connect()
    sid = await create_session(rpc)
    first = await _submit_raw(rpc, sid, "req-1", "hello once")
    assert first["duplicate"] is False
    await wait_complete(rpc, first["admission_id"])
    await wait_settled(rpc, first["admission_id"])
    assert len(fake_provider.snapshot()) == 1
    await _assert_duplicate_and_conflict(rpc, sid, first, fake_provider, calls_before=1)

    other = await create_session(rpc)  # the key includes the session: same request_id is new
    fresh = await _submit_raw(rpc, other, "req-1", "hello once")
    assert fresh["admission_id"] != first["admission_id"]
    assert fresh["duplicate"] is False
    await wait_complete(rpc, fresh["admission_id"])


async def test_duplicate_while_queued_returns_the_queued_receipt(
    connect: Connect, fake_provider: FakeOpenAI
) -> None:
    release = threading.Event()
    fake_provider.routes["first"] = Reply(deltas=["a", "b"], hang_after=1, release=release)
    rpc = await connect()
    sid = await create_session(rpc)
    try:
        a = await _submit_raw(rpc, sid, "req-a", "first")
        await fake_provider.async_wait_requests(1)
        b = await _submit_raw(rpc, sid, "req-b", "second")
        b_again = await _submit_raw(rpc, sid, "req-b", "second")
    finally:
        release.set()
    assert b["status"] == "queued", f"behind a running turn: {b}"
    assert b_again["admission_id"] == b["admission_id"]
    assert b_again["duplicate"] is True
    assert b_again["status"] == "queued", b_again
    for receipt in (a, b):
        await wait_settled(rpc, receipt["admission_id"])
    await asyncio.sleep(QUIET_S)
    assert [r.last_user_text for r in fake_provider.snapshot()] == ["first", "second"]


@pytest.mark.parametrize("how", ["sigterm", "kill9"])
async def test_idempotence_holds_after_restart(
    how: str, backend: Backend, connect: Connect, fake_provider: FakeOpenAI
) -> None:
    rpc = await connect()
    sid = await create_session(rpc)
    first = await _submit_raw(rpc, sid, "req-1", "hello once")
    await wait_settled(rpc, first["admission_id"])
    await rpc.close()

    if how == "kill9":
        backend.kill9()
        backend.start()
    else:
        await asyncio.to_thread(backend.restart)

    rpc2 = await connect(name="after-restart")
    stored = await get_receipt(rpc2, first["admission_id"])
    assert (stored["status"], stored.get("outcome")) == ("terminal", "completed"), stored
    await _assert_duplicate_and_conflict(rpc2, sid, first, fake_provider, calls_before=1)
