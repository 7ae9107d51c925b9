"""The sandbox under attack: real commands in real bubblewrap, as root and as an unprivileged user.

Every attack runs through `Terminal.run` directly, with no guard in front: what
is checked here is what the sandbox alone holds, whatever the policy would say.
Each attack has a control that shows the same command does its damage where the
sandbox allows writes (the session folder), so a test cannot pass by every
command simply failing.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import socket
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from backend.tools.base import ToolContext
from backend.tools.sandbox import ALLOWED_ENV, Sandbox, child_env, command_argv, probe
from backend.tools.terminal import Terminal
from tests.procs import unique_sleep, wait_gone, wait_running

# {D}: a folder with a file `keep` in it; each attack tries to delete, move, empty or change it.
ATTACKS: dict[str, str] = {
    "rm": "rm -rf {D}",
    "printf substitution": "$(printf rm) -rf {D}",
    "variable": "a=rm; $a -rf {D}",
    "backticks": "`echo rm` -rf {D}",
    "base64 into sh": "echo {B64} | base64 -d | sh",
    "script written then run": "printf 'rm -rf {D}\\n' > ./s.sh; sh ./s.sh",
    "python rmtree": "python3 -c \"import shutil; shutil.rmtree('{D}')\"",
    "python unlink": "python3 -c \"import os; os.unlink('{D}/keep')\"",
    "perl rmtree": "perl -MFile::Path=remove_tree -e 'remove_tree(\"{D}\")'",
    "find -delete": "find {D} -delete",
    "find -exec": "find {D} -type f -exec rm {{}} +",
    "mv": "mv {D} {D}.moved",
    "truncate by redirect": ": > {D}/keep",
    "truncate": "truncate -s 0 {D}/keep",
    "cp over": "cp /dev/null {D}/keep",
    "tee": "tee {D}/keep < /dev/null",
    "dd": "dd if=/dev/zero of={D}/keep bs=1 count=1 conv=notrunc",
    "chmod": "chmod 000 {D}/keep",
    "symlink over": "ln -sf /dev/null {D}/keep",
    "new file": "touch {D}/new",
    "eval split": "eval \"r\"\"m -rf {D}\"",
    "brace expansion": "bash -c '{{rm,-rf,{D}}}'",
    "xargs": "echo {D} | xargs rm -rf",
    "setsid nohup": "setsid nohup rm -rf {D} >/dev/null 2>&1 & wait",
    "sh -c": "sh -c 'rm -rf {D}'",
    "cd then glob": "cd {D} && rm -f ./*",
    "git clean": "cd {D} && git init -q . && git clean -fdxq",
}


def _make_target(folder: Path) -> None:
    if folder.is_symlink() or folder.is_file():
        folder.unlink()
    elif folder.exists():
        shutil.rmtree(folder)
    for moved in folder.parent.glob(folder.name + ".moved"):
        shutil.rmtree(moved)
    folder.mkdir(parents=True)
    (folder / "keep").write_text("precious\n")


def _intact(folder: Path) -> bool:
    keep = folder / "keep"
    try:
        return (folder.is_dir() and not keep.is_symlink() and keep.is_file()
                and (keep.stat().st_mode & 0o777) != 0 and keep.read_text() == "precious\n"
                and sorted(p.name for p in folder.iterdir()) == ["keep"])
    except OSError:  # made unreadable (chmod 000 by an unprivileged owner)
        return False


async def run_attacks(base: Path) -> dict[str, Any]:
    """Every attack against a folder outside the session folder, and its control inside it.
    Returns {"outside": {name: intact}, "inside": {name: intact}, ...}; runs as whoever calls it."""
    session, outside, data = base / "session", base / "outside", base / "data"
    for folder in (session, data):
        folder.mkdir(parents=True, exist_ok=True)
    (data / "backend.json").write_text('{"token": "owner-token-value"}')
    found = await probe()
    assert found.available, found.reason
    terminal = Terminal(Sandbox(found, data, lambda: (True, False)))
    env = child_env(os.environ, [], [])
    ctx = ToolContext(session, "ses_t", "turn_t", "call_t", env)
    out: dict[str, Any] = {"outside": {}, "inside": {}}
    for where, target in (("outside", outside / "keepdir"), ("inside", session / "keepdir")):
        for name, template in ATTACKS.items():
            _make_target(target)
            script = f"rm -rf {target}\n".encode()
            command = template.format(D=target, B64=base64.b64encode(script).decode())
            await terminal.run({"command": command, "timeout_s": 30}, ctx)
            out[where][name] = _intact(target)
    reading = await terminal.run({"command": f"ls -A {data}; cat {data}/backend.json"}, ctx)
    out["data_listing"] = reading.content
    environ = await terminal.run({"command": "cat /proc/*/environ | tr '\\0' '\\n'; "
                                             "tr '\\0' '\\n' < /proc/$PPID/environ; ls /proc"}, ctx)
    out["environ"] = environ.content
    return out


def _as_nobody(base: Path) -> dict[str, Any]:
    """run_attacks in a forked child that dropped to `nobody` (every module is loaded already,
    so the child needs no access to the interpreter's files)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 1
        try:
            os.close(read_end)
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            os.environ["HOME"] = str(base)
            os.environ["PATH"] = "/usr/local/bin:/usr/bin:/bin"  # the venv may sit in root's home
            result = asyncio.run(run_attacks(base))
            os.write(write_end, json.dumps(result).encode())
            code = 0
        except BaseException as exc:
            import traceback
            os.write(write_end, json.dumps({"error": repr(exc), "tb": traceback.format_exc()}).encode())
        finally:
            os._exit(code)
    os.close(write_end)
    chunks = []
    while chunk := os.read(read_end, 65536):
        chunks.append(chunk)
    os.close(read_end)
    os.waitpid(pid, 0)
    answer: dict[str, Any] = json.loads(b"".join(chunks))
    return answer


@pytest.fixture
def shared_base() -> Iterator[Path]:
    """A folder `nobody` may use (pytest's tmp_path is closed to other users), not under /tmp
    or /var/tmp: the sandbox has its own of both, which would hide it, and the attacks must
    find their target.  As root: /srv (every Debian has it); else the user's own home."""
    parent = "/srv" if os.geteuid() == 0 and os.path.isdir("/srv") else str(Path.home())
    base = Path(tempfile.mkdtemp(prefix="turnkey-sandbox-", dir=parent))
    base.chmod(0o777)
    yield base
    shutil.rmtree(base, ignore_errors=True)


def _check(result: dict[str, Any]) -> None:
    assert "error" not in result, result
    escaped = [name for name, ok in result["outside"].items() if not ok]
    assert not escaped, f"attacks that changed a folder outside the session: {escaped}"
    # The controls: the same commands do their damage in the session folder, so the attacks
    # are real ones (all but the new file and chmod-by-owner cases change `keep`).
    harmless_inside = [name for name, ok in result["inside"].items() if ok]
    assert harmless_inside == [], f"attacks that did nothing even inside the session: {harmless_inside}"
    assert "owner-token-value" not in result["data_listing"]
    assert "No such file" in result["data_listing"]
    assert "TURNKEY_SANDBOX_TEST_SECRET" not in result["environ"]


@pytest.fixture
def secret_in_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """A key in the test process's own environment: the sandbox's parent, like the backend."""
    monkeypatch.setenv("TURNKEY_SANDBOX_TEST_SECRET", "sk-live-do-not-leak")


async def test_every_attack_fails_outside_the_session_folder_and_works_inside(
    shared_base: Path, secret_in_env: None
) -> None:
    _check(await run_attacks(shared_base))


def test_the_same_as_an_unprivileged_user(shared_base: Path, secret_in_env: None) -> None:
    unprivileged = os.geteuid() != 0  # then the test run itself is the unprivileged user
    _check(asyncio.run(run_attacks(shared_base)) if unprivileged else _as_nobody(shared_base))


# ---- what a call sees: processes, environment, network, mounts ------------------------------


@pytest.fixture
async def terminal(tmp_path: Path) -> tuple[Terminal, ToolContext, Path]:
    data = tmp_path / "data"
    data.mkdir()
    session = tmp_path / "session"
    session.mkdir()
    found = await probe()
    assert found.available, found.reason
    settings = {"network": False}
    box = Sandbox(found, data, lambda: (True, settings["network"]))
    ctx = ToolContext(session, "ses_t", "turn_t", "call_t", child_env(os.environ, [], []))
    return Terminal(box), ctx, data


async def test_an_interrupt_ends_detached_children_too(terminal: tuple[Terminal, ToolContext, Path]) -> None:
    tool, ctx, _ = terminal
    mine = unique_sleep(73)
    command = f"setsid nohup {mine}7 >/dev/null 2>&1 & (trap '' HUP TERM; {mine}8) & {mine}9"
    task = asyncio.create_task(tool.run({"command": command, "timeout_s": 60}, ctx))
    assert len(await wait_running(mine, 3)) >= 3, "the sleeps never started"
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await wait_gone(mine) == []


async def test_a_finished_command_leaves_nothing_running(
    terminal: tuple[Terminal, ToolContext, Path],
) -> None:
    tool, ctx, _ = terminal
    mine = unique_sleep(74)
    result = await tool.run({"command": f"setsid {mine} >/dev/null 2>&1 & echo started"}, ctx)
    assert "started" in result.content
    assert await wait_gone(mine) == []


class _Listener:
    """A TCP server on the host's loopback that counts connections."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self.sock.close()


async def test_the_network_is_off_unless_the_call_asks_for_it(
    terminal: tuple[Terminal, ToolContext, Path],
) -> None:
    tool, ctx, _ = terminal
    server = _Listener()
    try:
        connect = f"python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {server.port}), 5)'"
        off = await tool.run({"command": connect}, ctx)
        assert off.status == "error", off.content
        assert "Connection refused" in off.content, off.content
        assert server.accepted == 0
        on = await tool.run({"command": connect, "network": True}, ctx)
        assert on.status == "ok", on.content
        assert server.accepted == 1
    finally:
        server.close()


async def test_no_process_outside_the_call_is_visible(terminal: tuple[Terminal, ToolContext, Path]) -> None:
    tool, ctx, _ = terminal
    result = await tool.run({"command": "ls /proc | grep -c '^[0-9]'; kill -0 1 && echo pid1; "
                                        f"kill -0 {os.getpid()} 2>&1 || echo no-backend"}, ctx)
    count = int(result.content.split("stdout:\n")[1].splitlines()[0])
    assert count <= 5, result.content  # bwrap's init, the lifeline's watcher, the shell, ls, grep
    assert "no-backend" in result.content


async def test_the_data_folder_is_hidden_even_inside_the_session_folder(tmp_path: Path) -> None:
    home = tmp_path / "home"
    data = home / ".local" / "share" / "turnkey"
    data.mkdir(parents=True)
    (data / "backend.json").write_text("owner-token-value")
    (home / "work.txt").write_text("mine")
    found = await probe()
    tool = Terminal(Sandbox(found, data, lambda: (True, False)))
    ctx = ToolContext(home, "s", "t", "c", child_env(os.environ, [], []))
    result = await tool.run({"command": "cat work.txt; grep -r owner . ; ls -A .local/share/turnkey; "
                                        "touch .local/share/turnkey/x; echo done"}, ctx)
    assert "mine" in result.content
    assert "done" in result.content
    assert "owner-token-value" not in result.content
    assert not (data / "x").exists()
    assert (data / "backend.json").read_text() == "owner-token-value"


async def test_a_session_folder_under_tmp_is_still_writable(tmp_path: Path) -> None:
    session = Path(tempfile.mkdtemp(prefix="turnkey-session-", dir="/tmp"))
    try:
        found = await probe()
        tool = Terminal(Sandbox(found, tmp_path / "data", lambda: (True, False)))
        ctx = ToolContext(session, "s", "t", "c", child_env(os.environ, [], []))
        result = await tool.run({"command": "echo hi > made.txt && touch /tmp/private && ls /tmp"}, ctx)
        assert result.status == "ok", result.content
        assert (session / "made.txt").read_text() == "hi\n"
        assert not await asyncio.to_thread(os.path.exists, "/tmp/private"), "the sandbox's /tmp is its own"
    finally:
        shutil.rmtree(session)


def test_the_environment_is_an_allowlist() -> None:
    source = {"PATH": "/bin", "HOME": "/h", "LC_ALL": "C", "OPENAI_API_KEY": "sk-1", "MY_TOKEN": "t",
              "TURNKEY_HOME": "/d", "TURNKEY_X": "1", "AWS_SECRET_ACCESS_KEY": "a", "EXTRA": "e",
              "DBUS_SESSION_BUS_ADDRESS": "unix:path=/run/user/0/bus"}
    env = child_env(source, ["EXTRA", "TURNKEY_HOME", "MY_TOKEN"], ["MY_TOKEN"])
    assert env == {"PATH": "/bin", "HOME": "/h", "LC_ALL": "C", "EXTRA": "e"}
    assert "OPENAI_API_KEY" not in ALLOWED_ENV


def test_mounts_come_in_the_order_that_makes_them_safe(tmp_path: Path) -> None:
    session = tmp_path / "home"
    data = session / ".local" / "share" / "turnkey"
    data.mkdir(parents=True)
    argv = command_argv("/usr/bin/bwrap", "true", workdir=session, session_dir=session, data_dir=data,
                        env={}, network=False)
    tmp, bind, hide = argv.index("/tmp"), argv.index(str(session)), argv.index(str(data))
    assert tmp < bind < hide, argv  # a later mount covers an earlier one
    assert "--unshare-net" in argv
    assert "--die-with-parent" in argv
    assert "--unshare-pid" in argv
    assert "--clearenv" in argv
    assert argv[argv.index("--cap-drop") + 1] == "ALL"
    assert "--unshare-net" not in command_argv("/usr/bin/bwrap", "true", workdir=session,
                                               session_dir=session, data_dir=data, env={}, network=True)


async def test_timeout_still_kills_the_whole_sandbox(terminal: tuple[Terminal, ToolContext, Path]) -> None:
    tool, ctx, _ = terminal
    mine = unique_sleep(75)
    result = await tool.run({"command": f"(trap '' TERM; {mine}) & {mine}", "timeout_s": 1}, ctx)
    assert result.meta.get("timed_out") is True
    assert await wait_gone(mine) == []


FORKS = ("import os, time\n"
         "n = 0\n"
         "while n < 3000:\n"
         "    try:\n"
         "        pid = os.fork()\n"
         "    except OSError:\n"
         "        break\n"
         "    if pid == 0:\n"
         "        time.sleep(30)\n"
         "        os._exit(0)\n"
         "    n += 1\n"
         'print("forked", n, flush=True)\n')


def test_a_fork_bomb_stops_at_the_process_limit(shared_base: Path) -> None:
    """As an unprivileged user (the kernel never limits root's process count): a call that
    forks without end gets MAX_PROCESSES, and the rest of the machine is untouched."""
    import subprocess

    from backend.tools.sandbox import MAX_PROCESSES, find_bwrap

    bwrap = find_bwrap()
    assert bwrap is not None
    session = shared_base / "s"
    session.mkdir()
    session.chmod(0o777)
    argv = command_argv(bwrap, f"python3 -c '{FORKS}'", workdir=session, session_dir=session,
                        data_dir=shared_base / "data", env={"PATH": "/usr/bin:/bin"}, network=False)
    drop = [] if os.geteuid() != 0 else ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    done = subprocess.run([*drop, *argv], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    forked = int(done.stdout.split()[-1])
    assert MAX_PROCESSES - 10 <= forked < MAX_PROCESSES, done.stdout


async def test_the_lifeline_alone_ends_the_sandbox(tmp_path: Path) -> None:
    """When the backend's end of the lifeline closes (the backend died), every process of the
    call ends, whatever the death signals did: here the backend lives on, so none is sent."""
    from backend.tools.sandbox import LIFELINE_FD, find_bwrap

    bwrap = find_bwrap()
    assert bwrap is not None
    session = tmp_path / "s"
    session.mkdir()
    mine = unique_sleep(63)
    argv = command_argv(bwrap, f"setsid nohup {mine}1 >/dev/null 2>&1 & {mine}2", workdir=session,
                        session_dir=session, data_dir=tmp_path / "data", env={"PATH": "/usr/bin:/bin"},
                        network=False, lifeline=True)
    read, write = os.pipe()
    child = await asyncio.create_subprocess_exec(*argv, pass_fds=(read, LIFELINE_FD),
                                                 preexec_fn=lambda: os.dup2(read, LIFELINE_FD))
    os.close(read)
    try:
        assert len(await wait_running(mine, 2)) >= 2
        os.close(write)
        assert await wait_gone(mine) == []
    finally:
        if child.returncode is None:
            child.kill()
        await child.wait()
