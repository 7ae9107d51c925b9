"""Hooks: the person's commands, run at points of a turn, the event in as JSON, a decision out.

A hook (`[hooks.NAME]` in config.toml, `shared/config.py:HookConfig`) runs exactly as a
terminal command runs (`tools/sandbox.py`): in the sandbox's profile with the session's
folder as its working folder and writable, the network as `[sandbox] network` says, the
data folder hidden, the commands' environment allowlist (never a provider key), in its
own process group, recorded in the process table while it runs (`tools/procs.py`: a
crash's leftovers are killed at the next start, and a process of it can never loosen
config, `server/peer.py`).

Its standard input is one JSON object (an unnamed file, so a large tool argument never
blocks us on a pipe); its standard output is read up to MAX_OUTPUT bytes and parsed as one
JSON object, empty meaning no opinion; the end of its standard error is kept for the report.
At its timeout, or when the turn is interrupted, the whole process group is killed and
reaped; whatever it leaves behind is killed with the group when it exits, and the pipes
are let go after a short grace, so a child that keeps them open cannot hang the turn.

Every failure (it cannot start, exits non-zero, prints something that is not a JSON object,
runs past its timeout) becomes `HookRun.failure`, words for people that name the hook and
what happened; callers report it and go on as if the hook had said nothing.  One exception,
as Claude Code's users expect: a `pre_tool` hook that exits with status 2 blocks the call,
its standard error being the reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from backend.host import die_with_parent, user_umask
from backend.tools.procs import ProcessTable
from backend.tools.sandbox import LIFELINE_FD, Sandbox, lifeline_pipe
from shared.config import HookConfig, HookEvent

log = logging.getLogger("tools")

MAX_OUTPUT = 64 * 1024  # bytes of standard output read; more is a failure
MAX_ERROR_KEPT = 4 * 1024  # the end of standard error, for the report
MAX_CONTEXT_CHARS = 16_000  # context a hook adds to what the model reads
MAX_REASON_CHARS = 2_000  # a block's reason
MAX_SHOWN_ERROR = 300  # of standard error, in a failure's words
DRAIN_GRACE_S = 0.5  # reading on after it exited, for output still in flight
REAP_S = 5.0  # waiting for a killed group's leader
BLOCK_EXIT = 2  # Claude Code's convention: a pre_tool hook exiting 2 blocks, stderr the reason
CONTEXT_EVENTS: tuple[HookEvent, ...] = ("session_start", "prompt_submit", "post_tool")


class BadAnswer(Exception):
    """A hook's standard output that is not an answer; the message says why, for people."""


@dataclass(frozen=True)
class HookRun:
    """What one hook run came to.  `failure` set: it is reported, and its answer is empty."""

    name: str
    event: HookEvent
    answer: dict[str, Any] = field(default_factory=dict)
    failure: str | None = None

    @property
    def blocked(self) -> str | None:
        """A pre_tool hook's reason for blocking the call; None when it does not."""
        if self.answer.get("decision") != "block":
            return None
        return str(self.answer.get("reason") or "no reason given")

    @property
    def context(self) -> str | None:
        text = self.answer.get("context")
        return text if isinstance(text, str) and text.strip() else None


def configured(hooks: Mapping[str, HookConfig], event: HookEvent,
               tool: str | None = None) -> list[tuple[str, HookConfig]]:
    """The enabled hooks of `event` (for `tool`, if given), in name order: the order they run."""
    return [(name, hook) for name, hook in sorted(hooks.items())
            if hook.enabled and hook.event == event and hook.applies_to(tool)]


def parse_answer(event: HookEvent, out: bytes) -> dict[str, Any]:
    """A hook's standard output as its answer: {} for nothing; `decision` and `reason` for a
    pre_tool hook, `context` where the event takes one, each bounded.  Keys it does not know
    are ignored (a hook written for another tool may print more).  Raises BadAnswer."""
    if len(out) > MAX_OUTPUT:
        raise BadAnswer(f"printed more than {MAX_OUTPUT // 1024} KiB")
    text = out.decode("utf-8", errors="replace").strip()
    if not text:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadAnswer(f"printed something that is not JSON ({exc.msg} at position "
                        f"{exc.pos})") from None
    if not isinstance(value, dict):
        raise BadAnswer("printed JSON that is not an object")
    answer: dict[str, Any] = {}
    decision = value.get("decision")
    if event == "pre_tool" and decision is not None:
        if decision not in ("block", "allow"):
            raise BadAnswer(f"answered decision {str(decision)[:40]!r}; it may be \"block\" or "
                            "\"allow\"")
        answer["decision"] = decision
        if decision == "block":
            answer["reason"] = _bounded(_text(value.get("reason")), MAX_REASON_CHARS)
    context = value.get("context")
    if event in CONTEXT_EVENTS and context is not None:
        if not isinstance(context, str):
            raise BadAnswer("answered a context that is not a string")
        answer["context"] = _bounded(context, MAX_CONTEXT_CHARS)
    return answer


def _text(value: object) -> str:
    return value if isinstance(value, str) else "" if value is None else json.dumps(value)


def _bounded(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[:limit] + f" [... cut at {limit:,} characters]"


class HookRunner:
    """Runs one hook at a time for its caller (see the module docstring).  `env()` is the
    environment commands get now (`[sandbox] env` may change between turns)."""

    def __init__(self, sandbox: Sandbox, procs: ProcessTable,
                 env: Callable[[], dict[str, str]]) -> None:
        self.sandbox = sandbox
        self.procs = procs
        self.env = env

    async def run(self, name: str, hook: HookConfig, payload: dict[str, Any],
                  cwd: Path) -> HookRun:
        """Runs `hook` with `payload` as its input; never raises but CancelledError (after
        killing it)."""
        event = hook.event
        data = json.dumps({**payload, "event": event, "hook": name}).encode()
        try:
            done = await _Process.run(self, hook, data, cwd)
        except (OSError, ValueError) as exc:
            return HookRun(name, event, failure=f"could not start: {exc}")
        return _judged(name, event, hook, done)


@dataclass
class _Done:
    code: int | None  # None: killed at its timeout
    out: bytes
    err: bytes


def _judged(name: str, event: HookEvent, hook: HookConfig, done: _Done) -> HookRun:
    said = _last_words(done.err)
    if done.code is None:
        return HookRun(name, event, failure=f"did not finish within {hook.timeout_s:g} s, so it "
                       "was stopped (its processes killed)")
    if done.code == BLOCK_EXIT and event == "pre_tool":
        reason = _bounded(done.err.decode("utf-8", errors="replace"), MAX_REASON_CHARS)
        return HookRun(name, event, {"decision": "block", "reason": reason or "exit status 2"})
    if done.code < 0:
        with contextlib.suppress(ValueError):
            return HookRun(name, event, failure=f"was killed by {signal.Signals(-done.code).name}")
        return HookRun(name, event, failure=f"was killed by signal {-done.code}")
    if done.code != 0:
        return HookRun(name, event, failure=f"exited with status {done.code}"
                       + (f": {said}" if said else ""))
    try:
        return HookRun(name, event, parse_answer(event, done.out))
    except BadAnswer as exc:
        return HookRun(name, event, failure=str(exc))


def _last_words(err: bytes) -> str:
    """The last lines of what it printed to standard error, for its failure's words."""
    text = err.decode("utf-8", errors="replace").strip()
    return text if len(text) <= MAX_SHOWN_ERROR else "…" + text[-MAX_SHOWN_ERROR:]


class _Process:
    """One running hook: its process group, its input file, its two output pipes."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.out = bytearray()
        self.err = bytearray()
        self._transports: list[asyncio.BaseTransport] = []
        self._readers: list[asyncio.Task[None]] = []

    @classmethod
    async def run(cls, runner: HookRunner, hook: HookConfig, data: bytes, cwd: Path) -> _Done:
        read_end, held = lifeline_pipe()  # the sandbox ends when `held` closes
        try:
            running = await cls._start(runner, hook, data, cwd, read_end)
        except BaseException:
            os.close(held)
            raise
        finally:
            os.close(read_end)  # the child has its copy
        pgid = running.proc.pid
        runner.procs.spawned(pgid)
        try:
            code = await running._finish(hook.timeout_s)
        finally:
            running._kill()  # whatever it left behind goes with it
            running._close()
            os.close(held)
            runner.procs.reaped(pgid)
        return _Done(code, bytes(running.out), bytes(running.err))

    @classmethod
    async def _start(cls, runner: HookRunner, hook: HookConfig, data: bytes, cwd: Path,
                     lifeline: int) -> _Process:
        env = runner.env()
        argv, _ = await asyncio.to_thread(  # the sandbox's walks read the disk
            runner.sandbox.program_argv, list(hook.command), workdir=cwd, env=env, lifeline=True)
        setup = runner.sandbox.child_setup() if runner.sandbox.active else die_with_parent

        def child() -> None:
            setup()
            os.dup2(lifeline, LIFELINE_FD)

        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        try:
            with tempfile.TemporaryFile() as stdin:  # unnamed: gone when closed
                stdin.write(data)
                stdin.seek(0)
                proc = await asyncio.create_subprocess_exec(
                    *argv, stdin=stdin.fileno(), stdout=out_w, stderr=err_w, cwd=cwd, env=env,
                    start_new_session=True,  # its own process group: killed as a whole
                    preexec_fn=child, umask=user_umask(), pass_fds=(lifeline, LIFELINE_FD))
        except BaseException:
            os.close(out_r)
            os.close(err_r)
            raise
        finally:
            os.close(out_w)  # the child holds its copies; ours would keep the pipes from ending
            os.close(err_w)
        running = cls(proc)
        pending = [(out_r, running.out, MAX_OUTPUT + 1, False),
                   (err_r, running.err, MAX_ERROR_KEPT, True)]
        try:
            while pending:
                fd, into, limit, tail = pending.pop(0)
                await running._read(fd, into, limit, tail)
        except BaseException:
            for fd, *_ in pending:
                os.close(fd)
            running._kill()
            running._close()
            raise
        return running

    async def _read(self, fd: int, into: bytearray, limit: int, tail: bool) -> None:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader()
        pipe = os.fdopen(fd, "rb", buffering=0)  # wraps the fd, no I/O; the transport closes it
        try:
            transport, _ = await loop.connect_read_pipe(
                lambda: asyncio.StreamReaderProtocol(reader), pipe)
        except BaseException:
            pipe.close()
            raise
        self._transports.append(transport)
        self._readers.append(asyncio.create_task(_pump(reader, into, limit, tail)))

    async def _finish(self, timeout: float) -> int | None:
        """Its exit status; None when it was killed at `timeout`.  Cancelled (the turn was
        interrupted), it is killed and reaped before the cancellation goes on."""
        try:
            await asyncio.wait_for(self.proc.wait(), timeout)
        except TimeoutError:
            await self._stop()
            return None
        except asyncio.CancelledError:
            await self._stop()
            raise
        if self._readers:  # a child of it may hold the pipes: read on briefly, then let go
            await asyncio.wait(self._readers, timeout=DRAIN_GRACE_S)
        return self.proc.returncode

    async def _stop(self) -> None:
        self._kill()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self.proc.wait()), REAP_S)

    def _kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)

    def _close(self) -> None:
        for transport in self._transports:
            transport.close()
        for task in self._readers:
            task.cancel()


async def _pump(reader: asyncio.StreamReader, into: bytearray, limit: int, tail: bool) -> None:
    """Reads a pipe to its end, keeping its first `limit` bytes (or, `tail`, its last): a
    hook that prints without end still never blocks on a full pipe."""
    while chunk := await reader.read(64 * 1024):
        if tail:
            into.extend(chunk)
            del into[:-limit]
        elif len(into) < limit:
            into.extend(chunk[:limit - len(into)])
