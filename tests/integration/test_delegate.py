"""The delegate tool end to end: child sessions run concurrently, bounded, stop with their parent.

The fake model tells a parent's requests from its sub-agents' by the text of their
first user message: the parent's prompt, or the task the framed child prompt carries.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.openai_server import FakeOpenAI, Recorded, Reply, content_text

from .backend_proc import Backend, BackendFactory
from .wire import (
    Connect,
    Json,
    Rpc,
    RpcError,
    create_session,
    get_receipt,
    is_event,
    submit,
    terminal,
    tool_messages,
    transcript,
    wait_complete,
    wait_settled,
)

QUIET_S = 1.0  # how long "nothing more happens" is watched after a crash


class Script:
    """Answers each request with the next reply scripted for the first key its first user
    message holds (the last reply again once they run out), and notes which keys arrived."""

    def __init__(self, fake: FakeOpenAI, keys: list[str]) -> None:
        self.replies: dict[str, list[Reply]] = {k: [] for k in keys}
        self.arrived = {k: threading.Event() for k in keys}
        self.counts = dict.fromkeys(keys, 0)
        self.lock = threading.Lock()
        fake.responder = self.answer

    def add(self, key: str, *replies: Reply) -> None:
        self.replies[key].extend(replies)

    def answer(self, body: dict[str, Any]) -> Reply:
        first = next((content_text(m) for m in body.get("messages", []) if m.get("role") == "user"), "")
        for key, replies in self.replies.items():
            if key in first:
                with self.lock:
                    n = self.counts[key]
                    self.counts[key] = n + 1
                self.arrived[key].set()
                return replies[min(n, len(replies) - 1)]
        return Reply(deltas=["unscripted"])

    async def wait(self, key: str, timeout: float = 30.0) -> None:
        if not await asyncio.to_thread(self.arrived[key].wait, timeout):
            raise AssertionError(f"no request for {key!r} within {timeout} s")


def delegate(task: str, context: str | None = None, call_id: str | None = None) -> Json:
    args: Json = {"task": task}
    if context is not None:
        args["context"] = context
    call: Json = {"name": "delegate", "arguments": args}
    if call_id is not None:
        call["id"] = call_id
    return call


def first_user_text(rec: Recorded) -> str:
    return next((content_text(m) for m in rec.body["messages"] if m.get("role") == "user"), "")


def offered(rec: Recorded) -> list[str]:
    return [t["function"]["name"] for t in rec.body.get("tools", [])]


def child_ids(rpc: Rpc, sid: str) -> dict[str, str]:
    """call_id -> child session id, from the parent's tool.progress announcements."""
    return {e["data"]["call_id"]: e["data"]["meta"]["child_session_id"]
            for e in rpc.session_events(sid)
            if e["type"] == "tool.progress" and (e["data"].get("meta") or {}).get("child_session_id")}


async def test_two_delegates_run_concurrently_and_their_results_are_stored_in_call_order(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    script = Script(fake_provider, ["PARENT-TWO", "TASK-A", "TASK-B"])
    script.add("PARENT-TWO", Reply.calls(delegate("TASK-A: count the files", "they are in src/"),
                                         delegate("TASK-B: name the language"), text="Splitting."),
               Reply(deltas=["Both sub-agents answered."]))
    # A's answer is held until B's request arrives: one after the other, this never ends.
    script.add("TASK-A", Reply(deltas=["A says: ", "3 files"], hang_after=0,
                               release=script.arrived["TASK-B"]))
    script.add("TASK-B", Reply(deltas=["B says: Python"]))
    rpc = await connect()
    sid = await create_session(rpc, cwd=str(tmp_path), title="Parent")
    receipt = await submit(rpc, sid, "PARENT-TWO please")
    done = await wait_complete(rpc, receipt["admission_id"])
    assert done["data"]["status"] == "completed", done["data"]
    assert done["data"]["text"] == "Both sub-agents answered."

    rows = await transcript(rpc, sid)
    assert [m["role"] for m in rows] == ["user", "assistant", "tool", "tool", "assistant"]
    calls = [c["call_id"] for c in rows[1]["tool_calls"]]
    assert [m["call_id"] for m in rows[2:4]] == calls, "results in call order"
    assert [m["content"] for m in rows[2:4]] == ["A says: 3 files", "B says: Python"]
    assert [m["status"] for m in rows[2:4]] == ["ok", "ok"]
    children = child_ids(rpc, sid)
    assert set(children) == set(calls)
    assert len(set(children.values())) == 2
    for row in rows[2:4]:
        assert row["meta"]["child_session_id"] == children[row["call_id"]]
    completes = [e for e in rpc.session_events(sid) if e["type"] == "tool.complete"]
    assert [e["data"]["meta"]["child_session_id"] for e in completes] == [children[c] for c in calls]
    announced = {e["data"]["call_id"]: e["seq"] for e in rpc.session_events(sid)
                 if e["type"] == "tool.progress" and e["data"].get("meta")}
    assert all(announced[e["data"]["call_id"]] < e["seq"] for e in completes), \
        "the child is announced while the call runs"

    # What the model read: the answers, in call order.
    follow_up = [r for r in fake_provider.snapshot() if "PARENT-TWO" in first_user_text(r)][-1]
    assert [m["content"] for m in tool_messages(follow_up.body)] == ["A says: 3 files", "B says: Python"]
    # The child's prompt frames the task and the context.
    child_a = next(r for r in fake_provider.snapshot() if "TASK-A" in first_user_text(r))
    prompt = first_user_text(child_a)
    assert "sub-agent" in prompt
    assert "final answer" in prompt
    assert "TASK-A: count the files" in prompt
    assert "they are in src/" in prompt

    # Each child: its own session, linked to the parent's call, same folder; hidden by default.
    for call_id, child in children.items():
        session = (await rpc.call("session.get", {"session_id": child}))["session"]
        assert session["delegated_from"] == sid
        assert session["delegated_call_id"] == call_id
        assert session["cwd"] == str(tmp_path)
        assert session["status"] == "idle"
        msgs = await transcript(rpc, child)
        assert [m["role"] for m in msgs] == ["user", "assistant"]
        receipts = (await rpc.call("admission.list", {"session_id": child}))["receipts"]
        assert [(r["status"], r["outcome"]) for r in receipts] == [("terminal", "completed")]
        assert receipts[0]["request_id"] == f"delegate:{call_id}"
    listed = [s["session_id"] for s in (await rpc.call("session.list", {}))["sessions"]]
    assert listed == [sid], "sub-agents are not in the default list"
    every = {s["session_id"] for s in
             (await rpc.call("session.list", {"include_delegated": True}))["sessions"]}
    assert every == {sid, *children.values()}
    mine = {s["session_id"] for s in
            (await rpc.call("session.list", {"delegated_from": sid}))["sessions"]}
    assert mine == set(children.values())


async def test_a_child_is_not_offered_delegate_and_a_call_to_it_is_refused(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    script = Script(fake_provider, ["PARENT-DEPTH", "TASK-DEEP"])
    script.add("PARENT-DEPTH", Reply.calls(delegate("TASK-DEEP: go deeper")),
               Reply(deltas=["done"]))
    # The hostile child asks for a grandchild anyway.
    script.add("TASK-DEEP", Reply.calls(delegate("TASK-DEEP grandchild")),
               Reply(deltas=["I could not delegate."]))
    rpc = await connect()
    sid = await create_session(rpc, cwd=str(tmp_path))
    receipt = await submit(rpc, sid, "PARENT-DEPTH")
    assert (await wait_complete(rpc, receipt["admission_id"]))["data"]["status"] == "completed"
    recs = fake_provider.snapshot()
    parent_first = next(r for r in recs if "PARENT-DEPTH" in first_user_text(r))
    child_reqs = [r for r in recs if "TASK-DEEP" in first_user_text(r)]
    assert "delegate" in offered(parent_first)
    assert len(child_reqs) == 2, "no grandchild ever asked the model"
    assert all("delegate" not in offered(r) for r in child_reqs)
    refused = tool_messages(child_reqs[1].body)
    assert len(refused) == 1
    assert "delegate" in refused[0]["content"]
    child = next(iter(child_ids(rpc, sid).values()))
    rows = await transcript(rpc, child)
    assert [m["status"] for m in rows if m["role"] == "tool"] == ["error"]
    assert (await rpc.call("session.list", {"delegated_from": child}))["sessions"] == []


async def test_a_failed_child_becomes_an_error_result_naming_its_session(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    script = Script(fake_provider, ["PARENT-FAIL", "TASK-FAIL"])
    script.add("PARENT-FAIL", Reply.calls(delegate("TASK-FAIL: try it")), Reply(deltas=["noted"]))
    script.add("TASK-FAIL", Reply.http_error(400, "the model refuses this request"))
    rpc = await connect()
    sid = await create_session(rpc, cwd=str(tmp_path))
    receipt = await submit(rpc, sid, "PARENT-FAIL")
    assert (await wait_complete(rpc, receipt["admission_id"]))["data"]["status"] == "completed"
    tool = next(m for m in await transcript(rpc, sid) if m["role"] == "tool")
    child = tool["meta"]["child_session_id"]
    assert tool["status"] == "error"
    assert tool["meta"]["child_outcome"] == "failed"
    assert "The sub-agent failed" in tool["content"]
    assert child in tool["content"]
    receipts = (await rpc.call("admission.list", {"session_id": child}))["receipts"]
    assert receipts[0]["outcome"] == "failed"
    assert receipts[0]["failure_reason"] in tool["content"], "the child's reason is passed on"


async def test_interrupting_the_parent_interrupts_its_running_child(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    script = Script(fake_provider, ["PARENT-STOP", "TASK-SLOW"])
    script.add("PARENT-STOP", Reply.calls(delegate("TASK-SLOW: take forever")))
    script.add("TASK-SLOW", Reply(deltas=["never"], hang_after=0))  # hangs until disconnected
    rpc = await connect()
    sid = await create_session(rpc, cwd=str(tmp_path))
    receipt = await submit(rpc, sid, "PARENT-STOP")
    await script.wait("TASK-SLOW")
    assert (await rpc.call("turn.interrupt", {"session_id": sid}))["interrupted"] is True
    done = await wait_complete(rpc, receipt["admission_id"])
    assert done["data"]["status"] == "interrupted"
    tool = next(m for m in await transcript(rpc, sid) if m["role"] == "tool")
    assert tool["status"] == "interrupted"
    child = tool["meta"]["child_session_id"]
    # The parent's turn closed after its child's: the child is settled by now.
    receipts = (await rpc.call("admission.list", {"session_id": child}))["receipts"]
    assert [(r["status"], r["outcome"]) for r in receipts] == [("terminal", "interrupted")]
    assert "parent turn was stopped" in receipts[0]["failure_reason"]
    session = (await rpc.call("session.get", {"session_id": child}))["session"]
    assert session["status"] == "idle"


async def test_the_fifth_concurrent_child_waits_for_a_slot(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    tasks = [f"TASK-{n}" for n in range(1, 6)]
    script = Script(fake_provider, ["PARENT-FIVE", *tasks])
    release = threading.Event()
    script.add("PARENT-FIVE", Reply.calls(*(delegate(f"{t}: part {t}") for t in tasks)),
               Reply(deltas=["all five"]))
    script.add("TASK-1", Reply(deltas=["one"], hang_after=0, release=release))
    for t in tasks[1:4]:
        script.add(t, Reply(deltas=[t.lower()], hang_after=0, release=release))
    script.add("TASK-5", Reply(deltas=["five"]))
    rpc = await connect()
    sid = await create_session(rpc, cwd=str(tmp_path))
    receipt = await submit(rpc, sid, "PARENT-FIVE")
    for t in tasks[:4]:
        await script.wait(t)
    waiting = await rpc.wait_event(lambda e: e.get("session_id") == sid and e["type"] == "tool.progress"
                                   and "Waiting for a free sub-agent slot" in e["data"]["text"])
    assert not script.arrived["TASK-5"].is_set(), "four children hold every slot"
    assert len(child_ids(rpc, sid)) == 4, "the fifth has no child session yet"
    release.set()
    done = await wait_complete(rpc, receipt["admission_id"])
    assert done["data"]["status"] == "completed"
    assert script.arrived["TASK-5"].is_set()
    rows = [m for m in await transcript(rpc, sid) if m["role"] == "tool"]
    assert [m["content"] for m in rows] == ["one", "task-2", "task-3", "task-4", "five"]
    fifth = rows[4]["call_id"]
    assert waiting["data"]["call_id"] == fifth


LATE_DEADLINE_S = 5


async def test_a_child_waiting_for_approval_does_not_spend_the_parents_batch_deadline(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    # The work that does count (the child's start, the sandboxed rm, its last reply) needs
    # room: under CI's load it once took over 2 s, and a deadline of 2 s ended the call.
    backend = backend_factory(fake_provider.base_url,
                              f"[limits]\ntool_batch_deadline_s = {LATE_DEADLINE_S}\n")
    script = Script(fake_provider, ["PARENT-ASK", "TASK-ASK"])
    script.add("PARENT-ASK", Reply.calls(delegate("TASK-ASK: clean up")), Reply(deltas=["cleaned"]))
    script.add("TASK-ASK", Reply.calls(terminal("rm -rf victim")), Reply(deltas=["removed it"]))
    (tmp_path / "victim").mkdir()
    rpc = await Rpc.open(backend.port, backend.token)
    try:
        await _approve_late(rpc, tmp_path)
    finally:
        await rpc.close()


async def _approve_late(rpc: Rpc, tmp_path: Path) -> None:
    sid = await create_session(rpc, cwd=str(tmp_path))
    receipt = await submit(rpc, sid, "PARENT-ASK")
    asked = await rpc.wait_event(lambda e: e["type"] == "approval.request")
    child = next(iter(child_ids(rpc, sid).values()))
    assert asked["session_id"] == child, "the child's approval is asked in the child's session"
    assert asked["data"]["approval"]["session_id"] == child
    await asyncio.sleep(LATE_DEADLINE_S + 1)  # longer than the batch deadline: a person is slow
    await rpc.call("approval.respond", {"approval_id": asked["data"]["approval"]["approval_id"],
                                        "decision": "once"})
    done = await wait_complete(rpc, receipt["admission_id"])
    assert done["data"]["status"] == "completed"
    tool = next(m for m in await transcript(rpc, sid) if m["role"] == "tool")
    assert (tool["status"], tool["content"]) == ("ok", "removed it"), tool
    live = "".join(e["data"]["text"] for e in rpc.session_events(sid) if e["type"] == "tool.progress")
    assert live.endswith("The sub-agent is waiting for an approval in its session.\n"
                         "The sub-agent goes on.\n"), live
    assert not (tmp_path / "victim").exists()


async def test_kill9_mid_child_leaves_parent_call_and_child_turn_unknown_and_reruns_nothing(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    script = Script(fake_provider, ["PARENT-CRASH", "TASK-CRASH"])
    script.add("PARENT-CRASH", Reply.calls(delegate("TASK-CRASH: work")))
    script.add("TASK-CRASH", Reply(deltas=["partial ", "never"], hang_after=1))
    rpc = await connect(name="before-crash")
    sid = await create_session(rpc, cwd=str(tmp_path))
    receipt = await submit(rpc, sid, "PARENT-CRASH")
    await script.wait("TASK-CRASH")
    announced = await rpc.wait_event(lambda e: e["type"] == "tool.progress" and e["data"].get("meta"))
    child = announced["data"]["meta"]["child_session_id"]
    requests = len(fake_provider.snapshot())
    backend.kill9()
    await rpc.wait_closed()
    backend.start()

    rpc = await connect(name="after-restart")
    parent = await get_receipt(rpc, receipt["admission_id"])
    assert parent["status"] == "unknown"
    tool = next(m for m in await transcript(rpc, sid) if m["role"] == "tool")
    assert tool["status"] == "unknown"
    (child_receipt,) = (await rpc.call("admission.list", {"session_id": child}))["receipts"]
    assert child_receipt["status"] == "unknown"
    assert (await rpc.call("session.get", {"session_id": child}))["session"]["status"] == "unknown"
    await asyncio.sleep(QUIET_S)
    assert len(fake_provider.snapshot()) == requests, "nothing re-runs by itself"

    # Moving the parent on settles its unknown turn and runs anew; the child stays as it was.
    script.add("PARENT-CRASH", Reply(deltas=["after the crash"]))
    again = await submit(rpc, sid, "PARENT-CRASH again")
    await wait_settled(rpc, receipt["admission_id"])
    assert (await wait_complete(rpc, again["admission_id"]))["data"]["status"] == "completed"
    assert not [e for e in rpc.events if is_event("turn.started")(e) and e.get("session_id") == child]


async def test_stopping_the_child_alone_is_an_error_result_and_the_parent_goes_on(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    script = Script(fake_provider, ["PARENT-GOES-ON", "TASK-STOPPED"])
    script.add("PARENT-GOES-ON", Reply.calls(delegate("TASK-STOPPED: slow")),
               Reply(deltas=["I will do it myself."]))
    script.add("TASK-STOPPED", Reply(deltas=["never"], hang_after=0))
    rpc = await connect()
    sid = await create_session(rpc, cwd=str(tmp_path))
    receipt = await submit(rpc, sid, "PARENT-GOES-ON")
    await script.wait("TASK-STOPPED")
    announced = await rpc.wait_event(lambda e: e["type"] == "tool.progress" and e["data"].get("meta"))
    child = announced["data"]["meta"]["child_session_id"]
    assert (await rpc.call("turn.interrupt", {"session_id": child}))["interrupted"] is True
    done = await wait_complete(rpc, receipt["admission_id"])
    assert (done["data"]["status"], done["data"]["text"]) == ("completed", "I will do it myself.")
    tool = next(m for m in await transcript(rpc, sid) if m["role"] == "tool")
    assert tool["status"] == "error"
    assert tool["meta"]["child_outcome"] == "interrupted"
    assert tool["content"].startswith("The sub-agent was interrupted: Stopped by you.")


async def test_deleting_the_parent_stops_its_child_and_keeps_the_childs_session_listed(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    script = Script(fake_provider, ["PARENT-DELETE", "TASK-ORPHAN"])
    script.add("PARENT-DELETE", Reply.calls(delegate("TASK-ORPHAN: keep going")))
    script.add("TASK-ORPHAN", Reply(deltas=["never"], hang_after=0))
    rpc = await connect()
    sid = await create_session(rpc, cwd=str(tmp_path))
    await submit(rpc, sid, "PARENT-DELETE")
    await script.wait("TASK-ORPHAN")
    announced = await rpc.wait_event(lambda e: e["type"] == "tool.progress" and e["data"].get("meta"))
    child = announced["data"]["meta"]["child_session_id"]
    assert (await rpc.call("session.delete", {"session_id": sid, "force": True}))["deleted"] is True
    (receipt,) = (await rpc.call("admission.list", {"session_id": child}))["receipts"]
    assert (receipt["status"], receipt["outcome"]) == ("terminal", "interrupted")
    session = (await rpc.call("session.get", {"session_id": child}))["session"]
    assert "delegated_from" not in session, "unlinked: an ordinary session now"
    assert session["delegated_call_id"]
    listed = [s["session_id"] for s in (await rpc.call("session.list", {}))["sessions"]]
    assert listed == [child]
    freed = await rpc.wait_event(lambda e: e["type"] == "session.updated" and e.get("seq") is None
                                 and e["session_id"] == child
                                 and "delegated_from" not in e["data"]["session"])
    assert freed["data"]["session"]["status"] == "idle"


async def test_session_list_filters_are_checked(backend: Backend, connect: Connect) -> None:
    rpc = await connect()
    for params, field in (({"delegated_from": "s" * 201}, "delegated_from"),
                          ({"include_delegated": "yes"}, "include_delegated")):
        with pytest.raises(RpcError) as refused:
            await rpc.call("session.list", params)
        assert refused.value.code == -32602
        assert refused.value.data["field"] == field
    assert (await rpc.call("session.list", {"delegated_from": "ses_unknown"}))["sessions"] == []


async def test_with_depth_two_a_child_may_delegate_and_one_slot_per_level_cannot_deadlock(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    backend = backend_factory(fake_provider.base_url,
                              "[limits]\ndelegate_depth = 2\ndelegate_concurrency = 1\n")
    script = Script(fake_provider, ["PARENT-DEEP", "TASK-MIDDLE", "TASK-BOTTOM"])
    script.add("PARENT-DEEP", Reply.calls(delegate("TASK-MIDDLE: ask further")), Reply(deltas=["top"]))
    # The middle child holds its level's only slot while its own child runs.
    script.add("TASK-MIDDLE", Reply.calls(delegate("TASK-BOTTOM: the leaf")), Reply(deltas=["middle"]))
    script.add("TASK-BOTTOM", Reply(deltas=["leaf"]))
    rpc = await Rpc.open(backend.port, backend.token)
    try:
        sid = await create_session(rpc, cwd=str(tmp_path))
        receipt = await submit(rpc, sid, "PARENT-DEEP")
        assert (await wait_complete(rpc, receipt["admission_id"]))["data"]["status"] == "completed"
        recs = fake_provider.snapshot()
        middle = [r for r in recs if "TASK-MIDDLE" in first_user_text(r)]
        bottom = [r for r in recs if "TASK-BOTTOM" in first_user_text(r)]
        assert "delegate" in offered(middle[0]), "depth 1 of 2 may delegate"
        assert "delegate" not in offered(bottom[0]), "depth 2 of 2 may not"
        assert [m["content"] for m in tool_messages(middle[-1].body)] == ["leaf"]
        (top_tool,) = [m for m in await transcript(rpc, sid) if m["role"] == "tool"]
        assert top_tool["content"] == "middle"
    finally:
        await rpc.close()


def test_the_cli_asks_a_sub_agents_approval_on_the_terminal(
    backend: Backend, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    (tmp_path / "victim").mkdir()
    script = Script(fake_provider, ["PARENT-CLI", "TASK-CLI"])
    script.add("PARENT-CLI", Reply.calls(delegate("TASK-CLI: remove victim")),
               Reply(deltas=["The helper removed it."]))
    script.add("TASK-CLI", Reply.calls(terminal("rm -rf victim")), Reply(deltas=["removed"]))
    cli = [sys.executable, "-m", "desktop.cli", "--data-dir", str(backend.data_dir)]
    out = subprocess.run([*cli, "chat", "--cwd", str(tmp_path), "PARENT-CLI"], env=backend.env(),
                         input="o\n", capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    assert "[approval needed] terminal: rm -rf victim" in out.stderr
    assert "Sub-agent session ses_" in out.stderr, "its live lines name the child"
    assert out.stdout.strip() == "The helper removed it."
    assert not (tmp_path / "victim").exists()


async def test_a_long_answer_is_spilled_like_any_result(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    backend = backend_factory(fake_provider.base_url, "[limits]\nspill_chars = 500\n")
    answer = "".join(f"finding {n:04d}\n" for n in range(200))  # 2,600 characters
    script = Script(fake_provider, ["PARENT-LONG", "TASK-LONG"])
    script.add("PARENT-LONG", Reply.calls(delegate("TASK-LONG: list them all")), Reply(deltas=["ok"]))
    script.add("TASK-LONG", Reply(deltas=[answer]))
    rpc = await Rpc.open(backend.port, backend.token)
    try:
        sid = await create_session(rpc, cwd=str(tmp_path))
        receipt = await submit(rpc, sid, "PARENT-LONG")
        assert (await wait_complete(rpc, receipt["admission_id"]))["data"]["status"] == "completed"
        tool = next(m for m in await transcript(rpc, sid) if m["role"] == "tool")
    finally:
        await rpc.close()
    assert tool["status"] == "ok"
    spilled = Path(tool["meta"]["spilled_path"])
    assert await asyncio.to_thread(spilled.read_text) == answer.strip()
    assert tool["content"].startswith("finding 0000\n")
    assert f"[Output truncated: {len(answer.strip()):,} characters in total." in tool["content"]
    assert tool["meta"]["child_session_id"]
