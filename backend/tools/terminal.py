"""The terminal tool: one shell command in its own process group, output kept bounded, killed on time.

Output is read from pipes we own (not asyncio's subprocess pipes), so that
once the shell has exited we can stop reading and close them even while a
backgrounded child (`sleep 100 &`) still holds them open.  Only the first
and last characters of each stream are kept, so a command printing hundreds
of megabytes costs a few tens of kilobytes.  What the command prints also goes,
decoded but otherwise raw, stdout and stderr in the order they arrive, to
`ctx.progress`, which streams it to clients (`tools/live.py` bounds that).
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

from backend.host import die_with_parent, user_umask
from backend.tools import policy, protected
from backend.tools.base import Guard, ResultStatus, ToolContext, ToolResult
from backend.tools.sandbox import LIFELINE_FD, Sandbox, lifeline_pipe, unavailable
from shared.config import ApprovalMode
from shared.paths import default_data_dir

DEFAULT_TIMEOUT_S = 120
MAX_TIMEOUT_S = 3600
HEAD_CHARS = 8_000
TAIL_CHARS = 24_000
KILL_GRACE_S = 2.0  # SIGTERM → SIGKILL on timeout
CANCEL_GRACE_S = 0.5  # the same when interrupted: the caller waits for us
DRAIN_GRACE_S = 1.0  # reading on after the shell exits, for output still in flight
_CHUNK = 64 * 1024

TERMINAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "command": {"type": "string", "description": "The shell command (run with /bin/sh -c)."},
        "timeout_s": {
            "type": "integer",
            "description": "Seconds before the command is killed (1-3600).",
            "default": DEFAULT_TIMEOUT_S,
        },
        "workdir": {
            "type": "string",
            "description": "Folder to run in, relative to the session folder (default: the session folder).",
        },
        "network": {
            "type": "boolean",
            "description": "The command needs the network (the sandbox has none); asks the user.",
            "default": False,
        },
        "sandbox": {
            "type": "boolean",
            "description": "false: run outside the sandbox, to change files outside the session "
                           "folder; asks the user. Use only after a sandboxed try failed for that reason.",
            "default": True,
        },
    },
    "required": ["command"],
    "additionalProperties": False,
}


class Terminal:
    """Runs `/bin/sh -c command` in the sandbox (or, where there is none, as it is, with the
    fallback policy asking for anything not plainly read-only); see the module docstring."""

    name = "terminal"
    parameters = TERMINAL_SCHEMA
    spill = True
    changes_files = False

    def __init__(self, sandbox: Sandbox | None = None) -> None:
        self.sandbox = sandbox or unavailable("the sandbox was not set up", default_data_dir())

    @property
    def description(self) -> str:
        if not self.sandbox.active:
            where = ("Commands run WITHOUT a sandbox on this machine, so the user is asked before "
                     "any command that is not plainly read-only.")
        else:
            where = ("Commands run in a sandbox: the session folder and a private /tmp are writable, "
                     "every other folder is read-only, there is no network"
                     + (" (here the network is allowed)" if self.sandbox.network else "")
                     + ", other processes and unix sockets outside the session folder are out of "
                     "reach, and .git/hooks, .git/config, .envrc, .vscode/ and .idea/ are read-only. "
                     "A write outside the session folder fails with 'Read-only file system' and the "
                     "result says the sandbox blocked it: if it must happen, run it again with "
                     "sandbox=false, which asks the user. Set network=true for a command that "
                     "needs the network; that asks too.")
        return (
            "Run a shell command in the session folder and return its exit code, stdout and stderr. "
            f"{where} Long output keeps its beginning and end. The command has no stdin and is "
            "killed after timeout_s seconds; every process it started, backgrounded or not, ends "
            "with it, so start a server and the commands that use it in one call."
        )

    def summary(self, args: dict[str, Any]) -> str:
        lines = str(args.get("command", "")).strip().splitlines() or [""]
        first = lines[0] if len(lines) == 1 else lines[0] + " …"
        if args.get("sandbox") is False:
            first = "[no sandbox] " + first
        elif args.get("network"):
            first = "[network] " + first
        return first if len(first) <= 200 else first[:199] + "…"

    def guard(
        self, args: dict[str, Any], cwd: Path, mode: ApprovalMode, data_dir: Path | None = None
    ) -> Guard | None:
        command = str(args.get("command", ""))
        if self.sandbox.active:
            escape = _escape(args, self.sandbox.network)
            given = args.get("workdir")
            try:
                workdir = policy.resolve_path(str(given), cwd) if given else cwd
            except policy.BadPath:
                workdir = cwd  # the run refuses it
            return policy.sandboxed_guard(command, mode, escape, cwd, workdir)
        return policy.unsandboxed_guard(command, mode, cwd, data_dir or self.sandbox.data_dir)

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        command = str(args["command"])
        timeout = min(max(int(args.get("timeout_s", DEFAULT_TIMEOUT_S)), 1), MAX_TIMEOUT_S)
        given = args.get("workdir")
        try:
            workdir = policy.resolve_path(str(given), ctx.cwd) if given else ctx.cwd
        except policy.BadPath as exc:
            return _error(f"workdir: {exc}")
        if not workdir.is_dir():
            what = "workdir" if given else "the session folder"
            return _error(f"{what} does not exist or is not a folder: {workdir}")
        sandboxed = self.sandbox.active and args.get("sandbox", True) is not False
        network = bool(args.get("network")) or self.sandbox.network
        writable = ctx.approved.writable if ctx.approved is not None else ()
        lifeline, held = lifeline_pipe()  # the sandbox ends when `held` closes (sandbox.bound)
        try:
            if sandboxed:
                # The walks (project folders, sockets) read the disk: off the event loop,
                # which every session shares.
                before = await asyncio.to_thread(protected.scan, ctx.cwd, workdir)
                argv = await asyncio.to_thread(
                    self.sandbox.argv, command, workdir=workdir, session_dir=ctx.cwd, env=ctx.env,
                    network=network, writable=[Path(p) for p in writable], kept=before, lifeline=True)
                setup = self.sandbox.child_setup()
            else:
                argv = self.sandbox.outside_argv(command, workdir=workdir, lifeline=True)
                setup = die_with_parent
            shell = await _Shell.start(argv, workdir, ctx.env, ctx.progress, setup, lifeline)
        except BaseException as exc:
            os.close(held)
            if isinstance(exc, OSError | ValueError):
                return _error(f"could not start the shell: {exc}")
            raise
        finally:
            os.close(lifeline)  # the child has its copy
        shell.held = held
        ctx.spawned(shell.proc.pid)
        try:
            code = await shell.finish(timeout)
        except asyncio.CancelledError:
            await shell.abort()
            raise
        finally:
            shell.close()
            ctx.reaped(shell.proc.pid)
        result = _result(code, timeout if shell.timed_out else None, shell)
        if not sandboxed:
            if self.sandbox.active:
                _permission(result, "ran outside the sandbox, as allowed: it could change any of "
                            "your files and use the network")
            return result
        if writable:
            _permission(result, "ran with " + ", ".join(policy.shown_path(p) for p in writable)
                        + " writable, as allowed")
        elif args.get("network") and not self.sandbox.network:
            _permission(result, "ran with the network on, as allowed")
        _blocked(result, shell, network=network)
        after = await asyncio.to_thread(protected.scan, ctx.cwd, workdir)
        _planted(result, protected.planted(before, after), ctx.cwd)
        return result


def _escape(args: dict[str, Any], network_allowed: bool) -> policy.Escape:
    """What this call asks to leave the sandbox for."""
    if args.get("sandbox") is False:
        return "unsandboxed"
    if args.get("network") and not network_allowed:
        return "network"
    return None


class _Capture:
    """The first and last characters of one stream, and a count of everything seen."""

    def __init__(self) -> None:
        # Its own decoder per stream: a character split across two reads is decoded whole,
        # whatever the other stream printed in between.
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.head = ""
        self.tail = ""
        self.chars = 0
        self.bytes = 0

    def feed(self, data: bytes, final: bool = False) -> str:
        """Keeps what it must of `data`; returns it decoded (a split character waits for
        its next read)."""
        decoded = text = self._decoder.decode(data, final)
        self.bytes += len(data)
        self.chars += len(text)
        room = HEAD_CHARS - len(self.head)
        if room > 0:
            self.head += text[:room]
            text = text[room:]
        if text:
            self.tail = text[-TAIL_CHARS:] if len(text) >= TAIL_CHARS else (self.tail + text)[-TAIL_CHARS:]
        return decoded

    def render(self) -> str:
        omitted = self.chars - len(self.head) - len(self.tail)
        if omitted > 0:
            return f"{self.head}\n[... {omitted:,} characters omitted ...]\n{self.tail}"
        return self.head + self.tail


class _Shell:
    """One running shell: its process, its two output pipes and their readers."""

    def __init__(self, proc: asyncio.subprocess.Process, on_output: Callable[[str], None]) -> None:
        self.proc = proc
        self.on_output = on_output
        self.stdout = _Capture()
        self.stderr = _Capture()
        self.timed_out = False
        self.held: int | None = None  # the write end of the sandbox's lifeline, closed last
        self._transports: list[asyncio.BaseTransport] = []
        self._readers: list[asyncio.Task[None]] = []

    @classmethod
    async def start(
        cls, argv: list[str], workdir: Path, env: dict[str, str], on_output: Callable[[str], None],
        setup: Callable[[], None] = die_with_parent, lifeline: int | None = None,
    ) -> _Shell:
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        keep: tuple[int, ...] = ()
        if lifeline is not None:
            keep, plain = (lifeline, LIFELINE_FD), setup

            def setup() -> None:
                plain()
                os.dup2(lifeline, LIFELINE_FD)
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv, stdin=asyncio.subprocess.DEVNULL, stdout=out_w, stderr=err_w,
                cwd=workdir, env=env, start_new_session=True,  # own process group: killed as a whole
                preexec_fn=setup, umask=user_umask(),  # the user's, not ours
                pass_fds=keep,
            )
        except BaseException:
            os.close(out_r)
            os.close(err_r)
            raise
        finally:
            os.close(out_w)  # the child holds its copies; ours would keep the pipes from ending
            os.close(err_w)
        shell = cls(proc, on_output)
        pending = [(out_r, shell.stdout), (err_r, shell.stderr)]
        try:
            while pending:
                fd, capture = pending.pop(0)
                await shell._read(fd, capture)
        except BaseException:
            for fd, _ in pending:
                os.close(fd)
            shell.signal(signal.SIGKILL)
            shell.close()
            raise
        return shell

    async def _read(self, fd: int, capture: _Capture) -> None:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader()
        pipe = os.fdopen(fd, "rb", buffering=0)  # wraps the fd, no I/O; the transport closes it
        try:
            transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
        except BaseException:
            pipe.close()
            raise
        self._transports.append(transport)
        self._readers.append(asyncio.create_task(self._pump(reader, capture)))

    async def _pump(self, reader: asyncio.StreamReader, capture: _Capture) -> None:
        while chunk := await reader.read(_CHUNK):
            self._output(capture.feed(chunk))
        self._output(capture.feed(b"", final=True))

    def _output(self, text: str) -> None:
        if text:
            self.on_output(text)

    async def finish(self, timeout: float) -> int | None:
        """Waits for the shell (killing its group on timeout), then for its output."""
        try:
            await asyncio.wait_for(self.proc.wait(), timeout)
        except TimeoutError:
            self.timed_out = True
            await self._stop(KILL_GRACE_S)
        # A backgrounded child may hold the pipes open for ever: read on briefly, then let go.
        if self._readers:
            await asyncio.wait(self._readers, timeout=DRAIN_GRACE_S)
            self._close_pipes()  # the readers see end-of-file
            await asyncio.wait(self._readers, timeout=0.5)
        return self.proc.returncode

    async def _stop(self, grace: float) -> None:
        self.signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(self.proc.wait(), grace)
        except TimeoutError:
            pass
        finally:
            self.signal(signal.SIGKILL)  # also catches children that outlive the shell
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.proc.wait(), 1.0)

    async def abort(self) -> None:
        """Interrupted: the whole group goes, quickly (the caller is waiting to re-raise)."""
        await self._stop(CANCEL_GRACE_S)

    def signal(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)

    def _close_pipes(self) -> None:
        for transport in self._transports:
            transport.close()

    def close(self) -> None:
        self._close_pipes()
        for task in self._readers:
            task.cancel()
        if self.held is not None:
            os.close(self.held)  # whatever the call left in its sandbox ends now
            self.held = None


def _result(code: int | None, timed_out_after: int | None, shell: _Shell) -> ToolResult:
    lines = [f"timed out after {timed_out_after} s; the command and its children were killed"] if (
        timed_out_after is not None) else [f"exit code: {code}"]
    for label, capture in (("stdout", shell.stdout), ("stderr", shell.stderr)):
        text = capture.render()
        if text:
            lines.append(f"{label}:\n{text.rstrip(chr(10))}")
    meta: dict[str, Any] = {"exit_code": code}
    if timed_out_after is not None:
        meta["timed_out"] = True
        return ToolResult("error", "\n".join(lines), f"timed out after {timed_out_after} s", meta)
    status: ResultStatus = "ok" if code == 0 else "error"
    return ToolResult(status, "\n".join(lines), f"exit {code}", meta)


# What a command prints (to stderr) when the sandbox stopped it, whatever its exit code says.
_BLOCKED_WRITE = ("Read-only file system",)
_BLOCKED_NETWORK = ("Network is unreachable", "Temporary failure in name resolution",
                    "Could not resolve host", "Name or service not known", "getaddrinfo failed",
                    "No address associated with hostname", "Could not resolve hostname",
                    "nodename nor servname", "unable to resolve host")
BLOCKED_WRITE = ("The sandbox blocked a change outside the session folder (everything outside "
                 "it is read-only to commands), so this command did not do all it was asked to. "
                 "If that change must happen, run the command again with sandbox=false: the user "
                 "is asked, and it then runs outside the sandbox.")
BLOCKED_NETWORK = ("The sandbox blocked the network (commands have none), so this command did not "
                   "do all it was asked to. If it needs the network, run it again with "
                   "network=true: the user is asked first.")


def _blocked(result: ToolResult, shell: _Shell, *, network: bool) -> None:
    """A command that ran into the sandbox is reported as blocked by it, not as done: the
    model is told it can ask, the person sees it on the card (meta `sandbox_blocked`).  Judged
    on what it printed to stderr, where programs report errors (stdout may be a file's text)."""
    printed = shell.stderr.render()
    what = None
    if any(words in printed for words in _BLOCKED_WRITE):
        what, words = "write", BLOCKED_WRITE
    elif not network and any(words in printed for words in _BLOCKED_NETWORK):
        what, words = "network", BLOCKED_NETWORK
    if what is None:
        return
    result.status = "error"
    result.meta["sandbox_blocked"] = what
    why = "a write outside the session folder" if what == "write" else "no network"
    result.summary = f"blocked by the sandbox ({why}; {result.summary})"
    result.content = f"{words}\n{result.content}"


def _permission(result: ToolResult, words: str) -> None:
    """What a person let this call do beyond the sandbox, on its card and for the model."""
    result.meta["sandbox_note"] = words
    result.content = f"({words})\n{result.content}"


def _planted(result: ToolResult, paths: list[str], cwd: Path) -> None:
    """Code a person's own tools would run that the call created from nothing (a repository
    it made, with a hook): it cannot be made read-only in advance, so it is named."""
    if not paths:
        return
    shown = ", ".join(os.path.relpath(p, os.path.realpath(cwd)) for p in paths[:8])
    words = (f"it created {shown}, which git, direnv or your editor run outside the sandbox: "
             "look at it before you use git or open this folder")
    earlier = result.meta.get("sandbox_note")
    result.meta["sandbox_note"] = f"{earlier}; {words}" if earlier else words
    result.meta["sandbox_planted"] = paths[:8]
    result.content = f"{result.content}\nNote: {words}."


def _error(message: str) -> ToolResult:
    return ToolResult("error", message, message, {"exit_code": None})
