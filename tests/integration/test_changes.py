"""session.changes: every file a session's turns changed, by turn, with one diff per file; and
session.undo with `paths`: one file of a turn put back, the others kept."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from tests.fakes.openai_server import FakeOpenAI, Reply

from .backend_proc import Backend
from .test_undo import patch, run_turn, transcript, undo, write_file
from .wire import Connect, Json, Rpc, RpcError, create_session, submit, wait_complete


async def changes(rpc: Rpc, sid: str, **params: object) -> Json:
    result: Json = await rpc.call("session.changes", {"session_id": sid, **params})
    return result


def files_of(turn: Json) -> dict[str, Json]:
    return {f["label"]: f for f in turn["files"]}


async def test_changes_list_each_turns_files_with_one_combined_diff(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    work = (tmp_path / "work").resolve()
    work.mkdir()
    (work / "notes.md").write_text("one\ntwo\nthree\n")
    rpc = await connect()
    sid = await create_session(rpc, cwd=str(work))
    assert await changes(rpc, sid) == {"turns": [], "has_more": False}

    fake_provider.script(Reply.calls(patch("notes.md", "one", "ONE")),
                         Reply.calls(patch("notes.md", "three", "THREE"), write_file("new/a.txt", "a\n")),
                         Reply(deltas=["Done."]))
    receipt = await submit(rpc, sid, "\n  tidy the notes  \nand add a file")
    first = str((await wait_complete(rpc, receipt["admission_id"]))["turn_id"])
    second = await run_turn(rpc, fake_provider, sid, [patch("notes.md", "two", "TWO")])
    await run_turn(rpc, fake_provider, sid, [{"name": "read_file", "arguments": {"path": "notes.md"}}])

    result = await changes(rpc, sid)
    assert result["has_more"] is False
    assert [t["turn_id"] for t in result["turns"]] == [first, second], "oldest first; no empty turn"
    one, two = result["turns"]
    assert one["prompt"] == "tidy the notes", "the prompt's first line"
    assert one["at"].endswith("Z")
    assert list(files_of(one)) == ["notes.md", "new/a.txt"], "in the order the turn changed them"
    notes, added = files_of(one)["notes.md"], files_of(one)["new/a.txt"]
    assert notes["path"] == str(work / "notes.md")
    assert len(notes["call_ids"]) == 2, "both patches of the turn"
    # One diff for the turn: from before its first patch to as it left the file, not to now
    # (the next turn changed it again).
    assert "-one" in notes["diff"]
    assert "+ONE" in notes["diff"]
    assert "-three" in notes["diff"]
    assert "+THREE" in notes["diff"]
    assert "TWO" not in notes["diff"]
    assert not notes["created"]
    assert not notes["deleted"]
    assert not notes["restored"]
    assert added["created"]
    assert "+a" in added["diff"]
    assert files_of(two)["notes.md"]["diff"].count("\n-") == 1
    assert "+TWO" in files_of(two)["notes.md"]["diff"]

    # A file removed after the turn: deleted; and the turn limit.
    (work / "new" / "a.txt").unlink()
    result = await changes(rpc, sid)
    assert files_of(result["turns"][0])["new/a.txt"]["deleted"] is True
    newest = await changes(rpc, sid, limit=1)
    assert [t["turn_id"] for t in newest["turns"]] == [second]
    assert newest["has_more"] is True

    with pytest.raises(RpcError) as missing:
        await changes(rpc, "ses_does_not_exist")
    assert missing.value.code == -32004


async def test_undo_of_one_path_restores_only_that_file_and_says_so(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    work = (tmp_path / "work").resolve()
    work.mkdir()
    kept, undone = work / "kept.txt", work / "undone.txt"
    kept.write_text("kept old\n")
    undone.write_text("undone old\n")
    rpc, other = await connect(), await connect()
    sid = await create_session(rpc, cwd=str(work))
    await other.call("session.subscribe", {"session_id": sid})
    turn_id = await run_turn(rpc, fake_provider, sid, [
        patch("kept.txt", "old", "new"), patch("undone.txt", "old", "new"),
    ])
    calls = [e["data"]["call_id"] for e in rpc.session_events(sid) if e["type"] == "tool.start"]

    with pytest.raises(RpcError) as elsewhere:
        await rpc.call("session.undo", {"session_id": sid, "turn_id": turn_id,
                                        "paths": [str(undone), str(work / "other.txt")]})
    assert elsewhere.value.code == -32602
    assert elsewhere.value.data["field"] == "paths.1"
    with pytest.raises(RpcError) as no_turn:
        await rpc.call("session.undo", {"session_id": sid, "paths": [str(undone)]})
    assert no_turn.value.data["field"] == "turn_id"
    assert undone.read_text() == "undone new\n", "a refused call puts nothing back"

    result = await rpc.call("session.undo", {"session_id": sid, "turn_id": turn_id,
                                             "paths": [str(undone)]})
    assert result == {"restored": [str(undone)], "turn_id": turn_id}
    assert undone.read_text() == "undone old\n"
    assert kept.read_text() == "kept new\n", "the other file of the turn stays"
    seen = await other.wait_event(lambda e: e["type"] == "files.restored")
    assert seen["data"] == {"turn_id": turn_id, "paths": [str(undone)], "call_ids": [calls[1]]}
    rows = {m["call_id"]: m["meta"] or {} for m in await transcript(rpc, sid) if m["role"] == "tool"}
    assert [rows[c].get("undone") for c in calls] == [None, True]

    files = files_of((await changes(rpc, sid))["turns"][0])
    assert files["undone.txt"]["restored"] is True
    assert "+undone new" in files["undone.txt"]["diff"], "a restored file shows what the calls did"
    assert files["kept.txt"]["restored"] is False

    again = await rpc.call("session.undo", {"session_id": sid, "turn_id": turn_id,
                                            "paths": [str(undone)]})
    assert again["restored"] == [], "put back once"
    rest = await undo(rpc, sid)
    assert rest == {"restored": [str(kept)], "turn_id": turn_id}, "the whole turn: what is left"
    assert kept.read_text() == "kept old\n"
    restored = [e["data"] for e in rpc.session_events(sid) if e["type"] == "files.restored"]
    assert [d["paths"] for d in restored] == [[str(undone)], [str(kept)]], "nothing twice, nothing empty"


async def test_undo_of_a_path_is_refused_while_a_turn_runs_and_changes_follow_it(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    work = (tmp_path / "work").resolve()
    work.mkdir()
    target = work / "live.txt"
    rpc = await connect()
    sid = await create_session(rpc, cwd=str(work))
    release = threading.Event()
    fake_provider.script(Reply.calls(write_file("live.txt", "written\n")),
                         Reply(deltas=["Still ", "going."], hang_after=1, release=release))
    receipt = await submit(rpc, sid, "write while I watch")
    try:
        done = await rpc.wait_event(lambda e: e["type"] == "tool.complete" and e["session_id"] == sid)
        turn_id = str(done["turn_id"])
        live = await changes(rpc, sid)
        assert [t["turn_id"] for t in live["turns"]] == [turn_id], "the running turn's change"
        assert "+written" in files_of(live["turns"][0])["live.txt"]["diff"]
        with pytest.raises(RpcError) as busy:
            await rpc.call("session.undo", {"session_id": sid, "turn_id": turn_id,
                                            "paths": [str(target)]})
        assert busy.value.code == -32009
        assert target.read_text() == "written\n"
    finally:
        release.set()
    await wait_complete(rpc, receipt["admission_id"])
    result = await rpc.call("session.undo", {"session_id": sid, "turn_id": turn_id,
                                             "paths": [str(target)]})
    assert result["restored"] == [str(target)]
    assert not target.exists(), "the file the turn created is gone"


async def test_changes_need_read_and_per_file_undo_needs_submit_and_bad_params_are_named(
    backend: Backend, connect: Connect, tmp_path: Path
) -> None:
    owner = await connect()
    sid = await create_session(owner, cwd=str(tmp_path))
    tokens = {scope: (await owner.call("token.create", {"scopes": [scope], "label": scope}))["token"]
              for scope in ("read", "submit")}
    reader = await connect(token=tokens["read"], name="reader")
    submitter = await connect(token=tokens["submit"], name="submitter")
    assert (await changes(reader, sid))["turns"] == []
    undo_one: Json = {"session_id": sid, "turn_id": "turn_x", "paths": [str(tmp_path / "a")]}
    for rpc, method, params in ((reader, "session.undo", undo_one),
                                (submitter, "session.changes", {"session_id": sid})):
        with pytest.raises(RpcError) as refused:
            await rpc.call(method, params)
        assert refused.value.code == -32003, method
    bad_params: list[tuple[Json, str]] = [({"limit": 0}, "limit"), ({"limit": 201}, "limit"),
                                          ({"session_id": 5}, "session_id")]
    for params, field in bad_params:
        with pytest.raises(RpcError) as bad:
            await owner.call("session.changes", {"session_id": sid, **params})
        assert (bad.value.code, bad.value.data.get("field")) == (-32602, field), params
    for paths in ([], "a.txt", [7]):
        with pytest.raises(RpcError) as bad:
            await owner.call("session.undo", {**undo_one, "paths": paths})
        assert bad.value.code == -32602, paths
        assert str(bad.value.data.get("field")).startswith("paths"), paths
    with pytest.raises(RpcError) as unchanged:
        await owner.call("session.undo", undo_one)
    assert (unchanged.value.code, unchanged.value.data.get("field")) == (-32602, "paths.0")


@pytest.mark.parametrize("swap", ["symlink", "hard link", "fifo"])
async def test_a_changed_file_swapped_for_a_way_out_is_not_read(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI, tmp_path: Path, swap: str
) -> None:
    """A model that changed a file and then put a symbolic link (or a second name, or a pipe)
    in its place does not get another file's content shown through session.changes, and a
    pipe does not hang the backend: the diff says why the file is not read."""
    work = (tmp_path / "work").resolve()
    work.mkdir()
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET-LINE\n")
    rpc = await connect()
    sid = await create_session(rpc, cwd=str(work))
    await run_turn(rpc, fake_provider, sid, [write_file("notes.txt", "mine\n")])
    notes = work / "notes.txt"
    notes.unlink()
    if swap == "symlink":
        notes.symlink_to(secret)
    elif swap == "hard link":
        os.link(secret, notes)
    else:
        os.mkfifo(notes)
    result = await changes(rpc, sid)
    [turn] = result["turns"]
    diff = files_of(turn)["notes.txt"]["diff"]
    assert "TOP-SECRET" not in diff
    assert diff.startswith("("), diff  # (why it is not read)
    assert (await changes(rpc, sid))["turns"], "the backend still answers"
