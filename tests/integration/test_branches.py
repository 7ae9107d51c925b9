"""Branches: `session.fork` starts a new session at one of a session's prompts, with the
history before it and the edited prompt as its first turn, through the real backend."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from tests.fakes.openai_server import FakeOpenAI, Recorded, Reply, content_text

from .backend_proc import Backend, BackendFactory
from .wire import (
    Connect,
    Json,
    Rpc,
    RpcError,
    create_session,
    is_event,
    run_turn,
    transcript,
    wait_complete,
)

QUIET_S = 1.0


@pytest.fixture
def backend(backend_factory: BackendFactory, fake_provider: FakeOpenAI) -> Backend:
    # The file-writing turns write in the session folder without asking.
    return backend_factory(fake_provider.base_url, '[approvals]\nmode = "off"\n')


async def fork(rpc: Rpc, session_id: str, message_id: str, text: str | None = None,
               request_id: str | None = None, **more: object) -> Json:
    params: Json = {"session_id": session_id, "message_id": message_id,
                    "request_id": request_id or f"fork-{uuid.uuid4().hex}", **more}
    if text is not None:
        params["text"] = text
    return await rpc.call("session.fork", params)


def said(request: Recorded) -> list[tuple[str, str]]:
    return [(m["role"], content_text(m)) for m in request.body["messages"]
            if m.get("role") in ("user", "assistant")]


def prompts(messages: list[Json]) -> list[Json]:
    return [m for m in messages if m["role"] == "user"]


async def test_fork_copies_the_history_before_the_prompt_and_runs_the_edited_one(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI
) -> None:
    fake_provider.script(Reply(deltas=["Answer one."]), Reply(deltas=["Answer two."]),
                         Reply(deltas=["Answer three."]), Reply(deltas=["Edited answer."]))
    rpc = await connect()
    watcher = await connect(name="watcher")  # another window, following the original only
    sid = await create_session(rpc, title="Plans")
    await watcher.call("session.subscribe", {"session_id": sid})
    for text in ("one", "two", "three"):
        await run_turn(rpc, sid, text)
    before = await transcript(rpc, sid)
    two = prompts(before)[1]

    result = await fork(rpc, sid, two["message_id"], "two, edited", request_id="fork-1")
    branch = result["session"]
    bid = branch["session_id"]
    assert bid != sid
    assert branch["forked_from"] == sid
    assert branch["forked_at"] == two["message_id"]
    assert branch["title"] == "Branch · Plans"
    receipt = result["receipt"]
    assert receipt["session_id"] == bid
    assert receipt["text"] == "two, edited"
    done = await wait_complete(rpc, receipt["admission_id"])  # the caller follows the branch
    assert done["session_id"] == bid
    assert done["data"]["text"] == "Edited answer."

    # The branch's model read the history before the prompt, then the edited prompt.
    assert said(fake_provider.requests[3]) == [
        ("user", "one"), ("assistant", "Answer one."), ("user", "two, edited")]
    copied = await transcript(rpc, bid)
    assert [(m["role"], m["content"]) for m in copied] == [
        ("user", "one"), ("assistant", "Answer one."), ("user", "two, edited"),
        ("assistant", "Edited answer.")]
    assert not {m["message_id"] for m in copied[:2]} & {m["message_id"] for m in before}
    assert [m["turn_id"] for m in copied[:2]] == [m["turn_id"] for m in before[:2]]

    # The original is as it was, and its prompt names the branch; its windows heard of it.
    after = await transcript(rpc, sid)
    assert [(m["role"], m["content"]) for m in after] == [
        (m["role"], m["content"]) for m in before]
    assert prompts(after)[1]["branches"] == [bid]
    assert "branches" not in prompts(after)[0]
    forked = await watcher.wait_event(lambda e: e["type"] == "session.forked")
    assert forked["session_id"] == sid
    assert "seq" in forked
    assert forked["data"]["message_id"] == two["message_id"]
    assert forked["data"]["branch"]["session_id"] == bid
    created = await watcher.wait_event(lambda e: e["type"] == "session.created"
                                       and e["session_id"] == bid)
    assert created["data"]["session"]["forked_from"] == sid
    assert not [e for e in watcher.events if e["session_id"] == bid and "seq" in e], (
        "the watcher does not follow the branch")
    listed = await rpc.call("session.get", {"session_id": bid})
    assert listed["session"]["forked_at"] == two["message_id"]


async def test_fork_is_idempotent_by_request_id_and_checks_its_params(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI
) -> None:
    rpc = await connect()
    sid = await create_session(rpc)
    await run_turn(rpc, sid, "first")
    await run_turn(rpc, sid, "second")
    messages = await transcript(rpc, sid)
    second = prompts(messages)[1]

    made = await fork(rpc, sid, second["message_id"], "second, again", request_id="fork-x")
    await wait_complete(rpc, made["receipt"]["admission_id"])
    again = await fork(rpc, sid, second["message_id"], "second, again", request_id="fork-x")
    assert again["duplicate"] is True
    assert again["session"]["session_id"] == made["session"]["session_id"]
    assert again["receipt"]["admission_id"] == made["receipt"]["admission_id"]
    with pytest.raises(RpcError) as conflict:
        await fork(rpc, sid, second["message_id"], "something else", request_id="fork-x")
    assert conflict.value.code == -32010
    await asyncio.sleep(QUIET_S)
    assert len(fake_provider.snapshot()) == 3, "a duplicate runs nothing"

    answer = next(m for m in messages if m["role"] == "assistant")
    with pytest.raises(RpcError) as not_prompt:
        await fork(rpc, sid, answer["message_id"], "x")
    assert (not_prompt.value.code, not_prompt.value.data.get("field")) == (-32602, "message_id")
    with pytest.raises(RpcError) as bad_id:
        await fork(rpc, sid, "not-an-id", "x")
    assert bad_id.value.data.get("field") == "message_id"
    with pytest.raises(RpcError) as empty:
        await fork(rpc, sid, second["message_id"], "  ")
    assert empty.value.data.get("field") == "text"
    with pytest.raises(RpcError) as unknown:
        await fork(rpc, "ses_nope", second["message_id"], "x")
    assert unknown.value.code == -32004

    # Without text: the history alone, nothing admitted.
    bare = await fork(rpc, sid, prompts(messages)[0]["message_id"])
    assert "receipt" not in bare
    assert await transcript(rpc, bare["session"]["session_id"]) == []
    listing = await rpc.call("session.list", {})
    assert {s["session_id"] for s in listing["sessions"]} >= {
        sid, made["session"]["session_id"], bare["session"]["session_id"]}


async def test_fork_restores_the_files_only_when_asked(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("original\n")

    def write(content: str) -> Reply:
        return Reply.calls({"name": "write_file", "arguments": {"path": "notes.txt", "content": content}})

    fake_provider.script(write("first\n"), Reply(deltas=["Wrote first."]),
                         write("second\n"), Reply(deltas=["Wrote second."]))
    rpc = await connect()
    sid = await create_session(rpc, cwd=str(tmp_path))
    await run_turn(rpc, sid, "write it once")
    await run_turn(rpc, sid, "write it again")
    assert notes.read_text() == "second\n"
    second = prompts(await transcript(rpc, sid))[1]

    kept = await fork(rpc, sid, second["message_id"])
    assert kept.get("restored", []) == []
    assert notes.read_text() == "second\n", "files are not rewound unless asked"

    rewound = await fork(rpc, sid, second["message_id"], restore_files=True)
    assert rewound["restored"] == [str(notes)]
    assert notes.read_text() == "first\n", "as it was when that prompt was sent"
    restored = await rpc.wait_event(is_event("files.restored"))
    assert restored["session_id"] == sid
    cards = [m for m in await transcript(rpc, sid) if m["role"] == "tool"]
    assert [bool((m.get("meta") or {}).get("undone")) for m in cards] == [False, True]


async def test_kill9_mid_the_branchs_first_turn_keeps_one_branch_and_one_prompt(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI
) -> None:
    fake_provider.script(Reply(deltas=["Answer one."]), Reply(deltas=["Answer two."]),
                         Reply(deltas=["Streamed ", "in part", " and lost"], hang_after=2))
    rpc = await connect(name="before-crash")
    sid = await create_session(rpc)
    await run_turn(rpc, sid, "one")
    await run_turn(rpc, sid, "two")
    before = await transcript(rpc, sid)
    made = await fork(rpc, sid, prompts(before)[1]["message_id"], "two, edited",
                      request_id="fork-crash")
    bid, aid = made["session"]["session_id"], made["receipt"]["admission_id"]
    await rpc.wait_until(lambda: "in part" in "".join(
        e["data"]["text"] for e in rpc.events
        if e["type"] == "message.delta" and e.get("admission_id") == aid))
    backend.kill9()
    await rpc.wait_closed()
    backend.start()

    rpc = await connect(name="after-restart")
    branch = await transcript(rpc, bid)
    assert [(m["role"], m["content"], m.get("status")) for m in branch] == [
        ("user", "one", None), ("assistant", "Answer one.", None), ("user", "two, edited", None),
        ("assistant", "Streamed in part", "unknown"),
        ("system_note", branch[-1]["content"], None)], branch
    assert branch[-1]["note_kind"] == "recovered"
    assert [(m["role"], m["content"]) for m in await transcript(rpc, sid)] == [
        (m["role"], m["content"]) for m in before], "the original is untouched"
    forks = backend.query("SELECT session_id FROM sessions WHERE forked_from = ?", (sid,))
    assert [r["session_id"] for r in forks] == [bid], "one branch"

    again = await fork(rpc, sid, prompts(before)[1]["message_id"], "two, edited",
                       request_id="fork-crash")
    assert again["duplicate"] is True
    assert again["session"]["session_id"] == bid
    assert again["receipt"]["status"] == "unknown"
    await asyncio.sleep(QUIET_S)
    assert len(fake_provider.snapshot()) == 3, "nothing re-run"


async def test_the_answer_and_branch_methods_need_submit_and_refuse_unknown_params(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI
) -> None:
    owner = await connect(name="owner")
    sid = await create_session(owner)
    minted = await owner.call("token.create", {"scopes": ["read"], "label": "viewer"})
    viewer = await connect(token=minted["token"], name="viewer")
    calls: list[tuple[str, Json]] = [
        ("session.regenerate", {"session_id": sid, "request_id": "r"}),
        ("session.choose", {"session_id": sid, "turn_id": "turn_x"}),
        ("session.fork", {"session_id": sid, "message_id": "0000000000000001", "request_id": "r"}),
    ]
    for method, params in calls:
        with pytest.raises(RpcError) as forbidden:
            await viewer.call(method, params)
        assert forbidden.value.code == -32003, (method, forbidden.value)
        with pytest.raises(RpcError) as unknown:
            await owner.call(method, {**params, "principal": "someone"})
        assert (unknown.value.code, unknown.value.data.get("field")) == (-32602, "principal")
    await asyncio.sleep(QUIET_S)
    assert fake_provider.snapshot() == []
    assert [r["session_id"] for r in backend.query("SELECT session_id FROM sessions")] == [sid]
