"""The background review end to end, on a real backend with two fake model servers (the
session's provider and the auxiliary one): after a person's turn the review runs on the
auxiliary provider, writes a memory entry, leaves one quiet "Noted" note that the next turn's
model never reads, and undo puts memory back; a prompt arriving mid-review stops it at once
and leaves nothing of it; off (the default) there is no review at all; a review killed
with the backend does not hold the session's queue after a restart; and the review's model
calls count in the session's cost (ledger task `review`), those it finished before an
interrupt included."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.openai_server import FakeOpenAI, Reply

from .backend_proc import Backend, BackendFactory
from .wire import Json, Rpc, RpcError, create_session, is_event, run_turn, submit, wait_complete


@pytest.fixture
def aux() -> Iterator[FakeOpenAI]:
    server = FakeOpenAI()
    yield server
    server.close()


def review_config(aux: FakeOpenAI, prices: str = "") -> str:
    return ('auxiliary_provider = "aux"\n'
            "[review]\nenabled = true\n"
            "[providers.aux]\n"
            'kind = "openai"\n'
            f'base_url = "{aux.base_url}"\n'
            'model = "aux-model"\n'
            "context_window = 128000\n" + prices)


AUX_PRICES = "input_usd_per_mtok = 1.0\noutput_usd_per_mtok = 4.0\n"


def spent(prompt: int, completion: int) -> dict[str, int]:
    return {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion}


def remember(text: str) -> Reply:
    return Reply.calls({"name": "memory",
                        "arguments": {"action": "add", "target": "user", "text": text}})


def user_md(backend: Backend) -> str | None:
    path = backend.data_dir / "memory" / "USER.md"
    return path.read_text() if path.exists() else None


def review_rows(backend: Backend) -> list[Json]:
    return backend.query("SELECT status, outcome, request_id FROM admissions "
                         "WHERE principal = 'review' ORDER BY id")


def review_notes(backend: Backend) -> list[Json]:
    return backend.query("SELECT id, content FROM messages WHERE note_kind = 'review'")


async def settled_review(backend: Backend, timeout: float = 30.0) -> Json:
    """The first review admission, once it is settled."""
    return (await settled_reviews(backend, 1, timeout))[0]


async def settled_reviews(backend: Backend, count: int, timeout: float = 30.0) -> list[Json]:
    """The first `count` review admissions, once they are all settled."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = review_rows(backend)[:count]
        if len(rows) == count and all(r["status"] == "terminal" for r in rows):
            return rows
        await asyncio.sleep(0.05)
    raise AssertionError(f"not {count} settled reviews within {timeout}s: {review_rows(backend)}")


async def test_a_review_writes_memory_quietly_and_undo_puts_it_back(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, aux: FakeOpenAI, tmp_path: Path,
) -> None:
    backend = backend_factory(fake_provider.base_url, review_config(aux))
    fake_provider.script(Reply(deltas=["Tabs it is."]), Reply(deltas=["Second answer."]))
    aux.script(remember("Prefers tabs over spaces."), Reply(deltas=["done"]))
    rpc = await Rpc.open(backend.port, backend.token)
    try:
        sid = await create_session(rpc, cwd=str(tmp_path))
        first, _ = await run_turn(rpc, sid, "I always indent with tabs")
        noted = await rpc.wait_event(is_event("review.noted"), timeout=30)
        note = noted["data"]["message"]
        assert note["role"] == "system_note"
        assert note["note_kind"] == "review"
        assert note["content"] == "Noted: added to USER.md: Prefers tabs over spaces."
        assert note["meta"]["changes"] == [{"kind": "memory", "target": "user", "action": "add",
                                            "text": "Prefers tabs over spaces."}]
        assert user_md(backend) == "Prefers tabs over spaces.\n"
        # It ran on the auxiliary provider, reading the turn; the session's got the turn only.
        reviewed = aux.snapshot()
        assert reviewed[0].body["model"] == "aux-model"
        assert "I always indent with tabs" in reviewed[0].last_user_text
        assert len(reviewed) == 2  # the call, then its answer after the tool's result
        assert (await settled_review(backend))["outcome"] == "completed"
        # The person's next turn: its request holds no trace of the review's exchange.
        await run_turn(rpc, sid, "thanks")
        request = fake_provider.snapshot()[-1].body
        roles = [m["role"] for m in request["messages"] if m["role"] != "system"]
        assert roles == ["user", "assistant", "user"], request["messages"]
        assert "Noted" not in str(request["messages"])
        assert "done" not in [m.get("content") for m in request["messages"]]
        # Shown in the transcript as a session's note, no turn's.
        listed = await rpc.call("session.messages", {"session_id": sid, "limit": 100})
        [shown] = [m for m in listed["messages"] if m.get("note_kind") == "review"]
        assert "turn_id" not in shown
        # Undo puts memory back; twice is fine.
        result = await rpc.call("review.undo", {"session_id": sid, "message_id": note["message_id"]})
        assert result == {"message_id": note["message_id"], "undone": True}
        assert user_md(backend) == ""
        await rpc.wait_event(is_event("review.undone"))
        # Settings → Memory hears of it as of any change: the last memory.changed is empty.
        await rpc.wait_until(lambda: [e["data"]["file"]["text"] for e in rpc.events
                                      if e["type"] == "memory.changed"][-1:] == [""])
        again = await rpc.call("review.undo", {"session_id": sid, "message_id": note["message_id"]})
        assert again["undone"] is True
        assert first["admission_id"]
    finally:
        await rpc.close()


async def test_undo_refuses_over_a_later_change(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, aux: FakeOpenAI, tmp_path: Path,
) -> None:
    backend = backend_factory(fake_provider.base_url, review_config(aux))
    fake_provider.script(Reply(deltas=["ok"]))
    aux.script(remember("Lives in Lisbon."), Reply(deltas=["done"]))
    rpc = await Rpc.open(backend.port, backend.token)
    try:
        sid = await create_session(rpc, cwd=str(tmp_path))
        await run_turn(rpc, sid, "I live in Lisbon")
        note = (await rpc.wait_event(is_event("review.noted"), timeout=30))["data"]["message"]
        await rpc.call("memory.set", {"target": "user", "text": "Lives in Porto."})
        with pytest.raises(RpcError) as refused:
            await rpc.call("review.undo", {"session_id": sid, "message_id": note["message_id"]})
        assert "changed after the review" in refused.value.message
        assert user_md(backend) == "Lives in Porto.\n"
    finally:
        await rpc.close()


async def test_a_prompt_mid_review_cancels_it_and_starts_at_once(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, aux: FakeOpenAI, tmp_path: Path,
) -> None:
    backend = backend_factory(fake_provider.base_url, review_config(aux))
    held = threading.Event()
    fake_provider.script(Reply(deltas=["first"]), Reply(deltas=["second"]))
    aux.script(Reply(deltas=["thinking"], hang_after=0, release=held))
    rpc = await Rpc.open(backend.port, backend.token)
    try:
        sid = await create_session(rpc, cwd=str(tmp_path))
        await run_turn(rpc, sid, "hello")
        await asyncio.to_thread(aux.wait_requests, 1)  # the review's model call is held
        sent = time.monotonic()
        receipt = await submit(rpc, sid, "next question")
        started = await rpc.wait_event(is_event("turn.started", receipt["admission_id"]), timeout=30)
        delay = time.monotonic() - sent
        print(f"turn.started {delay * 1000:.0f} ms after the prompt that cancelled the review")
        assert delay < 5.0, delay
        assert started["data"]["admission_id"] == receipt["admission_id"]
        done = await wait_complete(rpc, receipt["admission_id"])
        assert done["data"]["status"] == "completed"
        review = await settled_review(backend)
        assert review["outcome"] == "interrupted"
        assert user_md(backend) is None  # nothing written, not even half
        assert review_notes(backend) == []
        assert not any(e["type"] == "review.noted" for e in rpc.events)
    finally:
        held.set()
        await rpc.close()


async def test_review_off_by_default_makes_no_extra_call(
    backend: Backend, fake_provider: FakeOpenAI, tmp_path: Path,
) -> None:
    fake_provider.script(Reply(deltas=["one"]), Reply(deltas=["two"]))
    rpc = await Rpc.open(backend.port, backend.token)
    try:
        sid = await create_session(rpc, cwd=str(tmp_path))
        await run_turn(rpc, sid, "first")
        await run_turn(rpc, sid, "second")
        assert len(fake_provider.snapshot()) == 2
        assert review_rows(backend) == []
    finally:
        await rpc.close()


async def test_a_review_killed_with_the_backend_does_not_hold_the_queue(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, aux: FakeOpenAI, tmp_path: Path,
) -> None:
    backend = backend_factory(fake_provider.base_url, review_config(aux))
    fake_provider.script(Reply(deltas=["first"]), Reply(deltas=["after the crash"]))
    aux.script(Reply(deltas=["thinking"], hang_after=0))
    rpc = await Rpc.open(backend.port, backend.token)
    sid = await create_session(rpc, cwd=str(tmp_path))
    await run_turn(rpc, sid, "hello")
    await asyncio.to_thread(aux.wait_requests, 1)
    rpc.abort()
    backend.kill9()
    backend.start()
    assert review_rows(backend)[0]["outcome"] == "interrupted"
    rpc = await Rpc.open(backend.port, backend.token)
    try:
        _, done = await run_turn(rpc, sid, "still there?")
        assert done["data"]["status"] == "completed"
        assert done["data"]["text"] == "after the crash"
        summary = await rpc.call("session.get", {"session_id": sid})
        assert summary["session"]["status"] == "idle"
        assert review_notes(backend) == []
        # The crashed review wrote no recovered note: the transcript is the person's alone.
        notes = backend.query("SELECT note_kind FROM messages WHERE role = 'system_note'")
        assert notes == []
    finally:
        await rpc.close()


async def test_a_reviews_model_calls_count_in_the_sessions_cost(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, aux: FakeOpenAI, tmp_path: Path,
) -> None:
    backend = backend_factory(fake_provider.base_url, review_config(aux, AUX_PRICES))
    fake_provider.script(Reply(deltas=["Tabs it is."], usage=spent(11, 7)))
    aux.script(Reply.calls({"name": "memory", "arguments": {
                   "action": "add", "target": "user", "text": "Prefers tabs."}},
                   usage=spent(500, 50)),
               Reply(deltas=["done"], usage=spent(300, 20)))
    rpc = await Rpc.open(backend.port, backend.token)
    try:
        sid = await create_session(rpc, cwd=str(tmp_path))
        await run_turn(rpc, sid, "I always indent with tabs")
        assert (await settled_review(backend))["outcome"] == "completed"
        ledger = await rpc.call("session.usage", {"session_id": sid})
        cost = (800 * 1.0 + 70 * 4.0) / 1_000_000
        [review] = [r for r in ledger["rows"] if r["task"] == "review"]
        assert review == {"provider": "aux", "model": "aux-model", "task": "review", "calls": 2,
                          "input_tokens": 800, "output_tokens": 70, "cached_tokens": 0,
                          "cost_usd": pytest.approx(cost), "estimated": False}
        [turn] = [r for r in ledger["rows"] if r["task"] == "turn"]
        assert (turn["input_tokens"], turn["output_tokens"]) == (11, 7)
        totals = ledger["usage"]
        assert (totals["input_tokens"], totals["output_tokens"]) == (811, 77)
        assert totals["cost_usd"] == pytest.approx(cost)
        # People hear the new totals: a usage.update of no turn, after the turn's own.
        update = await rpc.wait_event(lambda e: e["type"] == "usage.update"
                                      and e["data"]["usage"]["input_tokens"] == 811, timeout=30)
        assert update.get("turn_id") is None
        assert update["data"]["usage"] == {**totals, "cost_usd": pytest.approx(cost)}
        summary = await rpc.call("session.get", {"session_id": sid})
        assert summary["session"]["status"] == "idle"
    finally:
        await rpc.close()


async def test_an_interrupted_review_still_pays_for_the_calls_it_finished(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, aux: FakeOpenAI, tmp_path: Path,
) -> None:
    backend = backend_factory(fake_provider.base_url, review_config(aux))
    held = threading.Event()
    fake_provider.script(Reply(deltas=["first"], usage=spent(11, 7)),
                         Reply(deltas=["second"], usage=spent(13, 5)))
    aux.script(Reply.calls({"name": "memory", "arguments": {
                   "action": "add", "target": "user", "text": "Likes short answers."}},
                   usage=spent(500, 50)),
               Reply(deltas=["thinking"], hang_after=0, release=held),
               Reply(deltas=["nothing"], usage=spent(40, 4)))  # the second turn's review
    rpc = await Rpc.open(backend.port, backend.token)
    try:
        sid = await create_session(rpc, cwd=str(tmp_path))
        await run_turn(rpc, sid, "keep it short")
        await asyncio.to_thread(aux.wait_requests, 2)  # the first call answered, the second held
        await run_turn(rpc, sid, "next question")
        reviews = await settled_reviews(backend, 2)
        assert [r["outcome"] for r in reviews] == ["interrupted", "completed"]
        ledger = await rpc.call("session.usage", {"session_id": sid})
        [review] = [r for r in ledger["rows"] if r["task"] == "review"]
        # The interrupted review's finished call and the next review's one; the call the
        # interrupt cut off sent no usage and is not counted.
        assert (review["calls"], review["input_tokens"], review["output_tokens"]) == (
            2, 540, 54)
        totals = ledger["usage"]
        assert (totals["input_tokens"], totals["output_tokens"]) == (540 + 24, 54 + 12)
    finally:
        held.set()
        await rpc.close()
