"""What goes around the sandbox, tried through a real backend and a hostile scripted model.

Each test is one way out found by an adversary (issue 32): code planted where the
person's own tools run it later, unix sockets outside the session folder, an
approval that did not do what it said, a daemon left by an approved unsandboxed
command, a blocked command reported as done.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from backend.host import landlock_abi
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.procs import unique_sleep, wait_gone, wait_started

from .backend_proc import Backend
from .wire import Json, Rpc, create_session, submit, terminal, transcript, wait_complete

GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com", "GIT_CONFIG_NOSYSTEM": "1"}


def _git(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """git as the person runs it, outside the sandbox (their own HOME's config left out)."""
    env = {**os.environ, **GIT_ENV, "HOME": str(folder.parent)}
    return subprocess.run(["git", *args], cwd=folder, env=env, capture_output=True, text=True, timeout=30)


async def _turn(backend: Backend, fake: FakeOpenAI, cwd: Path, *calls: Json,
                decisions: tuple[str, ...] = ()) -> tuple[list[Json], list[Json]]:
    """One turn making `calls`; answers the approvals it asks with `decisions`, in order.
    Returns (the approvals asked, the tool rows of the transcript)."""
    fake.script(Reply.calls(*calls), Reply(deltas=["Done."]))
    rpc = await Rpc.open(backend.port, backend.token)
    try:
        sid = await create_session(rpc, cwd=str(cwd))
        receipt = await submit(rpc, sid, "go")
        asked: list[Json] = []
        for decision in decisions:
            seen = [a["approval_id"] for a in asked]

            def fresh(e: Json, seen: list[str] = seen) -> bool:
                return bool(e["type"] == "approval.request" and "seq" in e
                            and e["data"]["approval"]["approval_id"] not in seen)

            request = await rpc.wait_event(fresh)
            asked.append(request["data"]["approval"])
            await rpc.call("approval.respond", {"approval_id": asked[-1]["approval_id"],
                                                "decision": decision})
        done = await wait_complete(rpc, receipt["admission_id"])
        assert done["data"]["status"] == "completed", done
        rows = [m for m in await transcript(rpc, sid) if m["role"] == "tool"]
    finally:
        await rpc.close()
    return asked, rows


async def test_code_planted_for_git_direnv_and_editors_never_lands(
    backend: Backend, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    assert _git(project, "init", "-q").returncode == 0
    (project / ".envrc").write_text("export A=1\n")
    (project / ".vscode").mkdir()
    fired = tmp_path / "fired"
    hook = f"#!/bin/sh\ntouch {fired}\n"
    plant = "; ".join([
        f"printf '{hook}' > .git/hooks/pre-commit", "chmod +x .git/hooks/pre-commit",
        f"git config core.fsmonitor 'touch {fired}'",
        f"printf 'touch {fired}\\n' >> .envrc",
        "echo '{}' > .vscode/tasks.json",
        # Around it: the whole .git swapped for one with a hook, or the hooks folder replaced.
        "mv .git .git-old", "mv .git/hooks .git/hooks-old", "ln -sfn /tmp .git/hooks",
    ])
    work = "echo hello > a.txt && git add a.txt && git commit -q -m 'from the sandbox' && echo committed"
    asked, rows = await _turn(
        backend, fake_provider, project, terminal(plant, **{"timeout_s": 30}), terminal(work),
        {"name": "write_file", "arguments": {"path": ".git/hooks/post-checkout", "content": hook}},
        decisions=("deny",))
    assert "Read-only file system" in rows[0]["content"]
    assert rows[0]["meta"]["sandbox_blocked"] == "write"
    assert "committed" in rows[1]["content"], rows[1]  # ordinary git still works
    assert asked[0]["tool"] == "write_file"
    assert "git" in asked[0]["reason"]
    assert not (project / ".git/hooks/post-checkout").exists()
    assert not (project / ".git/hooks/pre-commit").exists()
    assert (project / ".envrc").read_text() == "export A=1\n"
    assert list((project / ".vscode").iterdir()) == []
    # The person's own git afterwards: nothing runs, and the sandbox's commit is there.
    assert _git(project, "status", "--short").returncode == 0
    assert _git(project, "commit", "-q", "--allow-empty", "-m", "mine").returncode == 0
    assert not fired.exists()
    assert "from the sandbox" in _git(project, "log", "--format=%s").stdout


async def test_a_new_repository_with_a_hook_is_named_on_the_card(
    backend: Backend, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    made = "git init -q sub && printf '#!/bin/sh\\nid\\n' > sub/.git/hooks/post-checkout"
    _, rows = await _turn(backend, fake_provider, tmp_path, terminal(made))
    assert "sub/.git/hooks/post-checkout" in rows[0]["meta"]["sandbox_note"]
    assert "sub/.git/hooks/post-checkout" in rows[0]["content"]


@pytest.fixture
def listeners() -> Iterator[list[tuple[str, socket.socket]]]:
    """Unix listeners outside any session folder, where a real desktop has sockets: /run
    (the system bus, docker.sock), /var/tmp, and an abstract one (as X11's
    `@/tmp/.X11-unix/X0`), written `@name`."""
    out = []
    # Abstract sockets: a call without network has its own (a network namespace); one
    # allowed the network is kept from them by a Landlock scope, where the kernel has one.
    for folder in ("/run", "/var/tmp", *(["@"] if landlock_abi() >= 6 else [])):
        name = f"turnkey-test-{uuid.uuid4().hex[:8]}"
        path = f"@{name}" if folder == "@" else f"{folder}/{name}.sock"
        server = socket.socket(socket.AF_UNIX)
        server.bind("\0" + name if folder == "@" else path)
        server.listen()
        server.setblocking(False)
        out.append((path, server))
    yield out
    for path, server in out:
        server.close()
        if not path.startswith("@"):
            os.unlink(path)


async def test_unix_listeners_outside_the_session_folder_hear_nothing(
    backend: Backend, fake_provider: FakeOpenAI, tmp_path: Path, listeners: list[tuple[str, socket.socket]]
) -> None:
    reach = ("import socket, sys\n"
             "for p in sys.argv[1:]:\n"
             "    s = socket.socket(socket.AF_UNIX)\n"
             "    try:\n"
             "        s.connect(chr(0) + p[1:] if p[0] == '@' else p)\n"
             "        s.sendall(b'hello'); print(p, 'CONNECTED')\n"
             "    except OSError as e:\n"
             "        print(p, 'refused', e.errno)\n")
    paths = " ".join(p for p, _ in listeners)
    _, rows = await _turn(backend, fake_provider, tmp_path,
                          terminal(f"python3 -c \"$(cat <<'EOF'\n{reach}EOF\n)\" {paths}"),
                          terminal(f"python3 -c \"$(cat <<'EOF'\n{reach}EOF\n)\" {paths}", network=True),
                          decisions=("once",))
    for row in rows:
        assert "CONNECTED" not in row["content"], row["content"]
        assert row["content"].count("refused") == len(listeners), row["content"]
    for _, server in listeners:
        with pytest.raises(BlockingIOError):
            server.accept()


async def test_an_approved_outside_delete_deletes_and_a_denied_one_does_not(
    backend: Backend, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    session = tmp_path / "session"
    session.mkdir()
    kept, victim = tmp_path / "kept", tmp_path / "victim"
    for folder in (kept, victim):
        folder.mkdir()
        (folder / "file").write_text("x")
    asked, rows = await _turn(backend, fake_provider, session,
                              terminal(f"rm -rf ../{victim.name}"), terminal(f"rm -rf ../{kept.name}"),
                              decisions=("once", "deny"))
    assert f"runs with {tmp_path} writable" in asked[0]["reason"], asked[0]
    assert not victim.exists()  # what the person approved is what happened
    assert rows[0]["status"] == "ok"
    assert f"ran with {tmp_path} writable" in rows[0]["meta"]["sandbox_note"]
    assert kept.is_dir()
    assert (kept / "file").exists()
    assert rows[1]["status"] == "denied"


async def test_a_write_the_sandbox_blocks_is_reported_as_blocked(
    backend: Backend, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    session = tmp_path / "session"
    session.mkdir()
    outside = Path.home() / f".turnkey-test-{uuid.uuid4().hex[:8]}"
    try:
        _, rows = await _turn(backend, fake_provider, session,
                              terminal(f"touch {outside} || true"),
                              terminal("python3 -c 'import urllib.request as u; u.urlopen(\"http://example.com\")'"))
    finally:
        outside.unlink(missing_ok=True)
    assert not outside.exists()
    write, net = rows
    assert write["status"] == "error"  # exit 0, yet blocked
    assert write["meta"]["sandbox_blocked"] == "write"
    assert "sandbox=false" in write["content"]
    assert net["meta"]["sandbox_blocked"] == "network"
    assert "network=true" in net["content"]


async def test_a_daemon_of_an_approved_unsandboxed_call_ends_with_it_and_never_sees_the_token(
    backend: Backend, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    mine = unique_sleep(30)
    stolen, outside = tmp_path / "stolen", tmp_path / "outside"
    data = backend.data_dir
    command = (f"setsid nohup sh -c '{mine}; cat {data}/backend.json > {stolen}' >/dev/null 2>&1 & "
               f"cat {data}/backend.json; ls -A {data}; touch {outside}; echo started")
    session = tmp_path / "session"
    session.mkdir()
    asked, rows = await _turn(backend, fake_provider, session, terminal(command, sandbox=False),
                              decisions=("once",))
    assert "outside the sandbox" in asked[0]["reason"]
    assert "started" in rows[0]["content"]
    assert backend.token not in rows[0]["content"]
    assert "config.toml" not in rows[0]["content"]  # the data folder looks empty from there
    assert outside.exists()  # it did leave the sandbox, as approved
    assert "outside the sandbox" in rows[0]["meta"]["sandbox_note"]
    assert await wait_gone(mine) == []  # the daemon ended with the call
    await asyncio.sleep(0.2)
    assert not stolen.exists()


async def test_the_daemon_check_sees_a_running_daemon(
    backend: Backend, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    """The check above can fail: a call that is still running has its daemon visible."""
    mine = unique_sleep(30)
    fake_provider.script(Reply.calls(terminal(f"setsid nohup {mine}1 >/dev/null 2>&1 & {mine}2",
                                              sandbox=False)))
    rpc = await Rpc.open(backend.port, backend.token)
    try:
        sid = await create_session(rpc, cwd=str(tmp_path))
        await submit(rpc, sid, "go")
        request = await rpc.wait_event(lambda e: e["type"] == "approval.request")
        await rpc.call("approval.respond", {"approval_id": request["data"]["approval"]["approval_id"],
                                            "decision": "once"})
        assert await wait_started(f"{mine}1", f"{mine}2")
        await rpc.call("turn.interrupt", {"session_id": sid})
    finally:
        await rpc.close()
    assert await wait_gone(mine) == []
