"""Questions back to the person end to end: the model's `clarify` call waits for an answer
given over the wire, a timeout tells it nobody answered, an interrupt withdraws it, and a
question outlives a kill -9: answered after the restart, the answer runs as a prompt."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.fakes.openai_server import FakeOpenAI, Reply

from .backend_proc import Backend, BackendFactory
from .wire import (
    Connect,
    Json,
    Rpc,
    RpcError,
    create_session,
    is_event,
    submit,
    tool_messages,
    wait_complete,
)


def clarify(question: str, choices: list[str] | None = None, **extra: Any) -> Json:
    """A scripted `clarify` tool call for ``Reply.calls``."""
    args: Json = {"question": question, **extra}
    if choices is not None:
        args["choices"] = choices
    return {"name": "clarify", "arguments": args}


def stored(type_: str, sid: str) -> Callable[[Json], bool]:
    """An event of the session's stored log (it has a seq), not the readers' broadcast."""
    match = is_event(type_)
    return lambda e: match(e) and e.get("session_id") == sid and "seq" in e


def broadcast(type_: str, question_id: str) -> Callable[[Json], bool]:
    return lambda e: (e["type"] == type_ and "seq" not in e
                      and e["data"]["question"]["question_id"] == question_id)


async def asked(rpc: Rpc, sid: str) -> Json:
    question: Json = (await rpc.wait_event(stored("clarify.request", sid)))["data"]["question"]
    return question


async def test_a_question_answered_by_a_choice_goes_back_to_the_model(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI
) -> None:
    fake_provider.script(
        Reply.calls(clarify("Which colour?", ["red", "blue", "green"])),
        Reply(deltas=["Blue it is."]),
    )
    rpc = await connect()
    sid = await create_session(rpc)
    receipt = await submit(rpc, sid, "paint it")
    question = await asked(rpc, sid)
    assert (question["question"], question["choices"], question["status"]) == (
        "Which colour?", ["red", "blue", "green"], "pending")
    assert question["allow_other"] is True
    await rpc.wait_event(broadcast("clarify.request", question["question_id"]))
    session = (await rpc.call("session.get", {"session_id": sid}))["session"]
    assert session["status"] == "waiting_answer", session
    listed = (await rpc.call("clarify.list", {"session_id": sid}))["questions"]
    assert [q["question_id"] for q in listed] == [question["question_id"]]
    resumed = await rpc.call("session.resume", {"session_id": sid})
    assert [q["question_id"] for q in resumed["pending_questions"]] == [question["question_id"]]

    # Refusals first: a reader may not answer; params must say one thing the question takes.
    minted = await rpc.call("token.create", {"scopes": ["read"], "label": "viewer"})
    viewer = await connect(token=minted["token"], name="viewer")
    assert [q["question_id"] for q in (await viewer.call("clarify.list", {}))["questions"]] == [
        question["question_id"]]
    with pytest.raises(RpcError) as forbidden:
        await viewer.call("clarify.respond", {"question_id": question["question_id"], "choice": 1})
    assert forbidden.value.code == -32003
    qid = question["question_id"]
    for params, field in (({}, "choice"), ({"choice": 1, "answer": "blue"}, "answer"),
                          ({"choice": 3}, "choice")):
        with pytest.raises(RpcError) as bad:
            await rpc.call("clarify.respond", {"question_id": qid, **params})
        assert (bad.value.code, bad.value.data.get("field")) == (-32602, field), params
    with pytest.raises(RpcError) as unknown:
        await rpc.call("clarify.respond", {"question_id": "qst_nope", "choice": 0})
    assert (unknown.value.code, unknown.value.data.get("kind")) == (-32004, "question")

    answered = (await rpc.call("clarify.respond", {"question_id": qid, "choice": 1}))["question"]
    assert (answered["status"], answered["answer"], answered["choice"], answered["answered_by"]) \
        == ("answered", "blue", 1, "user")
    assert answered.get("followup_admission_id") is None, "its turn was still waiting"
    again = (await rpc.call("clarify.respond", {"question_id": qid, "choice": 1}))["question"]
    assert again == answered, "the same answer again is a safe retry"
    with pytest.raises(RpcError) as other:
        await rpc.call("clarify.respond", {"question_id": qid, "choice": 0})
    assert other.value.code == -32014

    done = await wait_complete(rpc, receipt["admission_id"])
    assert done["data"]["text"] == "Blue it is."
    resolved = (await rpc.wait_event(stored("clarify.resolved", sid)))["data"]["question"]
    assert (resolved["question_id"], resolved["status"]) == (qid, "answered")
    await rpc.wait_event(broadcast("clarify.resolved", qid))
    [result] = tool_messages(fake_provider.snapshot()[1].body)
    assert result["content"] == "The person answered with choice 2: blue", result
    assert (await rpc.call("clarify.list", {}))["questions"] == []
    session = (await rpc.call("session.get", {"session_id": sid}))["session"]
    assert session["status"] == "idle"


async def test_words_are_taken_only_where_the_question_allows_them(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI
) -> None:
    fake_provider.script(
        Reply.calls(clarify("Deploy now?", ["yes", "no"], allow_other=False)),
        Reply.calls(clarify("What should the file be called?")),
        Reply(deltas=["done"]),
    )
    rpc = await connect()
    sid = await create_session(rpc)
    receipt = await submit(rpc, sid, "go")
    first = await asked(rpc, sid)
    assert first["allow_other"] is False
    with pytest.raises(RpcError) as words:
        await rpc.call("clarify.respond", {"question_id": first["question_id"], "answer": "later"})
    assert (words.value.code, words.value.data.get("field")) == (-32602, "answer")
    await rpc.call("clarify.respond", {"question_id": first["question_id"], "choice": 0})
    second = await rpc.wait_event(lambda e: stored("clarify.request", sid)(e)
                                  and e["data"]["question"]["question_id"] != first["question_id"])
    question = second["data"]["question"]
    assert question["choices"] == []
    assert question["allow_other"] is True
    with pytest.raises(RpcError) as no_choices:
        await rpc.call("clarify.respond", {"question_id": question["question_id"], "choice": 0})
    assert (no_choices.value.code, no_choices.value.data.get("field")) == (-32602, "choice")
    await rpc.call("clarify.respond", {"question_id": question["question_id"],
                                       "answer": "notes.md"})
    await wait_complete(rpc, receipt["admission_id"])
    [_, result] = tool_messages(fake_provider.snapshot()[2].body)
    assert result["content"] == "The person answered: notes.md"


async def test_nobody_answering_tells_the_model_so_and_expires_the_question(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI
) -> None:
    backend = backend_factory(fake_provider.base_url, "[clarify]\ntimeout_s = 1\n")
    fake_provider.script(Reply.calls(clarify("Which branch?", ["main", "dev"])),
                         Reply(deltas=["Went with main."]))
    rpc = await Rpc.open(backend.port, backend.token)
    try:
        sid = await create_session(rpc)
        receipt = await submit(rpc, sid, "merge")
        question = await asked(rpc, sid)
        done = await wait_complete(rpc, receipt["admission_id"])
        assert done["data"]["status"] == "completed"
        [result] = tool_messages(fake_provider.snapshot()[1].body)
        assert result["content"].startswith("Nobody answered within 1 s"), result
        resolved = (await rpc.wait_event(stored("clarify.resolved", sid)))["data"]["question"]
        assert (resolved["question_id"], resolved["status"], resolved["answered_by"]) == (
            question["question_id"], "expired", "timeout")
        with pytest.raises(RpcError) as late:
            await rpc.call("clarify.respond", {"question_id": question["question_id"],
                                               "choice": 0})
        assert late.value.code == -32014
    finally:
        await rpc.close()


async def test_an_interrupt_while_a_question_waits_withdraws_it(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI
) -> None:
    fake_provider.script(Reply.calls(clarify("Keep going?")), Reply(deltas=["unused"]))
    rpc = await connect()
    sid = await create_session(rpc)
    receipt = await submit(rpc, sid, "work")
    question = await asked(rpc, sid)
    assert (await rpc.call("turn.interrupt", {"session_id": sid}))["interrupted"] is True
    done = await wait_complete(rpc, receipt["admission_id"])
    assert done["data"]["status"] == "interrupted"
    resolved = (await rpc.wait_event(stored("clarify.resolved", sid)))["data"]["question"]
    assert (resolved["question_id"], resolved["status"], resolved["answered_by"]) == (
        question["question_id"], "cancelled", "stopped")
    assert (await rpc.call("clarify.list", {}))["questions"] == []
    with pytest.raises(RpcError) as late:
        await rpc.call("clarify.respond", {"question_id": question["question_id"], "answer": "y"})
    assert late.value.code == -32014
    assert len(fake_provider.snapshot()) == 1


async def test_a_question_outlives_kill9_and_its_answer_runs_as_a_prompt(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI
) -> None:
    fake_provider.script(Reply.calls(clarify("Which database?", ["sqlite", "postgres"])))
    rpc = await connect(name="before")
    sid = await create_session(rpc)
    receipt = await submit(rpc, sid, "set up storage")
    question = await asked(rpc, sid)
    qid = question["question_id"]
    backend.kill9()
    await rpc.wait_closed()
    backend.start()

    rpc = await connect(name="after")
    listed = (await rpc.call("clarify.list", {}))["questions"]
    assert [(q["question_id"], q["status"]) for q in listed] == [(qid, "pending")]
    resumed = await rpc.call("session.resume", {"session_id": sid})
    assert [q["question_id"] for q in resumed["pending_questions"]] == [qid]
    turn = (await rpc.call("admission.get", {"admission_id": receipt["admission_id"]}))["receipt"]
    assert turn["status"] == "unknown"

    fake_provider.script(Reply(deltas=["Postgres, then."]))
    answered = (await rpc.call("clarify.respond", {"question_id": qid, "choice": 1}))["question"]
    followup = answered["followup_admission_id"]
    assert followup
    assert answered["status"] == "answered"
    done = await wait_complete(rpc, followup)
    assert done["data"]["text"] == "Postgres, then."
    request = fake_provider.snapshot()[-1]
    assert "Which database?" in request.last_user_text
    assert "The person answered: «postgres»" in request.last_user_text
    again = (await rpc.call("clarify.respond", {"question_id": qid, "choice": 1}))["question"]
    assert again["followup_admission_id"] == followup, "answered again: admitted once"
    queue = await rpc.call("admission.list", {"session_id": sid})
    assert [r["admission_id"] for r in queue["receipts"]].count(followup) == 1
    assert len(fake_provider.snapshot()) == 2
    old = (await rpc.call("admission.get", {"admission_id": receipt["admission_id"]}))["receipt"]
    assert old["status"] == "terminal", "the follow-up settled the unknown turn"
