"""A session whose folder is the home folder: the sandbox's one writable folder is then every
file the person has, so smart mode asks before an interpreter runs, saying why (issue 32,
item 4).  HOME is a temp folder here, with a `.ssh` worth keeping."""

from __future__ import annotations

from pathlib import Path

from tests.fakes.openai_server import FakeOpenAI, Reply

from .backend_proc import BackendFactory
from .test_sandbox_turns import answer
from .wire import Rpc, create_session, submit, terminal, transcript, wait_complete

WIPE = "python3 -c \"import shutil; shutil.rmtree('.ssh')\""


async def test_an_interpreter_asks_in_a_home_session_and_a_denial_keeps_the_files(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("private")
    backend = backend_factory(fake_provider.base_url, start=False, extra_env={"HOME": str(home)})
    backend.start()
    fake_provider.script(Reply.calls(terminal(WIPE)), Reply(deltas=["Could not."]),
                         Reply.calls(terminal(WIPE)), Reply(deltas=["Done."]))
    rpc = await Rpc.open(backend.port, backend.token)
    try:
        sid = await create_session(rpc, cwd=str(home))
        receipt = await submit(rpc, sid, "clean up my keys")
        [asked] = await answer(rpc, 1, "deny")
        assert "runs python3, an interpreter, in a session whose folder is your home folder" \
            in asked["reason"], asked
        await wait_complete(rpc, receipt["admission_id"])
        assert (home / ".ssh" / "id_ed25519").exists(), "denied: nothing ran"

        # Approved, it runs (and the person was told what it was).
        receipt = await submit(rpc, sid, "do it")
        second = await rpc.wait_event(
            lambda e: e["type"] == "approval.request" and "seq" in e
            and e["data"]["approval"]["approval_id"] != asked["approval_id"])
        await rpc.call("approval.respond", {
            "approval_id": second["data"]["approval"]["approval_id"], "decision": "once"})
        done = await wait_complete(rpc, receipt["admission_id"])
        assert done["data"]["status"] == "completed", done
        assert not (home / ".ssh").exists()
    finally:
        await rpc.close()


async def test_a_project_session_runs_interpreters_without_asking(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    project = home / "project"
    project.mkdir(parents=True)
    backend = backend_factory(fake_provider.base_url, start=False, extra_env={"HOME": str(home)})
    backend.start()
    fake_provider.script(Reply.calls(terminal("python3 -c \"print(6 * 7)\"")),
                         Reply(deltas=["42."]))
    rpc = await Rpc.open(backend.port, backend.token)
    try:
        sid = await create_session(rpc, cwd=str(project))
        done = await wait_complete(rpc, (await submit(rpc, sid, "compute"))["admission_id"])
        assert done["data"]["status"] == "completed", done
        [tool] = [m for m in await transcript(rpc, sid) if m["role"] == "tool"]
        assert "42" in tool["content"]
        assert not [m for m in await transcript(rpc, sid) if m["role"] == "system_note"]
    finally:
        await rpc.close()
