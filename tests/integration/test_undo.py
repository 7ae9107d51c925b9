"""session.undo: files that tools changed in a turn go back to how they were before it."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.openai_server import FakeOpenAI, Reply

from .backend_proc import Backend, BackendFactory
from .wire import Connect, Json, Rpc, RpcError, create_session, submit, wait_complete

Call = dict[str, Any]


def write_file(path: str, content: str) -> Call:
    return {"name": "write_file", "arguments": {"path": path, "content": content}}


def patch(path: str, old: str, new: str) -> Call:
    return {"name": "patch", "arguments": {"path": path, "old": old, "new": new}}


async def transcript(rpc: Rpc, sid: str) -> list[Json]:
    result = await rpc.call("session.messages", {"session_id": sid, "limit": 1000})
    messages: list[Json] = result["messages"]
    return messages


async def run_turn(rpc: Rpc, fake: FakeOpenAI, sid: str, *batches: list[Call]) -> str:
    """One turn whose model runs each batch of calls in turn, then answers; its turn_id."""
    fake.script(*(Reply.calls(*calls) for calls in batches), Reply(deltas=["Done."]))
    receipt = await submit(rpc, sid, "change files")
    done = await wait_complete(rpc, receipt["admission_id"])
    assert done["data"]["status"] == "completed", done
    assert done["data"]["text"] == "Done."
    return str(done["turn_id"])


async def undo(rpc: Rpc, sid: str, turn_id: str | None = None) -> Json:
    params = {"session_id": sid} if turn_id is None else {"session_id": sid, "turn_id": turn_id}
    return await rpc.call("session.undo", params)


async def test_undo_restores_patched_files_and_deletes_created_ones(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    work = (tmp_path / "work").resolve()
    work.mkdir()
    existing, script, created = work / "existing.txt", work / "run.sh", work / "sub" / "new.txt"
    existing.write_text("alpha\nbeta\ngamma\n")
    script.write_text("#!/bin/sh\necho one\n")
    script.chmod(0o750)
    rpc = await connect()
    sid = await create_session(rpc, cwd=str(work))
    turn_id = await run_turn(rpc, fake_provider, sid, [
        write_file("sub/new.txt", "fresh\n"),
        patch("existing.txt", "beta", "BETA"),
        patch("run.sh", "echo one", "echo two"),
    ])
    assert created.read_text() == "fresh\n"
    assert existing.read_text() == "alpha\nBETA\ngamma\n"
    assert script.read_text() == "#!/bin/sh\necho two\n"

    completes = [e["data"] for e in rpc.session_events(sid) if e["type"] == "tool.complete"]
    assert [c["status"] for c in completes] == ["ok", "ok", "ok"]
    metas = [c["meta"] for c in completes]
    assert [m["created"] for m in metas] == [True, False, False]
    assert "+fresh" in metas[0]["diff"]
    assert "-beta" in metas[1]["diff"]
    assert "+BETA" in metas[1]["diff"]
    assert "existing.txt" in metas[1]["diff"]
    assert "+echo two" in metas[2]["diff"]
    rows = [m for m in await transcript(rpc, sid) if m["role"] == "tool"]
    assert [r["meta"]["diff"] for r in rows] == [m["diff"] for m in metas]
    assert [r["meta"]["created"] for r in rows] == [True, False, False]

    result = await undo(rpc, sid)
    assert result["turn_id"] == turn_id
    assert sorted(result["restored"]) == sorted(str(p) for p in (created, existing, script))
    assert not created.exists(), "the file the turn created is gone"
    assert existing.read_text() == "alpha\nbeta\ngamma\n"
    assert script.read_text() == "#!/bin/sh\necho one\n"
    assert stat.S_IMODE(script.stat().st_mode) == 0o750, "undo keeps the file's permissions"

    again = await undo(rpc, sid)
    assert again["restored"] == []
    assert again.get("turn_id") is None  # left out, not null: see the report
    assert existing.read_text() == "alpha\nbeta\ngamma\n"


async def test_undo_goes_back_one_turn_at_a_time_and_takes_a_turn_id(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    work = (tmp_path / "work").resolve()
    work.mkdir()
    notes, other = work / "notes.md", work / "other.txt"
    other.write_text("original\n")
    rpc = await connect()
    sid = await create_session(rpc, cwd=str(work))
    # A file written and then patched in the same turn: undo goes back to before the turn.
    first = await run_turn(rpc, fake_provider, sid, [write_file("notes.md", "v1\n")],
                           [patch("notes.md", "v1", "v1 edited")])
    second = await run_turn(rpc, fake_provider, sid, [patch("notes.md", "v1 edited", "v2")])
    third = await run_turn(rpc, fake_provider, sid, [write_file("other.txt", "changed\n")])
    assert notes.read_text() == "v2\n"
    assert other.read_text() == "changed\n"

    picked = await undo(rpc, sid, second)
    assert picked == {"restored": [str(notes)], "turn_id": second}
    assert notes.read_text() == "v1 edited\n"
    assert other.read_text() == "changed\n", "only the named turn's files are restored"

    latest = await undo(rpc, sid)
    assert latest == {"restored": [str(other)], "turn_id": third}
    assert other.read_text() == "original\n"

    oldest = await undo(rpc, sid)
    assert oldest == {"restored": [str(notes)], "turn_id": first}
    assert not notes.exists()
    assert (await undo(rpc, sid))["restored"] == []
    assert (await undo(rpc, sid, second))["restored"] == [], "a turn is undone once"
    assert not notes.exists()

    with pytest.raises(RpcError) as missing:
        await rpc.call("session.undo", {"session_id": "ses_does_not_exist"})
    assert missing.value.code == -32004


async def test_undo_with_nothing_changed_restores_nothing(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    rpc = await connect()
    sid = await create_session(rpc, cwd=str(tmp_path))
    nothing = await undo(rpc, sid)
    assert nothing["restored"] == []
    assert nothing.get("turn_id") is None
    (tmp_path / "kept.txt").write_text("same\n")
    fake_provider.script(
        Reply.calls({"name": "read_file", "arguments": {"path": "kept.txt"}},
                    {"name": "terminal", "arguments": {"command": "echo hi"}}),
        Reply(deltas=["Read it."]),
    )
    receipt = await submit(rpc, sid, "look only")
    await wait_complete(rpc, receipt["admission_id"])
    after = await undo(rpc, sid)
    assert after["restored"] == []
    assert after.get("turn_id") is None
    assert (tmp_path / "kept.txt").read_text() == "same\n"


async def test_files_the_tools_create_follow_the_users_umask(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    old = os.umask(0o022)  # the backend inherits the umask of the process that starts it
    try:
        backend = backend_factory(fake_provider.base_url)
    finally:
        os.umask(old)
    work = tmp_path / "work"
    work.mkdir()
    rpc = await Rpc.open(backend.port, backend.token)
    try:
        sid = await create_session(rpc, cwd=str(work))
        await run_turn(rpc, fake_provider, sid, [
            write_file("written.txt", "x\n"),
            {"name": "terminal", "arguments": {"command": "touch touched.txt"}},
        ])
    finally:
        await rpc.close()
    modes = {name: stat.S_IMODE((work / name).stat().st_mode) for name in ("written.txt", "touched.txt")}
    assert modes == {"written.txt": 0o644, "touched.txt": 0o644}


async def test_undo_is_an_event_every_reader_gets_and_a_later_one_replays(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    """`files.restored` names the turn, the files put back and the calls undone; it is stored,
    so a second connection following the session sees it live and a resume replays it; the
    calls' rows say `undone` in their meta."""
    work = (tmp_path / "work").resolve()
    work.mkdir()
    (work / "kept.txt").write_text("old\n")
    rpc, other = await connect(), await connect()
    sid = await create_session(rpc, cwd=str(work))
    await other.call("session.subscribe", {"session_id": sid})
    turn_id = await run_turn(rpc, fake_provider, sid, [
        write_file("new.txt", "fresh\n"), patch("kept.txt", "old", "new"),
    ], [{"name": "read_file", "arguments": {"path": "kept.txt"}}])
    calls = [e["data"]["call_id"] for e in rpc.session_events(sid) if e["type"] == "tool.start"]
    assert len(calls) == 3

    await undo(rpc, sid)
    seen = await other.wait_event(lambda e: e["type"] == "files.restored")
    assert seen["turn_id"] == turn_id
    assert seen["seq"] is not None, "stored, not only broadcast"
    assert seen["data"]["turn_id"] == turn_id
    assert sorted(seen["data"]["paths"]) == sorted([str(work / "new.txt"), str(work / "kept.txt")])
    assert seen["data"]["call_ids"] == calls[:2], "the calls that changed files, in order"

    rows = {m["call_id"]: m["meta"] or {} for m in await transcript(rpc, sid) if m["role"] == "tool"}
    assert [rows[c].get("undone") for c in calls] == [True, True, None], \
        "the undone calls' rows say so, for a window opened later"
    assert "+fresh" in rows[calls[0]]["diff"], "the rest of the meta is kept"

    replay = await rpc.call("session.events.since", {"session_id": sid, "since_seq": 0})
    assert [e["data"] for e in replay["events"] if e["type"] == "files.restored"] == [seen["data"]]
    resumed = await rpc.call("session.resume", {"session_id": sid, "since_seq": seen["seq"] - 1})
    assert [e["type"] for e in resumed["events"]] == ["files.restored"]

    await undo(rpc, sid)  # nothing left to put back: no event
    again = await rpc.call("session.events.since", {"session_id": sid, "since_seq": seen["seq"]})
    assert again["events"] == []
