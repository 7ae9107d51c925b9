"""A session whose folder is the home folder: the sandbox's one writable folder is then every
file the person has, so smart mode asks before an interpreter runs, saying why, and every
summary of the session says so in `folder_warning` (issue 32, item 4).  HOME is a temp folder
here, with a `.ssh` worth keeping."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.fakes.openai_server import FakeOpenAI, Reply

from .backend_proc import BackendFactory
from .test_sandbox_turns import answer
from .wire import Json, Rpc, create_session, submit, terminal, transcript, wait_complete

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


async def test_every_summary_of_a_home_session_warns_and_a_project_session_does_not(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    project = home / "project"
    project.mkdir(parents=True)
    backend = backend_factory(fake_provider.base_url, start=False, extra_env={"HOME": str(home)})
    backend.start()
    rpc = await Rpc.open(backend.port, backend.token)
    watcher = await Rpc.open(backend.port, backend.token, name="watcher")
    try:
        made: dict[str, Json] = {}
        for name, params in (("home", {}), ("above", {"cwd": str(tmp_path)}),
                             ("project", {"cwd": str(project)})):
            made[name] = (await rpc.call("session.create", {"title": name, **params}))["session"]
        assert made["home"]["cwd"] == str(home), "the default folder is the home folder"
        assert made["home"]["folder_warning"].startswith(
            "This session's folder is your home folder: the sandbox lets the agent's commands "
            "change every file in it."), made["home"]
        assert f"{tmp_path}, which holds your home folder" in made["above"]["folder_warning"]
        assert "folder_warning" not in made["project"], "an ordinary folder: left out"

        async def summaries(sid: str) -> list[Json]:
            """The session as session.get, session.list, and the session.created and (after a
            rename) session.updated broadcasts show it."""
            await rpc.call("session.update", {"session_id": sid, "title": f"{sid} renamed"})
            got = (await rpc.call("session.get", {"session_id": sid}))["session"]
            [listed] = [s for s in (await rpc.call("session.list", {}))["sessions"]
                        if s["session_id"] == sid]
            created = await watcher.wait_event(
                lambda e: e["type"] == "session.created" and e["session_id"] == sid)
            updated = await watcher.wait_event(
                lambda e: e["type"] == "session.updated" and e["session_id"] == sid
                and e["data"]["session"]["title"].endswith("renamed"))
            return [got, listed, created["data"]["session"], updated["data"]["session"]]

        for name, session in made.items():
            warnings = {s.get("folder_warning") for s in await summaries(session["session_id"])}
            assert warnings == {session.get("folder_warning")}, (name, warnings)
        # Words only: the transcript of a home session stays empty.
        assert await transcript(rpc, made["home"]["session_id"]) == []
    finally:
        await watcher.close()
        await rpc.close()


def test_turnkey_chat_says_so_on_stderr_for_a_home_session_and_not_for_a_project(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    project = home / "project"
    project.mkdir(parents=True)
    backend = backend_factory(fake_provider.base_url, start=False, extra_env={"HOME": str(home)})
    backend.start()
    fake_provider.default = Reply(deltas=["Hi."])
    cli = [sys.executable, "-m", "desktop.cli", "--data-dir", str(backend.data_dir), "chat"]

    def chat(*args: str) -> subprocess.CompletedProcess[str]:
        out = subprocess.run([*cli, *args], env=backend.env(), capture_output=True, text=True,
                             timeout=60, check=False)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "Hi.", "the answer alone on stdout"
        return out

    warning = "[This session's folder is your home folder: the sandbox lets the agent's commands"
    at_home = chat("--cwd", str(home), "hello")
    assert warning in at_home.stderr, at_home.stderr
    sid = at_home.stderr.split("[session ", 1)[1].split("]", 1)[0]
    again = chat("--session", sid, "and again")
    assert warning in again.stderr, "a session continued says it too"
    assert "session's folder" not in chat("--cwd", str(project), "hello").stderr
