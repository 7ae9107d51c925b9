"""One streamed turn over the wire: events, transcript, receipt, the request the model got."""

from __future__ import annotations

import asyncio
import json
import threading
from datetime import datetime

from tests.fakes.openai_server import FakeOpenAI, Recorded, Reply, content_text

from .backend_proc import Backend
from .wire import (
    Connect,
    Json,
    Rpc,
    create_session,
    deltas_text,
    get_receipt,
    run_turn,
    submit,
    wait_complete,
    wait_settled,
)

DELTAS = ["The ", "quick ", "brown ", "fox 🦊 ", "jumps — ", "über", " alles."]
ANSWER = "".join(DELTAS)


def _wire_view(req: Recorded) -> list[tuple[str, str]]:
    return [(m["role"], content_text(m)) for m in req.body["messages"]]


async def _messages(rpc: Rpc, sid: str) -> list[Json]:
    return list((await rpc.call("session.messages", {"session_id": sid}))["messages"])


async def test_streamed_turn_events_transcript_and_receipt(
    connect: Connect, fake_provider: FakeOpenAI
) -> None:
    fake_provider.routes["fox please"] = Reply(deltas=DELTAS, delay=0.02)
    rpc = await connect()
    sid = await create_session(rpc)
    receipt, complete = await run_turn(rpc, sid, "fox please")
    assert receipt["status"] in ("queued", "started", "terminal"), receipt
    assert receipt["duplicate"] is False, "a first submit is not a duplicate"

    data = complete["data"]
    turn_id = complete["turn_id"]
    assert data["status"] == "completed", f"turn did not complete: {data}"
    assert data["text"] == ANSWER, "message.complete.text must be the model's whole answer"
    assert deltas_text(rpc.events, turn_id) == data["text"], "joined deltas != complete.text"
    assert data["admission_id"] == receipt["admission_id"]
    assert data["turn_id"] == turn_id
    assert complete["admission_id"] == receipt["admission_id"], "turn events carry admission_id"
    assert set(data["usage"]) >= {"input_tokens", "output_tokens", "cached_tokens", "cost_usd"}
    assert data["usage"]["output_tokens"] == 7, f"usage from the provider: {data['usage']}"

    events = rpc.session_events(sid)
    seqs = [e["seq"] for e in events]
    assert seqs == list(range(1, len(seqs) + 1)), f"seq must go 1, 2, 3 … without gaps: {seqs}"
    types = [e["type"] for e in events if e.get("turn_id") == turn_id and e["type"] != "admission.settled"]
    assert "turn.started" in types, f"no turn.started: {types}"
    first_delta = types.index("message.delta")
    assert types.index("turn.started") < first_delta, f"turn.started after a delta: {types}"
    assert types[-1] == "message.complete", f"message.complete is the turn's last event: {types}"
    started = next(e for e in events if e["type"] == "turn.started")
    assert started["data"]["model"] == "fake-model"
    assert started["data"]["turn_id"] == turn_id
    assert started["data"]["admission_id"] == receipt["admission_id"]
    queued = next(e for e in events if e["type"] == "admission.queued")
    assert queued["data"]["receipt"]["admission_id"] == receipt["admission_id"]
    assert events.index(queued) < events.index(started), "admission.queued before turn.started"
    for event in events:
        datetime.fromisoformat(event["ts"])  # RFC 3339 time on every event
        if event.get("turn_id") == turn_id:
            assert event["admission_id"] == receipt["admission_id"], f"turn event: {event}"
    settled_at = next(i for i, e in enumerate(events) if e["type"] == "admission.settled")
    complete_at = next(i for i, e in enumerate(events) if e["type"] == "message.complete")
    assert settled_at > complete_at, "admission.settled follows message.complete"

    stored = await rpc.call("session.events.since", {"session_id": sid, "since_seq": 0})
    assert stored["events"] == events, "stored events differ from the live ones"
    assert stored["latest_seq"] == seqs[-1]

    rows = await _messages(rpc, sid)
    assert [(r["role"], r["content"]) for r in rows] == [
        ("user", "fox please"),
        ("assistant", ANSWER),
    ], f"transcript rows: {rows}"
    ids = [r["message_id"] for r in rows]
    assert ids == sorted(ids), f"message_ids must sort in transcript order: {ids}"
    assert rows[1]["turn_id"] == turn_id

    final = await get_receipt(rpc, receipt["admission_id"])
    assert final["status"] == "terminal", final
    assert final["outcome"] == "completed", final
    assert final["session_id"] == sid
    session = (await rpc.call("session.get", {"session_id": sid}))["session"]
    assert session["status"] == "idle", session
    assert session["message_count"] == 2, session


async def test_provider_request_shape_and_system_prompt_replayed(
    connect: Connect, fake_provider: FakeOpenAI
) -> None:
    fake_provider.routes["first question"] = Reply(deltas=["first ", "answer"])
    fake_provider.routes["second question"] = Reply(deltas=["second answer"])
    rpc = await connect()
    sid = await create_session(rpc)
    await run_turn(rpc, sid, "first question")
    await run_turn(rpc, sid, "second question")

    first, second = fake_provider.snapshot()
    for req in (first, second):
        assert req.body["stream"] is True
        assert req.body["stream_options"] == {"include_usage": True}
        assert req.body["model"] == "fake-model"
    msgs1, msgs2 = first.body["messages"], second.body["messages"]
    assert msgs1[0]["role"] == "system", f"the system prompt comes first: {msgs1[0]}"
    assert content_text(msgs1[0]).strip(), "the system prompt is not empty"
    assert _wire_view(first)[1:] == [("user", "first question")], _wire_view(first)
    assert msgs2[0] == msgs1[0], "the system prompt must be replayed byte for byte"
    assert _wire_view(second)[1:] == [
        ("user", "first question"),
        ("assistant", "first answer"),
        ("user", "second question"),
    ], f"second request must replay the history: {_wire_view(second)}"


async def test_interrupt_keeps_streamed_text(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI
) -> None:
    release = threading.Event()  # never set: the model hangs until the backend hangs up
    fake_provider.routes["never ends"] = Reply(
        deltas=["partial ", "answer ", "so far", " LOST"], hang_after=3, release=release
    )
    rpc = await connect()
    sid = await create_session(rpc)
    receipt = await submit(rpc, sid, "never ends")
    adm = receipt["admission_id"]

    started = await rpc.wait_event(lambda e: e["type"] == "turn.started" and e["admission_id"] == adm)
    await rpc.wait_until(
        lambda: deltas_text(rpc.events, started["turn_id"]) == "partial answer so far",
        timeout=30,
        what="all three deltas before the hang",
    )

    result = await rpc.call("turn.interrupt", {"session_id": sid})
    assert result == {"interrupted": True}, result
    complete = await wait_complete(rpc, adm, timeout=30)
    assert complete["data"]["status"] == "interrupted", complete["data"]
    assert complete["data"]["text"] == "partial answer so far", "the streamed text is kept"
    await wait_settled(rpc, adm, timeout=30)

    rows = await _messages(rpc, sid)
    assistant = [r for r in rows if r["role"] == "assistant"]
    assert [r["content"] for r in assistant] == ["partial answer so far"], rows
    assert rows[0]["role"] == "user"
    assert rows[0]["content"] == "never ends"
    final = await get_receipt(rpc, adm)
    assert (final["status"], final.get("outcome")) == ("terminal", "interrupted"), final

    [req] = await fake_provider.async_wait_requests(1)
    for _ in range(100):  # the backend must hang up on the model, not leave it streaming
        if req.ended is not None:
            break
        await asyncio.sleep(0.05)
    assert req.ended is not None, "the interrupted model stream is still open"
    assert not release.is_set()

    again = await rpc.call("turn.interrupt", {"session_id": sid})
    assert again == {"interrupted": False}, "nothing runs any more"
    assert backend.alive()


async def test_submit_with_interrupt_intent_stops_the_running_turn(
    connect: Connect, fake_provider: FakeOpenAI
) -> None:
    fake_provider.routes["slow thought"] = Reply(deltas=["thinking ", "hard", " LOST"], hang_after=2)
    fake_provider.routes["change of plan"] = Reply(deltas=["new ", "plan"])
    rpc = await connect()
    sid = await create_session(rpc)
    first = await submit(rpc, sid, "slow thought")
    started = await rpc.wait_event(
        lambda e: e["type"] == "turn.started" and e["admission_id"] == first["admission_id"]
    )
    await rpc.wait_until(
        lambda: deltas_text(rpc.events, started["turn_id"]) == "thinking hard", what="two deltas"
    )
    params = {"session_id": sid, "request_id": "r-int", "text": "change of plan", "intent": "interrupt"}
    second = (await rpc.call("prompt.submit", params))["receipt"]
    stopped = await wait_complete(rpc, first["admission_id"])
    assert stopped["data"]["status"] == "interrupted", stopped["data"]
    assert stopped["data"]["text"] == "thinking hard"
    done = await wait_complete(rpc, second["admission_id"])
    assert done["data"]["status"] == "completed", done["data"]
    assert done["data"]["text"] == "new plan"
    assert stopped["seq"] < done["seq"]
    rows = await _messages(rpc, sid)
    said = [(r["role"], r["content"]) for r in rows if r["role"] in ("user", "assistant")]
    assert said == [
        ("user", "slow thought"),
        ("assistant", "thinking hard"),
        ("user", "change of plan"),
        ("assistant", "new plan"),
    ], rows


async def test_interrupt_before_the_first_delta_completes_with_empty_text(
    connect: Connect, fake_provider: FakeOpenAI
) -> None:
    fake_provider.routes["silent model"] = Reply(deltas=["never sent"], hang_after=0)
    rpc = await connect()
    sid = await create_session(rpc)
    receipt = await submit(rpc, sid, "silent model")
    await fake_provider.async_wait_requests(1)
    assert await rpc.call("turn.interrupt", {"session_id": sid}) == {"interrupted": True}
    complete = await wait_complete(rpc, receipt["admission_id"], timeout=30)
    assert complete["data"]["status"] == "interrupted", complete["data"]
    assert complete["data"]["text"] == "", "nothing was streamed"
    final = await get_receipt(rpc, receipt["admission_id"])
    assert (final["status"], final.get("outcome")) == ("terminal", "interrupted"), final
    rows = await _messages(rpc, sid)
    assert rows[0]["role"] == "user", rows
    assert rows[0]["content"] == "silent model", "accepted input is kept"


DELTA_JOB = "turn.runner:TurnRunner._store_delta.<locals>.job"


def _burst(text: str) -> bytes:
    """A whole streamed answer in one write: the delta, the finish, usage and [DONE]."""
    chunks = [{"choices": [{"index": 0, "delta": {"content": text}}]},
              {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
              {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 1}}]
    lines = [f"data: {json.dumps(c)}\n\n" for c in chunks] + ["data: [DONE]\n\n"]
    return "".join(lines).encode()


async def _delta_commits(rpc: Rpc) -> int:
    """The writer's batches whose slowest job stored a delta: a delta committed on its own."""
    stats = await rpc.call("backend.stats", {"recent": 4096})
    return sum(s["slowest"] == DELTA_JOB for s in stats["writer"]["recent"])


async def test_a_short_answers_delta_is_stored_by_the_closing_commit(
    connect: Connect, fake_provider: FakeOpenAI
) -> None:
    """An answer whose stream ends right after its text: its message.delta is committed with
    message.complete (one commit, not two); a slow stream's deltas still commit as they come."""
    fake_provider.routes["short"] = Reply(raw=_burst("short answer"))
    fake_provider.routes["slow"] = Reply(deltas=["one ", "two ", "three"], delay=0.1)
    rpc = await connect()
    sid = await create_session(rpc)
    for k in range(3):
        _, complete = await run_turn(rpc, sid, f"short {k}")
        assert complete["data"]["text"] == "short answer"
        turn_id = complete["turn_id"]
        assert deltas_text(rpc.events, turn_id) == "short answer", "the delta is still sent"
        types = [e["type"] for e in rpc.session_events(sid) if e.get("turn_id") == turn_id]
        assert types.index("message.delta") < types.index("message.complete")
    assert await _delta_commits(rpc) == 0, "no delta of a short answer took a commit of its own"

    _, complete = await run_turn(rpc, sid, "slow please")
    assert deltas_text(rpc.events, complete["turn_id"]) == "one two three"
    assert await _delta_commits(rpc) >= 1, "deltas that come slowly are stored as they come"
    stored = await rpc.call("session.events.since", {"session_id": sid, "since_seq": 0})
    assert stored["events"] == rpc.session_events(sid), "what was sent is what is stored"
