"""A prompt's answers: `session.regenerate` answers the last prompt again in place, and
`session.choose` picks which answer is shown and read by the model, through the real backend.

The regeneration is admitted like a prompt (durable, idempotent, queued behind a running
turn) and stores no second user row; the old answer stays as a sibling out of the model's
view.  What the model reads is checked in the requests the fake provider received.
"""

from __future__ import annotations

import asyncio
import threading
import uuid

import pytest

from tests.fakes.openai_server import FakeOpenAI, Recorded, Reply, content_text

from .backend_proc import Backend
from .wire import (
    Connect,
    Json,
    Rpc,
    RpcError,
    create_session,
    get_receipt,
    is_event,
    run_turn,
    submit,
    transcript,
    wait_complete,
    wait_settled,
)

QUIET_S = 1.0


async def regenerate(rpc: Rpc, session_id: str, request_id: str | None = None,
                     message_id: str | None = None) -> Json:
    params: Json = {"session_id": session_id, "request_id": request_id or f"regen-{uuid.uuid4().hex}"}
    if message_id is not None:
        params["message_id"] = message_id
    return dict((await rpc.call("session.regenerate", params))["receipt"])


def said(request: Recorded) -> list[tuple[str, str]]:
    """The (role, text) of the user and assistant messages a model request carried."""
    return [(m["role"], content_text(m)) for m in request.body["messages"]
            if m.get("role") in ("user", "assistant")]


def rows(messages: list[Json], role: str) -> list[Json]:
    return [m for m in messages if m["role"] == role]


async def test_regenerate_answers_again_in_place_and_the_model_reads_the_shown_answer(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI
) -> None:
    fake_provider.script(Reply(deltas=["First answer."]), Reply(deltas=["Second answer."]),
                         Reply(deltas=["On the second."]), Reply(deltas=["On the first."]))
    rpc = await connect()
    sid = await create_session(rpc)
    first, done = await run_turn(rpc, sid, "tell me a joke")
    prompt = rows(await transcript(rpc, sid), "user")[0]

    again = await regenerate(rpc, sid)
    assert again["regenerates"] == prompt["message_id"], again
    assert again["text"] == "tell me a joke"
    complete = await wait_complete(rpc, again["admission_id"])
    assert complete["data"] == {**complete["data"], "status": "completed", "text": "Second answer."}
    started = await rpc.wait_event(is_event("turn.started", again["admission_id"]))
    assert started["data"]["regenerates"] == prompt["message_id"]
    chosen = await rpc.wait_event(lambda e: e["type"] == "answer.chosen")
    assert chosen["data"] == {"message_id": prompt["message_id"], "turn_id": started["turn_id"]}
    assert chosen["turn_id"] == started["turn_id"]
    assert chosen["seq"] > started["seq"]

    # The regeneration's request: the prompt once, the old answer not at all.
    asked = fake_provider.requests[1]
    assert said(asked) == [("user", "tell me a joke")], said(asked)
    messages = await transcript(rpc, sid)
    assert [m["content"] for m in rows(messages, "user")] == ["tell me a joke"], "no second prompt"
    old, new = rows(messages, "assistant")
    assert (old["content"], old["active"], old["turn_id"]) == ("First answer.", False, done["turn_id"])
    assert (new["content"], new["turn_id"]) == ("Second answer.", started["turn_id"])
    assert "active" not in new, "an active row leaves the field out (its default)"

    # The next turn reads the answer shown.
    await run_turn(rpc, sid, "and another")
    assert said(fake_provider.requests[2]) == [
        ("user", "tell me a joke"), ("assistant", "Second answer."), ("user", "and another")]

    # Choosing the first answer puts it back in the model's view, the second out.
    result = await rpc.call("session.choose", {"session_id": sid, "turn_id": done["turn_id"]})
    assert result == {"message_id": prompt["message_id"], "turn_id": done["turn_id"],
                      "turn_ids": [done["turn_id"], started["turn_id"]]}
    await rpc.wait_event(lambda e: e["type"] == "answer.chosen"
                         and e["data"]["turn_id"] == done["turn_id"])
    await run_turn(rpc, sid, "and a third")
    assert said(fake_provider.requests[3])[:2] == [
        ("user", "tell me a joke"), ("assistant", "First answer.")]
    assert ("assistant", "Second answer.") not in said(fake_provider.requests[3])
    messages = await transcript(rpc, sid)
    flags = {m["content"]: m.get("active", True) for m in rows(messages, "assistant")}
    assert flags == {"First answer.": True, "Second answer.": False, "On the second.": True,
                     "On the first.": True}
    assert first["admission_id"] != again["admission_id"]


async def test_regenerate_is_idempotent_by_request_id_and_refuses_what_it_cannot_do(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI
) -> None:
    rpc = await connect()
    sid = await create_session(rpc)
    with pytest.raises(RpcError) as nothing:
        await regenerate(rpc, sid)
    assert (nothing.value.code, nothing.value.data.get("field")) == (-32602, "session_id")
    await run_turn(rpc, sid, "one")
    await run_turn(rpc, sid, "two")
    prompts = rows(await transcript(rpc, sid), "user")

    again = await regenerate(rpc, sid, request_id="regen-1")
    await wait_settled(rpc, again["admission_id"])
    twice = await regenerate(rpc, sid, request_id="regen-1")
    assert (twice["admission_id"], twice["duplicate"]) == (again["admission_id"], True)
    with pytest.raises(RpcError) as other:
        await submit(rpc, sid, "two", request_id="regen-1")
    assert other.value.code == -32010, "a request_id is a regeneration or a prompt, not both"
    with pytest.raises(RpcError) as earlier:
        await regenerate(rpc, sid, message_id=prompts[0]["message_id"])
    assert (earlier.value.code, earlier.value.data.get("field")) == (-32602, "message_id")
    with pytest.raises(RpcError) as unknown:
        await regenerate(rpc, "ses_nope")
    assert unknown.value.code == -32004
    await asyncio.sleep(QUIET_S)
    assert len(fake_provider.snapshot()) == 3, "a duplicate runs nothing"


async def test_a_regeneration_waits_behind_a_running_turn_and_one_outdated_is_rejected(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI
) -> None:
    release = threading.Event()
    fake_provider.routes["slow"] = Reply(deltas=["Slow ", "answer."], hang_after=1, release=release)
    rpc = await connect()
    sid = await create_session(rpc)
    running = await submit(rpc, sid, "slow one")
    started = await rpc.wait_event(is_event("turn.started", running["admission_id"]))
    await rpc.wait_event(is_event("message.delta", running["admission_id"]))
    again = await regenerate(rpc, sid)
    assert again["status"] == "queued", "behind the running turn"
    with pytest.raises(RpcError) as busy:
        await rpc.call("session.choose", {"session_id": sid, "turn_id": started["turn_id"]})
    assert busy.value.code == -32009, "the model is reading the transcript"
    release.set()
    fake_provider.routes.clear()
    await wait_complete(rpc, running["admission_id"])
    done = await wait_complete(rpc, again["admission_id"])
    assert done["data"]["status"] == "completed"
    messages = await transcript(rpc, sid)
    assert len(rows(messages, "user")) == 1
    assert [m.get("active", True) for m in rows(messages, "assistant")] == [False, True]

    # Regenerating the last answer while a newer prompt waits: that prompt is answered first,
    # so the regeneration no longer answers the last prompt and does not run.
    release2 = threading.Event()
    fake_provider.routes["hold"] = Reply(deltas=["Held."], hang_after=0, release=release2)
    held = await submit(rpc, sid, "hold on")
    await fake_provider.async_wait_requests(3)
    newer = await submit(rpc, sid, "newer prompt")
    late = await regenerate(rpc, sid)
    assert late["regenerates"] == rows(await transcript(rpc, sid), "user")[-1]["message_id"]
    release2.set()
    fake_provider.routes.clear()
    await wait_complete(rpc, held["admission_id"])
    await wait_complete(rpc, newer["admission_id"])
    settled = (await wait_settled(rpc, late["admission_id"]))["data"]["receipt"]
    assert (settled["status"], settled["outcome"]) == ("terminal", "rejected"), settled
    assert "only the last answer" in settled["failure_reason"]
    assert "turn_id" not in settled, "it never started a turn"
    await asyncio.sleep(QUIET_S)
    assert len(fake_provider.snapshot()) == 4
    assert (await get_receipt(rpc, late["admission_id"]))["outcome"] == "rejected"


async def test_kill9_mid_regeneration_leaves_one_prompt_and_both_answers(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI
) -> None:
    fake_provider.script(Reply(deltas=["First answer."]),
                         Reply(deltas=["Half of the ", "second", " never ends"], hang_after=2))
    rpc = await connect(name="before-crash")
    sid = await create_session(rpc)
    _, done = await run_turn(rpc, sid, "explain it")
    again = await regenerate(rpc, sid, request_id="regen-crash")
    await rpc.wait_event(is_event("message.delta", again["admission_id"]))
    await rpc.wait_until(lambda: "second" in "".join(
        e["data"]["text"] for e in rpc.events
        if e["type"] == "message.delta" and e.get("admission_id") == again["admission_id"]))
    backend.kill9()
    await rpc.wait_closed()
    backend.start()

    rpc = await connect(name="after-restart")
    receipt = await get_receipt(rpc, again["admission_id"])
    assert receipt["status"] == "unknown", receipt
    messages = await transcript(rpc, sid)
    assert [m["content"] for m in rows(messages, "user")] == ["explain it"], "nothing doubled"
    old, new = rows(messages, "assistant")
    assert (old["content"], old["active"]) == ("First answer.", False)
    assert (new["content"], new["status"], new.get("active", True)) == (
        "Half of the second", "unknown", True), "what was streamed, kept, nothing invented"
    notes = [m for m in messages if m["role"] == "system_note"]
    assert [(n["note_kind"], n["turn_id"]) for n in notes] == [("recovered", new["turn_id"])]
    # The same request again is the same admission: it runs nothing.
    dup = await regenerate(rpc, sid, request_id="regen-crash")
    assert (dup["admission_id"], dup["duplicate"]) == (again["admission_id"], True)
    await asyncio.sleep(QUIET_S)
    assert len(fake_provider.snapshot()) == 2, "an unknown regeneration is never re-run"

    # The person picks the first answer back; the next turn reads it and not the broken one.
    await rpc.call("session.choose", {"session_id": sid, "turn_id": done["turn_id"]})
    fake_provider.script(Reply(deltas=["Go on."]))
    await run_turn(rpc, sid, "go on")
    asked = said(fake_provider.requests[2])
    assert asked == [("user", "explain it"), ("assistant", "First answer."), ("user", "go on")]
    assert (await get_receipt(rpc, again["admission_id"]))["outcome"] == "interrupted"


async def test_choose_refuses_what_is_not_an_answer(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI
) -> None:
    rpc = await connect()
    sid = await create_session(rpc)
    with pytest.raises(RpcError) as none:
        await rpc.call("session.choose", {"session_id": sid, "turn_id": "turn_nope"})
    assert (none.value.code, none.value.data.get("field")) == (-32602, "turn_id")
    with pytest.raises(RpcError) as missing:
        await rpc.call("session.choose", {"session_id": "ses_nope", "turn_id": "turn_nope"})
    assert missing.value.code == -32004
    _, done = await run_turn(rpc, sid, "only one answer")
    same = await rpc.call("session.choose", {"session_id": sid, "turn_id": done["turn_id"]})
    assert same["turn_ids"] == [done["turn_id"]]
    await asyncio.sleep(0.2)
    assert not [e for e in rpc.events if e["type"] == "answer.chosen"], "nothing changed"
