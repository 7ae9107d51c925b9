"""Approvals end to end: a person allows or denies, rules outlive restarts, timeouts and
crashes expire requests, and hardline commands never run in any mode."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from backend.tools.commands import classify_command
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
    terminal,
    tool_messages,
    transcript,
    wait_complete,
)

Call = dict[str, Any]


async def tool_rows(rpc: Rpc, sid: str) -> list[Json]:
    return [m for m in await transcript(rpc, sid) if m["role"] == "tool"]


def stored(type_: str, sid: str, admission_id: str | None = None) -> Callable[[Json], bool]:
    """An event of the session's stored log (it has a seq), not the tray broadcast."""
    match = is_event(type_, admission_id)
    return lambda e: match(e) and e.get("session_id") == sid and "seq" in e


def approvals_in(rpc: Rpc, sid: str, type_: str) -> list[Json]:
    return [e["data"]["approval"] for e in rpc.session_events(sid) if e["type"] == type_]


def assert_of_turn(event: Json, admission_id: str) -> None:
    """Every event of a turn carries its turn_id and admission_id at the top of its params."""
    assert event.get("admission_id") == admission_id, event
    assert event.get("turn_id") == event["data"]["approval"]["turn_id"], event


def broadcasts(rpc: Rpc, type_: str, approval_id: str) -> list[Json]:
    """The tray's copies of an approval event: broadcast without a seq."""
    return [e for e in rpc.events if e["type"] == type_ and "seq" not in e
            and e["data"]["approval"]["approval_id"] == approval_id]


def victim_folder(root: Path, name: str) -> Path:
    folder = root / name
    folder.mkdir()
    (folder / "precious.txt").write_text("keep me\n")
    return folder


async def test_smart_mode_asks_before_rm_rf_and_a_denial_keeps_the_folder(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    victim = victim_folder(tmp_path, "victim")
    fake_provider.script(
        Reply.calls(terminal("rm -rf victim"), text="Cleaning up."),
        Reply(deltas=["Understood, I left it alone."]),
    )
    rpc = await connect()
    sid = await create_session(rpc, cwd=str(tmp_path))
    receipt = await submit(rpc, sid, "delete victim")
    aid = receipt["admission_id"]

    request = await rpc.wait_event(stored("approval.request", sid))
    approval = request["data"]["approval"]
    assert approval["tool"] == "terminal"
    assert approval["summary"] == "rm -rf victim"
    assert "recursive delete" in approval["reason"]
    assert approval["status"] == "pending"
    started = await rpc.wait_event(is_event("turn.started", aid))
    assert approval["session_id"] == sid
    assert approval["turn_id"] == started["turn_id"]
    assert approval.get("decision") is None
    start = next(e for e in rpc.session_events(sid) if e["type"] == "tool.start")
    assert approval["call_id"] == start["data"]["call_id"]
    await rpc.wait_until(lambda: bool(broadcasts(rpc, "approval.request", approval["approval_id"])))
    assert_of_turn(request, aid)
    assert_of_turn(broadcasts(rpc, "approval.request", approval["approval_id"])[0], aid)

    # By the time the request is delivered, the session reports that it waits for a person.
    session = (await rpc.call("session.get", {"session_id": sid}))["session"]
    assert session["status"] == "waiting_approval", session
    listed = (await rpc.call("approval.list", {"session_id": sid}))["approvals"]
    assert [a["approval_id"] for a in listed] == [approval["approval_id"]]
    everywhere = (await rpc.call("approval.list", {}))["approvals"]
    assert approval["approval_id"] in [a["approval_id"] for a in everywhere]
    assert victim.exists(), "nothing runs while the request is pending"

    answer = await rpc.call("approval.respond",
                            {"approval_id": approval["approval_id"], "decision": "deny"})
    assert answer["approval"]["status"] == "denied"
    assert answer["approval"]["decision"] == "deny"
    resolved = await rpc.wait_event(stored("approval.resolved", sid))
    assert resolved["data"]["approval"]["approval_id"] == approval["approval_id"]
    assert resolved["data"]["approval"]["status"] == "denied"
    assert_of_turn(resolved, aid)
    await rpc.wait_until(lambda: bool(broadcasts(rpc, "approval.resolved", approval["approval_id"])))
    assert_of_turn(broadcasts(rpc, "approval.resolved", approval["approval_id"])[0], aid)
    with pytest.raises(RpcError) as twice:  # the first answer wins
        await rpc.call("approval.respond", {"approval_id": approval["approval_id"], "decision": "once"})
    assert twice.value.code == -32013
    with pytest.raises(RpcError) as unknown:
        await rpc.call("approval.respond", {"approval_id": "apr_nope", "decision": "once"})
    assert unknown.value.code == -32004
    assert unknown.value.data.get("kind") == "approval"

    done = await wait_complete(rpc, aid)
    assert done["data"]["status"] == "completed", done
    assert done["data"]["text"] == "Understood, I left it alone."
    assert victim.is_dir()
    assert (victim / "precious.txt").read_text() == "keep me\n"

    complete = next(e for e in rpc.session_events(sid) if e["type"] == "tool.complete")
    assert complete["data"]["status"] == "denied"
    rows = await tool_rows(rpc, sid)
    assert [r["status"] for r in rows] == ["denied"], rows
    assert "denied" in rows[0]["content"]
    # Who denied it and when, for the card: "Denied by you at 14:02".
    closed = resolved["data"]["approval"]
    assert (closed["decided_by"], closed["decided_at"]) == ("user", answer["approval"]["decided_at"])
    meta = rows[0]["meta"]
    assert (meta["decided_by"], meta["decision"], meta["approval_id"]) == (
        "user", "deny", approval["approval_id"])
    assert meta["decided_at"] == closed["decided_at"]
    assert meta["waited_ms"] >= 0
    assert "timeout_s" not in meta
    assert {k: v for k, v in complete["data"]["meta"].items()} == {
        k: v for k, v in meta.items() if k != "duration_ms"}, "the live event says the same"

    requests = fake_provider.snapshot()
    assert len(requests) == 2
    sent = tool_messages(requests[1].body)
    assert len(sent) == 1
    assert sent[0]["tool_call_id"] == approval["call_id"]
    assert "denied" in sent[0]["content"]
    assert (await rpc.call("approval.list", {"session_id": sid}))["approvals"] == []
    session = (await rpc.call("session.get", {"session_id": sid}))["session"]
    assert session["status"] == "idle", session


async def answer_next_request(rpc: Rpc, sid: str, decision: str, seen: int) -> Json:
    """Waits for the session's (seen+1)-th approval.request and answers it."""
    await rpc.wait_until(lambda: len(approvals_in(rpc, sid, "approval.request")) > seen,
                         what="approval.request")
    approval = approvals_in(rpc, sid, "approval.request")[seen]
    result = await rpc.call("approval.respond",
                            {"approval_id": approval["approval_id"], "decision": decision})
    return dict(result["approval"])


async def test_always_stores_a_rule_that_survives_a_restart_until_deleted(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    builds = [victim_folder(tmp_path, f"build{i}") for i in (1, 2, 3)]
    fake_provider.script(Reply.calls(terminal("rm -rf build1")), Reply(deltas=["Removed build1."]))
    rpc = await connect(name="first")
    sid = await create_session(rpc, cwd=str(tmp_path))
    receipt = await submit(rpc, sid, "remove build1")
    allowed = await answer_next_request(rpc, sid, "always", 0)
    assert allowed["status"] == "allowed"
    assert allowed["decision"] == "always"
    done = await wait_complete(rpc, receipt["admission_id"])
    assert done["data"]["status"] == "completed"
    assert done["data"]["text"] == "Removed build1."
    assert not builds[0].exists()
    [first_row] = await tool_rows(rpc, sid)
    assert first_row["status"] == "ok"
    assert (first_row["meta"]["decided_by"], first_row["meta"]["decision"]) == ("user", "always")
    assert "exit_code" in first_row["meta"], "beside what the tool reports"

    rules = (await rpc.call("rules.list"))["rules"]
    assert len(rules) == 1, rules
    rule = rules[0]
    assert (rule["tool"], rule["pattern"]) == ("terminal", "rm -rf"), rule
    assert rule["rule_id"]
    assert rule["created_at"]

    backend.restart()
    await rpc.wait_closed()
    rpc = await connect(name="after-restart")
    assert (await rpc.call("rules.list"))["rules"] == rules

    fake_provider.script(Reply.calls(terminal("rm -rf build2")), Reply(deltas=["Removed build2."]))
    receipt = await submit(rpc, sid, "remove build2")
    done = await wait_complete(rpc, receipt["admission_id"])
    assert done["data"]["status"] == "completed"
    assert done["data"]["text"] == "Removed build2."
    assert not builds[1].exists()
    assert approvals_in(rpc, sid, "approval.request") == [], "the stored rule allows it"
    rows = await tool_rows(rpc, sid)
    assert [r["status"] for r in rows] == ["ok", "ok"]
    assert (rows[1]["meta"]["decided_by"], rows[1]["meta"]["rule"]) == ("rule", "rm -rf")
    assert rows[1]["meta"]["decided_at"]

    assert await rpc.call("rules.delete", {"rule_id": rule["rule_id"]}) == {}
    assert (await rpc.call("rules.list"))["rules"] == []
    with pytest.raises(RpcError) as missing:
        await rpc.call("rules.delete", {"rule_id": rule["rule_id"]})
    assert missing.value.code == -32004

    fake_provider.script(Reply.calls(terminal("rm -rf build3")), Reply(deltas=["Asked first."]))
    receipt = await submit(rpc, sid, "remove build3")
    await rpc.wait_event(stored("approval.request", sid, None))
    assert builds[2].exists(), "without the rule it waits for a person again"
    again = await answer_next_request(rpc, sid, "once", 0)
    assert again["summary"] == "rm -rf build3"
    done = await wait_complete(rpc, receipt["admission_id"])
    assert done["data"]["status"] == "completed"
    assert not builds[2].exists()
    assert (await rpc.call("rules.list"))["rules"] == [], "`once` stores no rule"


async def test_an_unanswered_request_expires_and_the_turn_goes_on(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    backend = backend_factory(fake_provider.base_url, "[approvals]\ntimeout_s = 0.5\n")
    victim = victim_folder(tmp_path, "victim")
    fake_provider.script(Reply.calls(terminal("rm -rf victim")), Reply(deltas=["Nobody answered."]))
    rpc = await Rpc.open(backend.port, backend.token)
    try:
        sid = await create_session(rpc, cwd=str(tmp_path))
        receipt = await submit(rpc, sid, "delete victim")
        request = (await rpc.wait_event(stored("approval.request", sid)))["data"]["approval"]
        expired = await rpc.wait_event(stored("approval.resolved", sid))
        assert_of_turn(expired, receipt["admission_id"])
        resolved = expired["data"]["approval"]
        assert resolved["approval_id"] == request["approval_id"]
        assert resolved["status"] == "expired"
        assert resolved.get("decision") is None
        assert resolved["decided_by"] == "timeout"
        assert resolved["decided_at"] >= request["created_at"]
        done = await wait_complete(rpc, receipt["admission_id"])
        assert done["data"]["status"] == "completed"
        assert done["data"]["text"] == "Nobody answered."
        assert victim.is_dir()
        rows = await tool_rows(rpc, sid)
        assert [r["status"] for r in rows] == ["denied"], rows
        assert "in time" in rows[0]["content"]
        meta = rows[0]["meta"]  # "Expired after 0.5 s without an answer"
        assert (meta["decided_by"], meta["timeout_s"]) == ("timeout", 0.5), meta
        assert meta["decided_at"] == resolved["decided_at"]
        assert meta["waited_ms"] >= 400
        assert "decision" not in meta
        assert "denied" in tool_messages(fake_provider.snapshot()[1].body)[0]["content"]

        with pytest.raises(RpcError) as late:
            await rpc.call("approval.respond",
                           {"approval_id": request["approval_id"], "decision": "once"})
        assert late.value.code == -32013
        assert (await rpc.call("approval.list", {}))["approvals"] == []
        assert victim.is_dir(), "a late answer runs nothing"
    finally:
        await rpc.close()


async def test_hardline_commands_never_run_even_with_approvals_off(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    target = tmp_path.parent / f"definitely-not-a-device-{uuid.uuid4().hex}"
    mkfs = f"mkfs.ext4 {target}"
    bomb = ":(){ :|:& };:"
    for command in (mkfs, bomb):  # never send a command the policy would let through
        guard = classify_command(command)
        assert guard is not None, command
        assert guard.kind == "hardline", (command, guard)

    backend = backend_factory(fake_provider.base_url, '[approvals]\nmode = "off"\n')
    fake_provider.script(Reply.calls(terminal(mkfs), terminal(bomb)),
                         Reply(deltas=["Those were refused."]))
    rpc = await Rpc.open(backend.port, backend.token)
    try:
        sid = await create_session(rpc, cwd=str(tmp_path))
        receipt = await submit(rpc, sid, "format and bomb")
        done = await wait_complete(rpc, receipt["admission_id"])
        assert done["data"]["status"] == "completed"
        assert done["data"]["text"] == "Those were refused."
        rows = await tool_rows(rpc, sid)
        assert [r["status"] for r in rows] == ["denied", "denied"], rows
        for row in rows:
            assert "never run" in row["content"], row["content"]
            assert row["meta"]["decided_by"] == "policy", "refused by a built-in rule"
            assert row["meta"]["decided_at"]
        assert "formats a disk" in rows[0]["content"]
        assert "fork bomb" in rows[1]["content"]
        completes = [e for e in rpc.session_events(sid) if e["type"] == "tool.complete"]
        assert [e["data"]["status"] for e in completes] == ["denied", "denied"]
        assert not any(e["type"].startswith("approval.") for e in rpc.events)
        sent = tool_messages(fake_provider.snapshot()[1].body)
        assert all("never run" in m["content"] for m in sent)
        assert not target.exists()
    finally:
        await rpc.close()


async def test_a_session_decision_covers_only_that_session(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    first_dir, second_dir = tmp_path / "a", tmp_path / "b"
    first_dir.mkdir()
    second_dir.mkdir()
    s1, s2 = victim_folder(first_dir, "s1"), victim_folder(first_dir, "s2")
    s3 = victim_folder(second_dir, "s3")
    rpc = await connect()
    first = await create_session(rpc, cwd=str(first_dir))
    second = await create_session(rpc, cwd=str(second_dir))

    fake_provider.script(Reply.calls(terminal("rm -rf s1")), Reply(deltas=["one"]))
    receipt = await submit(rpc, first, "remove s1")
    decided = await answer_next_request(rpc, first, "session", 0)
    assert decided["status"] == "allowed"
    assert decided["decision"] == "session"
    await wait_complete(rpc, receipt["admission_id"])
    assert not s1.exists()
    assert (await rpc.call("rules.list"))["rules"] == [], "a session rule is not a global one"

    fake_provider.script(Reply.calls(terminal("rm -rf s2")), Reply(deltas=["two"]))
    receipt = await submit(rpc, first, "remove s2")
    done = await wait_complete(rpc, receipt["admission_id"])
    assert done["data"]["text"] == "two"
    assert not s2.exists()
    assert len(approvals_in(rpc, first, "approval.request")) == 1, "the same session does not ask again"

    fake_provider.script(Reply.calls(terminal("rm -rf s3")), Reply(deltas=["three"]))
    receipt = await submit(rpc, second, "remove s3")
    denied = await answer_next_request(rpc, second, "deny", 0)
    assert denied["session_id"] == second
    assert denied["status"] == "denied"
    done = await wait_complete(rpc, receipt["admission_id"])
    assert done["data"]["text"] == "three"
    assert s3.is_dir(), "another session still asks"
    assert [r["status"] for r in await tool_rows(rpc, second)] == ["denied"]


async def test_smart_mode_asks_for_a_write_outside_the_session_folder_only(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    cwd = tmp_path / "project"
    cwd.mkdir()
    inside, outside = cwd / "notes.txt", tmp_path / "elsewhere" / "outside.txt"
    fake_provider.script(
        Reply.calls(
            {"name": "write_file", "arguments": {"path": "notes.txt", "content": "in\n"}},
            {"name": "write_file", "arguments": {"path": str(outside), "content": "out\n"}},
        ),
        Reply(deltas=["Both written."]),
    )
    rpc = await connect()
    sid = await create_session(rpc, cwd=str(cwd))
    receipt = await submit(rpc, sid, "write two files")
    request = (await rpc.wait_event(stored("approval.request", sid)))["data"]["approval"]
    assert request["tool"] == "write_file"
    assert str(outside) in request["summary"]
    assert "outside the session folder" in request["reason"]
    for _ in range(200):  # the inside write runs alongside, without waiting for the person
        if inside.exists():
            break
        await asyncio.sleep(0.05)
    assert inside.read_text() == "in\n", "the write inside the folder did not wait"
    assert (await rpc.call("approval.list", {"session_id": sid}))["approvals"][0]["status"] == "pending"
    assert not outside.exists()
    starts = [e["data"]["call_id"] for e in rpc.session_events(sid) if e["type"] == "tool.start"]
    assert request["call_id"] == starts[1]

    await rpc.call("approval.respond", {"approval_id": request["approval_id"], "decision": "once"})
    done = await wait_complete(rpc, receipt["admission_id"])
    assert done["data"]["text"] == "Both written."
    assert outside.read_text() == "out\n"
    assert len(approvals_in(rpc, sid, "approval.request")) == 1, "only the outside write asked"
    assert [r["status"] for r in await tool_rows(rpc, sid)] == ["ok", "ok"]


async def test_kill9_while_an_approval_is_pending_expires_it_and_nothing_runs(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    victim = victim_folder(tmp_path, "victim")
    fake_provider.script(Reply.calls(terminal("rm -rf victim")))
    rpc = await connect(name="before")
    sid = await create_session(rpc, cwd=str(tmp_path))
    receipt = await submit(rpc, sid, "delete victim")
    approval = (await rpc.wait_event(stored("approval.request", sid)))["data"]["approval"]
    backend.kill9()
    await rpc.wait_closed()
    backend.start()

    rpc = await connect(name="after")
    assert (await rpc.call("approval.list", {}))["approvals"] == []
    assert (await rpc.call("approval.list", {"session_id": sid}))["approvals"] == []
    log = await rpc.call("session.events.since", {"session_id": sid, "since_seq": 0})
    expired = [e for e in log["events"] if e["type"] == "approval.resolved"]
    resolved = [e["data"]["approval"] for e in expired]
    assert [(a["approval_id"], a["status"]) for a in resolved] == [
        (approval["approval_id"], "expired")], resolved
    assert_of_turn(expired[0], receipt["admission_id"])  # expired by start-up recovery
    resumed = await rpc.call("session.resume", {"session_id": sid})
    assert resumed["pending_approvals"] == []

    rows = await transcript(rpc, sid)
    calls = [m for m in rows if m.get("tool_calls")]
    assert [c["call_id"] for c in calls[0]["tool_calls"]] == [approval["call_id"]]
    results = [m for m in rows if m["role"] == "tool"]
    assert [(m["call_id"], m["status"]) for m in results] == [(approval["call_id"], "unknown")]
    with pytest.raises(RpcError) as late:
        await rpc.call("approval.respond",
                       {"approval_id": approval["approval_id"], "decision": "once"})
    assert late.value.code == -32013
    receipt_now = (await rpc.call("admission.get",
                                  {"admission_id": receipt["admission_id"]}))["receipt"]
    assert receipt_now["status"] == "unknown"
    await asyncio.sleep(0.5)
    assert (victim / "precious.txt").is_file(), "the tool never ran"


async def test_ask_mode_asks_for_every_command_and_a_rule_covers_only_its_prefix(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    backend = backend_factory(fake_provider.base_url, '[approvals]\nmode = "ask"\n')
    b1, b2, b3 = (victim_folder(tmp_path, name) for name in ("b1", "b2", "b3"))
    marker = tmp_path / "marker"
    rpc = await Rpc.open(backend.port, backend.token)
    try:
        sid = await create_session(rpc, cwd=str(tmp_path))

        async def turn(command: str, decision: str | None) -> Json:
            fake_provider.script(Reply.calls(terminal(command)), Reply(deltas=[f"after {command}"]))
            asked = len(approvals_in(rpc, sid, "approval.request"))
            receipt = await submit(rpc, sid, command)
            if decision is not None:
                approval = await answer_next_request(rpc, sid, decision, asked)
                assert approval["summary"] == command
            done = await wait_complete(rpc, receipt["admission_id"])
            assert done["data"]["text"] == f"after {command}"
            return (await tool_rows(rpc, sid))[-1]

        harmless = await turn("echo hello", "once")
        assert harmless["status"] == "ok"
        assert "hello" in harmless["content"]
        assert "ask mode" in approvals_in(rpc, sid, "approval.request")[0]["reason"]
        assert (await turn("rm -rf b1", "always"))["status"] == "ok"
        assert not b1.exists()
        assert (await turn("rm -rf b2", None))["status"] == "ok", "the rule covers it"
        assert not b2.exists()
        assert len(approvals_in(rpc, sid, "approval.request")) == 2
        # In ask mode every part of the line needs approval; the rule covers only `rm -rf`.
        mixed = await turn("rm -rf b3; touch marker", "deny")
        assert mixed["status"] == "denied"
        assert b3.is_dir()
        assert not marker.exists()
    finally:
        await rpc.close()


async def test_interrupt_while_an_approval_is_pending_ends_the_turn_promptly(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    victim = victim_folder(tmp_path, "victim")
    fake_provider.script(Reply.calls(terminal("rm -rf victim")), Reply(deltas=["unused"]))
    rpc = await connect()
    sid = await create_session(rpc, cwd=str(tmp_path))
    receipt = await submit(rpc, sid, "delete victim")
    approval = (await rpc.wait_event(stored("approval.request", sid)))["data"]["approval"]
    session = (await rpc.call("session.get", {"session_id": sid}))["session"]
    assert session["status"] == "waiting_approval"
    assert (await rpc.call("turn.interrupt", {"session_id": sid}))["interrupted"] is True
    done = await wait_complete(rpc, receipt["admission_id"], timeout=8)
    assert done["data"]["status"] == "interrupted"
    resolved = (await rpc.wait_event(stored("approval.resolved", sid)))["data"]["approval"]
    assert resolved["approval_id"] == approval["approval_id"]
    assert resolved["status"] == "expired"
    assert resolved["decided_by"] == "stopped", "cut short by the stop, not the clock"
    assert (await rpc.call("approval.list", {}))["approvals"] == []
    rows = await tool_rows(rpc, sid)
    assert [r["status"] for r in rows] == ["skipped"], rows
    assert (victim / "precious.txt").is_file()
    assert len(fake_provider.snapshot()) == 1
    with pytest.raises(RpcError) as late:
        await rpc.call("approval.respond", {"approval_id": approval["approval_id"],
                                            "decision": "once"})
    assert late.value.code == -32013
