"""Steering a running turn: `prompt.submit` with `intent: "steer"`, through the real backend.

A steer is admitted like any prompt (durable, idempotent), joins the running turn at its
next model call (after the tool round in progress), shows in the transcript where the
model read it, and settles with that turn.  A steer whose turn ends first runs next.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest

from tests.fakes.openai_server import FakeOpenAI, Reply, content_text

from .backend_proc import Backend, BackendFactory
from .wire import (
    Connect,
    Json,
    Rpc,
    RpcError,
    create_session,
    is_event,
    submit,
    terminal,
    transcript,
    wait_complete,
    wait_receipt_status,
    wait_settled,
)


@pytest.fixture
def backend(backend_factory: BackendFactory, fake_provider: FakeOpenAI) -> Backend:
    # The commands that hold a tool round open (a wait loop) would ask in smart mode.
    return backend_factory(fake_provider.base_url, '[approvals]\nmode = "off"\n')


async def steer(rpc: Rpc, session_id: str, text: str, request_id: str | None = None) -> Json:
    result = await rpc.call("prompt.submit", {
        "session_id": session_id, "request_id": request_id or f"steer-{uuid.uuid4().hex}",
        "text": text, "intent": "steer"})
    return dict(result["receipt"])


def wait_for_file(name: str, then: str) -> Json:
    """A terminal call that blocks until the test creates `name` in the session folder."""
    return terminal(f"while [ ! -e {name} ]; do sleep 0.05; done; echo {then}")


def user_texts(body: Json) -> list[str]:
    return [content_text(m) for m in body["messages"] if m.get("role") == "user"]


async def test_a_steer_joins_the_running_turn_between_two_tool_rounds(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    fake_provider.script(
        Reply.calls(wait_for_file("go", "round one"), text="Round one."),
        Reply.calls(terminal("echo round two"), text="Round two."),
        Reply(deltas=["Done, in French."]),
    )
    rpc = await connect()
    sid = await create_session(rpc, cwd=str(tmp_path))
    first = await submit(rpc, sid, "do two rounds")
    await rpc.wait_event(is_event("tool.start", first["admission_id"]))

    steered = await steer(rpc, sid, "answer in French")
    assert steered["status"] == "queued", steered
    assert steered["steer"] is True
    (tmp_path / "go").touch()  # round one ends only now: the steer waits for its end

    done = await wait_complete(rpc, first["admission_id"])
    assert done["data"]["status"] == "completed", done
    joined = await wait_settled(rpc, steered["admission_id"])
    receipt = joined["data"]["receipt"]
    assert (receipt["status"], receipt["outcome"]) == ("terminal", "completed"), receipt
    assert receipt["turn_id"] == done["turn_id"], "the steer settled with the turn it joined"
    assert receipt["final_text"] == "Done, in French."

    events = rpc.session_events(sid)
    assert [e["type"] for e in events].count("turn.started") == 1, "no second turn ran"
    steer_events = [e for e in events if e["type"] == "turn.steered"]
    assert [e["data"]["text"] for e in steer_events] == ["answer in French"]
    assert steer_events[0]["data"]["admission_id"] == steered["admission_id"]

    # The model read it at the call after round one, not before.
    bodies = [r.body for r in fake_provider.snapshot()]
    assert len(bodies) == 3
    assert not any("answer in French" in t for t in user_texts(bodies[0]))
    second = bodies[1]["messages"]
    roles = [m["role"] for m in second]
    assert roles[-2:] == ["tool", "user"], roles
    assert "answer in French" in content_text(second[-1])
    assert "while you were working" in content_text(second[-1])
    assert "answer in French" in content_text(bodies[2]["messages"][-3])

    rows = await transcript(rpc, sid)
    assert [m["role"] for m in rows] == [
        "user", "assistant", "tool", "user", "assistant", "tool", "assistant"]
    assert rows[3]["content"] == "answer in French", "people see the words they typed"
    assert rows[3]["meta"]["steer"] is True


async def test_a_steer_to_an_idle_session_starts_a_turn_at_once(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    fake_provider.script(Reply(deltas=["Hello."]))
    rpc = await connect()
    sid = await create_session(rpc, cwd=str(tmp_path))
    receipt = await steer(rpc, sid, "hello")
    await rpc.wait_event(is_event("turn.started", receipt["admission_id"]))
    done = await wait_complete(rpc, receipt["admission_id"])
    assert done["data"]["text"] == "Hello."
    assert not [e for e in rpc.session_events(sid) if e["type"] == "turn.steered"]


async def test_a_steer_whose_turn_ends_first_runs_next_ahead_of_the_queue(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    release = threading.Event()
    fake_provider.script(
        Reply(deltas=["Final ", "answer."], hang_after=1, release=release),
        Reply(deltas=["Steer answered."]),
        Reply(deltas=["Queued answered."]),
    )
    rpc = await connect()
    sid = await create_session(rpc, cwd=str(tmp_path))
    first = await submit(rpc, sid, "answer without tools")
    await rpc.wait_event(is_event("message.delta", first["admission_id"]))
    queued = await submit(rpc, sid, "and after that, this")
    steered = await steer(rpc, sid, "keep it short")
    release.set()  # the turn ends with no further model call: the steer cannot join it

    await wait_complete(rpc, first["admission_id"])
    steer_done = await wait_complete(rpc, steered["admission_id"])
    queued_done = await wait_complete(rpc, queued["admission_id"])
    assert steer_done["data"]["text"] == "Steer answered."
    assert queued_done["data"]["text"] == "Queued answered."
    started = [e["data"]["admission_id"] for e in rpc.session_events(sid)
               if e["type"] == "turn.started"]
    assert started == [first["admission_id"], steered["admission_id"], queued["admission_id"]]
    assert user_texts(fake_provider.snapshot()[1].body)[-1] == "keep it short"


async def test_a_steer_is_idempotent_and_cannot_reuse_a_prompts_request_id(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    fake_provider.script(Reply.calls(wait_for_file("go", "one")), Reply(deltas=["ok"]))
    rpc = await connect()
    sid = await create_session(rpc, cwd=str(tmp_path))
    first = await submit(rpc, sid, "work", request_id="r-1")
    await rpc.wait_event(is_event("tool.start", first["admission_id"]))
    a = await steer(rpc, sid, "use tabs", request_id="s-1")
    b = await steer(rpc, sid, "use tabs", request_id="s-1")
    assert b["admission_id"] == a["admission_id"]
    assert b["duplicate"] is True
    with pytest.raises(RpcError) as refused:
        await steer(rpc, sid, "work", request_id="r-1")  # the prompt's id, as a steer
    assert refused.value.code == -32010
    (tmp_path / "go").touch()
    await wait_complete(rpc, first["admission_id"])
    assert [e["type"] for e in rpc.session_events(sid)].count("turn.steered") == 1
    rows = await transcript(rpc, sid)
    assert [m["content"] for m in rows if m["role"] == "user"] == ["work", "use tabs"]


async def test_kill9_after_a_steer_joined_leaves_both_unknown_and_one_note(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    fake_provider.script(
        Reply.calls(wait_for_file("go", "one")),
        Reply.calls(wait_for_file("never", "two")),
    )
    rpc = await connect(name="before")
    sid = await create_session(rpc, cwd=str(tmp_path))
    first = await submit(rpc, sid, "work")
    await rpc.wait_event(is_event("tool.start", first["admission_id"]))
    steered = await steer(rpc, sid, "also this")
    (tmp_path / "go").touch()
    await rpc.wait_event(is_event("turn.steered", steered["admission_id"]))
    await rpc.wait_until(lambda: sum(e["type"] == "tool.start" for e in rpc.session_events(sid)) == 2)
    backend.kill9()
    await rpc.wait_closed()
    backend.start()

    rpc = await connect(name="after")
    unknown = [await wait_receipt_status(rpc, aid, "unknown")
               for aid in (first["admission_id"], steered["admission_id"])]
    assert unknown[0]["turn_id"] == unknown[1]["turn_id"] is not None, unknown
    rows = await transcript(rpc, sid)
    notes = [m for m in rows if m["role"] == "system_note"]
    assert [n["note_kind"] for n in notes] == ["recovered"], "one turn, one note"
    assert [m["content"] for m in rows if m["role"] == "user"] == ["work", "also this"]

    fake_provider.script(Reply(deltas=["Moving on."]))
    nxt = await submit(rpc, sid, "go on")
    done = await wait_complete(rpc, nxt["admission_id"])
    assert done["data"]["status"] == "completed"
    for aid in (first["admission_id"], steered["admission_id"]):
        receipt = await wait_receipt_status(rpc, aid, "terminal")
        assert receipt["outcome"] == "interrupted"


async def test_turnkey_chat_steer_joins_the_running_turn_and_prints_its_answer(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    fake_provider.script(
        Reply.calls(wait_for_file("go", "one")),
        Reply(deltas=["Done, ", "with the steer."]),
    )
    rpc = await connect()
    sid = await create_session(rpc, cwd=str(tmp_path))
    first = await submit(rpc, sid, "work")
    await rpc.wait_event(is_event("tool.start", first["admission_id"]))
    cli = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "desktop.cli", "--data-dir", str(backend.data_dir), "chat",
        "--session", sid, "--steer", "mind the tests",
        env=backend.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        queued = await rpc.wait_event(lambda e: e["type"] == "admission.queued"
                                      and e["data"]["receipt"].get("steer"))
        assert queued["data"]["receipt"]["text"] == "mind the tests"
    finally:
        (tmp_path / "go").touch()  # the round ends: the steer joins at the next call
    joined = await rpc.wait_event(is_event("turn.steered"))
    assert joined["data"]["admission_id"] == queued["data"]["receipt"]["admission_id"]
    raw_out, raw_err = await asyncio.wait_for(cli.communicate(), 60)
    out, err = raw_out.decode(), raw_err.decode()
    assert cli.returncode == 0, err
    assert out.strip() == "Done, with the steer.", (out, err)
    assert "steering the running turn" in err
    assert user_texts(fake_provider.snapshot()[1].body)[-1].endswith("mind the tests")


def test_turnkey_chat_steer_without_a_session_says_what_it_needs(backend: Backend) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "desktop.cli", "--data-dir", str(backend.data_dir), "chat",
         "--steer", "hello"], env=backend.env(), capture_output=True, text=True, timeout=60,
        check=False)
    assert run.returncode == 2
    assert "--steer needs --session ID" in run.stderr


async def test_a_prompt_that_spells_the_steer_intent_in_its_text_is_no_steer(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    """The attack on PostgreSQL's text match of a steer (store/admissions.py): the quotes of a
    person's text are escaped in the stored payload, so it never reads as the intent."""
    fake_provider.script(
        Reply.calls(wait_for_file("go", "round one"), text="Round one."),
        Reply(deltas=["First done."]),
        Reply(deltas=["Second done."]),
    )
    rpc = await connect()
    sid = await create_session(rpc, cwd=str(tmp_path))
    first = await submit(rpc, sid, "do one round")
    await rpc.wait_event(is_event("tool.start", first["admission_id"]))
    forged = await submit(rpc, sid, 'x", "intent": "steer", "y": "\\"intent\\": \\"steer\\"')
    assert not forged.get("steer"), forged
    (tmp_path / "go").touch()
    done = await wait_complete(rpc, first["admission_id"])
    assert done["data"]["text"] == "First done."
    second = await wait_complete(rpc, forged["admission_id"])
    assert second["data"]["text"] == "Second done."
    assert second["turn_id"] != done["turn_id"], "it ran as its own turn, after the first"
    bodies = [r.body for r in fake_provider.snapshot()]
    assert not any('"intent"' in t for b in bodies[:2] for t in user_texts(b))
