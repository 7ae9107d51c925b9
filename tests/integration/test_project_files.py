"""Project instruction files (AGENTS.md, TURNKEY.md) that a command turned into a way out.

The backend reads them itself, outside the sandbox, into the next system prompt it builds.
A sandboxed command cannot read the provider key or the owner token, but it can make
AGENTS.md a symbolic link to where they are (the backend's /proc/self/environ, the data
folder), or a FIFO that would hang the backend.  The model here is scripted to do just that,
through the real sandbox; then a new session in the same folder is asked something.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.fakes.openai_server import FakeOpenAI, Reply

from .backend_proc import BackendFactory
from .test_delegate import Script, child_ids, delegate, first_user_text
from .test_sandbox_turns import KEY, _keyed_backend
from .wire import Rpc, create_session, run_turn, terminal, transcript


async def test_linked_project_files_send_no_secret_and_are_reported(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, tmp_path: Path,
) -> None:
    backend = _keyed_backend(backend_factory, fake_provider)
    folder = tmp_path / "project"
    folder.mkdir()
    plants = [
        "ln -s /proc/self/environ AGENTS.md",
        f"ln -s {backend.data_dir}/backend.json TURNKEY.md",
    ]
    fake_provider.script(Reply.calls(*[terminal(p) for p in plants]), Reply(deltas=["Linked."]),
                         Reply(deltas=["Hello."]))
    rpc = await Rpc.open(backend.port, backend.token)
    try:
        first = await create_session(rpc, cwd=str(folder))
        _, done = await run_turn(rpc, first, "set up the project")
        assert done["data"]["status"] == "completed", done
        assert (folder / "AGENTS.md").is_symlink(), "the sandboxed command made the link"
        assert (folder / "TURNKEY.md").is_symlink()

        second = await create_session(rpc, cwd=str(folder))  # its prompt is built now
        _, done = await run_turn(rpc, second, "hi")
        assert done["data"]["status"] == "completed", done
        rows = [m for m in await transcript(rpc, second)
                if m["role"] == "system_note" and m["note_kind"] == "notice"]
        notes = [m["content"] for m in rows]
        # Rows of the turn that built the prompt: a window shows them with its stored rows.
        assert {m["turn_id"] for m in rows} == {done["turn_id"]}
    finally:
        await rpc.close()

    sent = json.dumps([request.body for request in fake_provider.snapshot()])
    assert KEY not in sent, "the provider key went to the model through AGENTS.md"
    assert "TK_TEST_PROVIDER_KEY" not in sent
    assert backend.token not in sent, "the owner token went to the model through TURNKEY.md"
    assert len(notes) == 2, notes
    assert notes[0].startswith("AGENTS.md in this folder is a symbolic link (to /proc/self/environ)")
    assert "TURNKEY.md in this folder is a symbolic link" in notes[1]


async def test_a_fifo_named_agents_md_does_not_hang_the_backend(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, tmp_path: Path,
) -> None:
    backend = _keyed_backend(backend_factory, fake_provider)
    folder = tmp_path / "project"
    folder.mkdir()
    fake_provider.script(Reply.calls(terminal("mkfifo AGENTS.md")), Reply(deltas=["Made."]),
                         Reply(deltas=["Still here."]))
    rpc = await Rpc.open(backend.port, backend.token)
    try:
        _, done = await run_turn(rpc, await create_session(rpc, cwd=str(folder)), "make it")
        assert done["data"]["status"] == "completed", done
        second = await create_session(rpc, cwd=str(folder))
        _, done = await run_turn(rpc, second, "hi", timeout=30)
        assert done["data"]["text"] == "Still here.", "the backend read no FIFO"
        [note] = [m["content"] for m in await transcript(rpc, second)
                  if m["role"] == "system_note"]
        assert "AGENTS.md in this folder is not a plain file" in note
    finally:
        await rpc.close()


async def test_a_plain_agents_md_is_still_read(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, tmp_path: Path,
) -> None:
    backend = _keyed_backend(backend_factory, fake_provider)
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "AGENTS.md").write_text("Always answer in French.\n")
    fake_provider.script(Reply(deltas=["Bonjour."]))
    rpc = await Rpc.open(backend.port, backend.token)
    try:
        _, done = await run_turn(rpc, await create_session(rpc, cwd=str(folder)), "hi")
        assert done["data"]["status"] == "completed", done
    finally:
        await rpc.close()
    [request] = fake_provider.snapshot()
    system = request.body["messages"][0]["content"]
    assert "Project instructions from AGENTS.md:\nAlways answer in French." in system


async def test_a_delegate_child_in_the_same_turn_gets_no_secret_either(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, tmp_path: Path,
) -> None:
    backend = _keyed_backend(backend_factory, fake_provider)
    folder = tmp_path / "project"
    folder.mkdir()
    script = Script(fake_provider, ["PLANT", "CHILD-TASK"])
    script.add("PLANT", Reply.calls(terminal("ln -s /proc/self/environ AGENTS.md")),
               Reply.calls(delegate("CHILD-TASK: read the project notes")), Reply(deltas=["Done."]))
    script.add("CHILD-TASK", Reply(deltas=["Read them."]))
    rpc = await Rpc.open(backend.port, backend.token)
    try:
        sid = await create_session(rpc, cwd=str(folder))
        _, done = await run_turn(rpc, sid, "PLANT and delegate")
        assert done["data"]["status"] == "completed", done
        [child] = child_ids(rpc, sid).values()
        notes = [m["content"] for m in await transcript(rpc, child) if m["role"] == "system_note"]
    finally:
        await rpc.close()
    requests = fake_provider.snapshot()
    assert any("CHILD-TASK" in first_user_text(r) for r in requests), "the child asked the model"
    sent = json.dumps([request.body for request in requests])
    assert KEY not in sent, "the provider key went to the model through the child's AGENTS.md"
    assert backend.token not in sent
    assert any(note.startswith("AGENTS.md in this folder is a symbolic link") for note in notes)
