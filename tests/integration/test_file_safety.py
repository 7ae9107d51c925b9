"""The file tools end to end against escapes: a symlink made by a terminal call of the same
batch, and reads of the data folder (the owner token in backend.json), with the real backend
and the scripted fake model."""

from __future__ import annotations

import asyncio
import itertools
import json
from pathlib import Path
from typing import Any

from tests.fakes.openai_server import FakeOpenAI, Reply

from .backend_proc import Backend, BackendFactory
from .wire import Json, Rpc, create_session, is_event, submit, terminal, transcript, wait_complete

Call = dict[str, Any]


def write_file(path: str, content: str) -> Call:
    return {"name": "write_file", "arguments": {"path": path, "content": content}}


def read_file(path: str) -> Call:
    return {"name": "read_file", "arguments": {"path": path}}


def list_dir(path: str) -> Call:
    return {"name": "list_dir", "arguments": {"path": path}}


def requests(rpc: Rpc, sid: str) -> list[Json]:
    return [e["data"]["approval"] for e in rpc.session_events(sid) if e["type"] == "approval.request"]


async def answer_requests(rpc: Rpc, sid: str) -> None:
    """A person who lets commands run (where no sandbox exists they ask) and says no to every
    file change that asks, until cancelled."""
    for answered in itertools.count():
        def asked(n: int = answered) -> bool:
            return len(requests(rpc, sid)) > n

        await rpc.wait_until(asked, timeout=3600, what="approval.request")
        approval = requests(rpc, sid)[answered]
        decision = "once" if approval["tool"] == "terminal" else "deny"
        await rpc.call("approval.respond", {"approval_id": approval["approval_id"], "decision": decision})


async def tool_rows(rpc: Rpc, sid: str) -> list[Json]:
    return [m for m in await transcript(rpc, sid) if m["role"] == "tool"]


def assert_never_leaked(backend: Backend, fake: FakeOpenAI, rows: list[Json]) -> None:
    assert backend.token
    assert not any(backend.token in row["content"] for row in rows)
    assert not any(backend.token in json.dumps(r.body) for r in fake.snapshot())


async def test_smart_mode_same_batch_symlink_and_data_folder_reads_are_refused(
    backend: Backend, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    work, outside = tmp_path / "work", tmp_path / "outside"
    work.mkdir()
    outside.mkdir()
    data = backend.data_dir.resolve()
    fake_provider.script(
        # Calls start in order but run together: the write may run before or after the link.
        Reply.calls(terminal(f"ln -s {outside} link; ln -s {outside} link2; ln -s {data} data"),
                    write_file("link/x.txt", "escaped"), read_file(f"{data}/backend.json")),
        Reply.calls(write_file("link2/y.txt", "escaped"), read_file("data/backend.json"),
                    list_dir("data")),
        Reply(deltas=["Done."]),
    )
    rpc = await Rpc.open(backend.port, backend.token)
    sid = await create_session(rpc, cwd=str(work))
    person = asyncio.create_task(answer_requests(rpc, sid))
    try:
        receipt = await submit(rpc, sid, "go")
        done = await wait_complete(rpc, receipt["admission_id"])
        assert done["data"]["status"] == "completed", done
        rows = await tool_rows(rpc, sid)
    finally:
        person.cancel()
        await asyncio.gather(person, return_exceptions=True)
        await rpc.close()
    assert list(outside.iterdir()) == [], "nothing was written outside"
    _, first_write, first_read, second_write, second_read, listing = rows
    print(f"the same-batch write: {first_write['status']}: {first_write['content']}")
    if first_write["status"] == "ok":  # it ran before `ln`: it made a real folder
        assert not (work / "link").is_symlink()
        assert (work / "link" / "x.txt").read_text() == "escaped"
    else:  # the guard saw the link and asked (denied), or the run saw it and refused
        assert first_write["status"] in ("denied", "error"), first_write
        assert ("outside the session folder" in first_write["content"]
                or "became a symlink" in first_write["content"]), first_write
    assert second_write["status"] == "denied"
    assert "the path leads there through a symlink" in second_write["content"]
    for read in (first_read, second_read, listing):
        assert read["status"] == "denied", read
        assert "data folder" in read["content"]
    assert all(r["tool"] in ("terminal", "write_file") for r in requests(rpc, sid)), "reads never ask"
    assert_never_leaked(backend, fake_provider, rows)


async def test_ask_mode_a_write_approved_before_a_symlink_appeared_is_not_written_through_it(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    backend = backend_factory(fake_provider.base_url, '[approvals]\nmode = "ask"\n')
    work, outside = tmp_path / "work", tmp_path / "outside"
    work.mkdir()
    outside.mkdir()
    fake_provider.script(
        Reply.calls(terminal(f"ln -s {outside} link"), write_file("link/x.txt", "escaped"),
                    read_file(str(backend.data_dir / "backend.json"))),
        Reply(deltas=["Done."]),
    )
    rpc = await Rpc.open(backend.port, backend.token)
    try:
        sid = await create_session(rpc, cwd=str(work))
        receipt = await submit(rpc, sid, "go")
        await rpc.wait_until(lambda: len(requests(rpc, sid)) == 2, what="two approval requests")
        ln, write = (next(r for r in requests(rpc, sid) if r["tool"] == tool)
                     for tool in ("terminal", "write_file"))
        assert write["reason"] == "every file change asks in ask mode (write_file)"
        # The write was judged (and is approved) while `link` did not exist yet: inside.
        await rpc.call("approval.respond", {"approval_id": ln["approval_id"], "decision": "once"})
        await rpc.wait_event(lambda e: is_event("tool.complete", receipt["admission_id"])(e)
                             and e["data"]["call_id"] == ln["call_id"])
        assert (work / "link").is_symlink()
        await rpc.call("approval.respond", {"approval_id": write["approval_id"], "decision": "once"})
        done = await wait_complete(rpc, receipt["admission_id"])
        assert done["data"]["status"] == "completed", done
        rows = await tool_rows(rpc, sid)
    finally:
        await rpc.close()
    assert list(outside.iterdir()) == [], "nothing was written outside"
    _, written, read = rows
    assert written["status"] == "error"
    assert f"now leads to {outside.resolve()}, not to {work.resolve() / 'link'}" in written["content"]
    assert read["status"] == "denied"
    assert "data folder" in read["content"]
    assert len(requests(rpc, sid)) == 2, "the read was refused without asking"
    assert_never_leaked(backend, fake_provider, rows)
