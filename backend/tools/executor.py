"""The tool executor: runs one batch of calls concurrently, and stores results in call order.

The assistant row naming these calls is already durable when a batch gets
here (tool_round.py writes it first).  Calls start in call order (each waits
for the previous one's `tool.start`), at most `MAX_WORKERS` at a time.  Each
result is stored, with its `tool.complete` event, only after every earlier
call's result is stored, so the transcript and clients see call order
whatever order the tools finish in.  If a result cannot be stored, nothing
after it is stored either, the running calls are stopped, and the batch
reports the failure: an unstored result must never reach the model.

The batch deadline (`limits.tool_batch_deadline_s`) counts only time in
which no call waits for a person.  An interrupt or the deadline stops
running calls (`interrupted` / `error`) and skips the ones not started.

What a running tool prints goes out as `tool.progress` chunks, cut and
bounded by `tools/live.py`; a call's last chunk is stored before its
`tool.complete`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from backend import wire
from backend.errors import StoreUnavailable
from backend.race import unless_stopped
from backend.store import messages
from backend.store.db import Database, Tx
from backend.store.fenced import TurnFence
from backend.tools.approvals import Approvals, decided_meta, unasked_meta
from backend.tools.base import Guard, Tool, ToolContext, ToolResult
from backend.tools.checkpoints import Checkpoints
from backend.tools.live import LiveOutput
from backend.tools.procs import ProcessTable
from backend.tools.spill import spill
from shared import logs
from shared.config import ApprovalMode
from shared.protocol import OUTPUT_PREVIEW_CHARS, ToolComplete, ToolProgress, ToolStart, ToolStatus

log = logging.getLogger("tools")

MAX_WORKERS = 8
HEARTBEAT_S = 15.0  # a running call that printed nothing for this long gets an empty tool.progress
TICK_S = 0.1


@dataclass
class PreparedCall:
    """A validated call.  `error` set: it is answered with that error and never dispatched."""

    call_id: str
    name: str
    arguments: dict[str, Any]
    arguments_raw: str | None = None
    tool: Tool | None = None
    error: str | None = None
    sent: dict[str, Any] | None = None  # as the model sent them, when validation added defaults

    @property
    def shown(self) -> dict[str, Any]:
        """The arguments as the model sent them: stored, replayed and shown to people."""
        return self.sent if self.sent is not None else self.arguments


@dataclass
class FinishedCall:
    call_id: str
    name: str
    status: ToolStatus
    content: str
    summary: str
    duration_ms: int = 0
    meta: dict[str, Any] = field(default_factory=dict)
    spilled_path: str | None = None


@dataclass(frozen=True)
class Blocked:
    """A hook's refusal of a call: its name and its reason, which the model reads."""

    hook: str
    reason: str


class CallHooks(Protocol):
    """The person's `pre_tool` and `post_tool` hooks, as a batch runs them (turn/hooks.py).
    Neither raises: a hook that fails is reported and counts as no opinion."""

    async def before(self, call: PreparedCall) -> Blocked | None:
        """Runs before the call's guard and approval: a block stops it there."""
        ...

    async def after(self, call: PreparedCall, status: ToolStatus, content: str) -> str | None:
        """Runs after the call ran: what the hooks add to the result the model reads."""
        ...


@dataclass
class BatchContext:
    """The turn a batch belongs to."""

    session_id: str
    turn_id: str
    admission_id: str
    cwd: Path
    env: dict[str, str]
    mode: ApprovalMode
    deadline_s: float
    spill_chars: int
    stop: asyncio.Event
    # Every write of the batch goes through it: fenced on the turn's lease, so a turn that
    # was taken over writes nothing more (store/fenced.py).
    fence: TurnFence
    on_progress: Callable[[], None] = lambda: None  # the turn's liveness watchdog
    on_person: Callable[[int], None] = lambda delta: None  # +1 / -1 around approval waits
    why: Callable[[], str] = lambda: "the turn was interrupted"  # why `stop` was set
    hooks: CallHooks | None = None  # the person's pre_tool / post_tool hooks


@dataclass
class BatchResult:
    outcomes: list[FinishedCall]
    failure: str | None = None  # a result could not be stored: the turn must end
    interrupted: bool = False
    deadline_hit: bool = False


@dataclass
class _Call:
    prepared: PreparedCall
    summary: str
    started: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[FinishedCall] | None = None
    began: float = 0.0
    running: bool = False
    waiting_person: bool = False
    announced: bool = False  # its tool.start is queued
    approved: Guard | None = None  # the guard a person or a rule allowed; the run re-checks it
    decided: dict[str, Any] = field(default_factory=dict)  # who allowed it, for the result's meta
    live: LiveOutput = field(default_factory=LiveOutput)
    last_progress: float = 0.0  # when its last tool.progress was queued
    announced_meta: dict[str, Any] = field(default_factory=dict)  # what ctx.announce told clients


class Executor:
    def __init__(self, db: Database, approvals: Approvals, checkpoints: Checkpoints,
                 data_dir: Path, procs: ProcessTable) -> None:
        self.db = db
        self.approvals = approvals
        self.checkpoints = checkpoints
        self.data_dir = data_dir  # sealed: no tool reads or writes there (but for its spill)
        self.spill_dir = data_dir / "spill"
        self.procs = procs
        # Who else must know when a session's batches wait for a person: the delegate call
        # whose child session it is (`watch_person`).
        self._person_watchers: dict[str, Callable[[int], None]] = {}

    def watch_person(self, session_id: str, relay: Callable[[int], None]) -> Callable[[], None]:
        """Calls `relay(+1 / -1)` whenever a batch of `session_id` starts or stops waiting
        for a person (its own approvals, or a person its delegate calls wait for); returns
        the function that stops it.  Set before the session's turn starts, so it hears every
        +1 with its -1."""
        self._person_watchers[session_id] = relay

        def stop() -> None:
            if self._person_watchers.get(session_id) is relay:
                del self._person_watchers[session_id]
        return stop

    def _relay_person(self, session_id: str, delta: int) -> None:
        relay = self._person_watchers.get(session_id)
        if relay is not None:
            relay(delta)

    async def run(self, scope: BatchContext, prepared: list[PreparedCall]) -> BatchResult:
        calls = [_Call(p, _summary(p)) for p in prepared]
        batch = _Batch(self, scope, calls)
        return await batch.run()


class _Batch:
    def __init__(self, ex: Executor, scope: BatchContext, calls: list[_Call]) -> None:
        self.ex = ex
        self.scope = scope
        self.calls = calls
        self.slots = asyncio.Semaphore(MAX_WORKERS)
        self.halt = asyncio.Event()  # interrupt, deadline or storage failure
        self.halt_reason: str = ""
        self.deadline_hit = False
        self.active_s = 0.0
        self.people_waiting = 0

    async def run(self) -> BatchResult:
        for i, call in enumerate(self.calls):
            call.task = asyncio.create_task(self._one(i), name=f"tool-{call.prepared.call_id}")
        monitor = asyncio.create_task(self._monitor())
        outcomes: list[FinishedCall] = []
        failure: str | None = None
        try:
            i = 0
            while i < len(self.calls):
                task = self.calls[i].task
                assert task is not None
                await asyncio.shield(task)
                # Every consecutive result that is ready goes into one commit, in call order.
                ready = [i]
                while ready[-1] + 1 < len(self.calls) and _done(self.calls[ready[-1] + 1]):
                    ready.append(ready[-1] + 1)
                stored = [(self.calls[k], _result(self.calls[k])) for k in ready]
                try:
                    await self._store(stored)
                except StoreUnavailable as exc:
                    failure = f"session_persistence_failed: {exc.message}"
                    self._halt("storage failed")
                    break
                outcomes.extend(out for _, out in stored)
                i = ready[-1] + 1
        finally:
            monitor.cancel()
            for call in self.calls:
                if call.task is not None and not call.task.done():
                    call.task.cancel()
            await asyncio.gather(*(c.task for c in self.calls if c.task), return_exceptions=True)
            await asyncio.gather(monitor, return_exceptions=True)
        return BatchResult(outcomes, failure, interrupted=self.scope.stop.is_set(),
                           deadline_hit=self.deadline_hit)

    # --- one call ------------------------------------------------------------------

    async def _one(self, i: int) -> FinishedCall:
        call = self.calls[i]
        if i > 0:
            await self.calls[i - 1].started.wait()  # the start-order gate
        try:
            async with self.slots:
                if self.halt.is_set():
                    return self._skipped(call)
                await self._emit_start(call)
                return await self._execute(call)
        finally:
            call.started.set()  # never hold later calls at the gate, whatever happened

    async def _execute(self, call: _Call) -> FinishedCall:
        p = call.prepared
        began = time.monotonic()
        if p.error is not None or p.tool is None:
            return FinishedCall(p.call_id, p.name, "error", p.error or "unknown tool", call.summary)
        # A person's hook judges first (it never loosens what follows); stopped while it
        # runs, it is killed and the call skipped.
        judged, blocked = await unless_stopped(self._hook_before(p), self.halt)
        if not judged:
            return self._skipped(call)
        if blocked is not None:
            return FinishedCall(p.call_id, p.name, "denied",
                                f"Not run: blocked by hook {blocked.hook}: {blocked.reason}",
                                f"blocked by hook {blocked.hook}", meta={
                                    **unasked_meta("hook"), "hook": blocked.hook})
        # Stopped while a person was being asked: the request expires, the call is skipped.
        answered, denial = await unless_stopped(self._approve(call, p.tool), self.halt)
        if not answered:
            return self._skipped(call)
        if denial is not None:
            return denial
        if self.halt.is_set():
            return self._skipped(call)
        call.running, call.began = True, time.monotonic()
        finished, result = await unless_stopped(self._invoke(call, p.tool), self.halt)
        call.running = False
        # Before its result, so that clients see the output end as the command's did.
        await self._drain_progress(call)
        ms = int((time.monotonic() - began) * 1000)
        if not finished or result is None:
            status: ToolStatus = "error" if self.deadline_hit else "interrupted"
            return FinishedCall(p.call_id, p.name, status, f"{self.halt_reason}; the command was stopped.",
                           call.summary, ms)
        content = result.content
        added, extra = await unless_stopped(self._hook_after(p, result), self.halt)
        if added and extra:
            content = f"{content}\n\n{extra}"
        return FinishedCall(p.call_id, p.name, result.status, content, result.summary or call.summary,
                       ms, result.meta)

    async def _hook_before(self, p: PreparedCall) -> Blocked | None:
        hooks = self.scope.hooks
        return await hooks.before(p) if hooks is not None else None

    async def _hook_after(self, p: PreparedCall, result: ToolResult) -> str | None:
        hooks = self.scope.hooks
        return await hooks.after(p, result.status, result.content) if hooks is not None else None

    async def _invoke(self, call: _Call, tool: Tool) -> ToolResult:
        p, s = call.prepared, self.scope

        async def checkpoint(path: Path, old: bytes | None) -> None:
            await self.ex.checkpoints.save(s.fence, s.turn_id, p.call_id, path, old)

        async def announce(meta: dict[str, Any]) -> None:
            call.announced_meta.update(meta)
            await self._send_progress(call, ToolProgress(call_id=p.call_id, text="", meta=meta))

        ctx = ToolContext(s.cwd, s.session_id, s.turn_id, p.call_id, s.env, call.live.write,
                          checkpoint if tool.changes_files else None,
                          spawned=self.ex.procs.spawned, reaped=self.ex.procs.reaped,
                          mode=s.mode, approved=call.approved, data_dir=self.ex.data_dir,
                          on_person=self._person, announce=announce, fence=s.fence)
        try:
            return await tool.run(p.arguments, ctx)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a tool bug becomes the call's result, never the turn's end
            error_id = logs.internal(log, "tool %s raised", p.name)
            return ToolResult("error", f"The tool failed: {type(exc).__name__}: {exc} "
                              f"(error_id {error_id})", call.summary)

    async def _approve(self, call: _Call, tool: Tool) -> FinishedCall | None:
        """None when the call may run; else its `denied` outcome."""
        p, s = call.prepared, self.scope
        try:
            guard = tool.guard(p.arguments, s.cwd, s.mode, self.ex.data_dir)
        except Exception as exc:  # a policy bug must not run the call, nor end the turn
            error_id = logs.internal(log, "guard of %s raised", p.name)
            return FinishedCall(p.call_id, p.name, "error",
                           f"Not run: its safety check failed ({type(exc).__name__}, "
                           f"error_id {error_id}).", call.summary)
        if guard is None:
            return None
        if guard.kind == "hardline":
            return FinishedCall(p.call_id, p.name, "denied",
                           f"Refused: this is never run ({guard.reason}), in any approval mode.",
                           call.summary, meta=unasked_meta("policy"))
        rule = await self.ex.approvals.allowing_rule(s.session_id, p.name, p.arguments, s.cwd,
                                                     s.mode, guard.rule_key)
        if rule is not None:
            call.approved, call.decided = guard, unasked_meta("rule", rule)
            return None
        call.waiting_person = True
        self._person(+1)
        try:
            approval = await self.ex.approvals.ask(
                fence=s.fence, turn_id=s.turn_id, call_id=p.call_id, tool=p.name,
                summary=call.summary, guard=guard,
            )
        finally:
            call.waiting_person = False
            self._person(-1)
        meta = decided_meta(approval) if approval is not None else {"decided_by": "stopped"}
        decision = approval.decision if approval is not None else None
        if decision is None:
            return FinishedCall(p.call_id, p.name, "denied",
                           f"Not run: nobody approved it in time ({guard.reason}). Do not retry it "
                           "unasked; tell the user what you wanted to do.", call.summary, meta=meta)
        if decision == "deny":
            return FinishedCall(p.call_id, p.name, "denied",
                           f"Not run: the user denied it ({guard.reason}). Do not retry it; ask the "
                           "user or take another way.", call.summary, meta=meta)
        call.approved, call.decided = guard, meta
        return None

    def _person(self, delta: int) -> None:
        """A call of this batch starts (+1) or stops (-1) waiting for a person: the deadline
        stops counting, the turn's watchdog too, and a parent waiting on this turn hears it."""
        self.people_waiting += delta
        self.scope.on_person(delta)
        self.ex._relay_person(self.scope.session_id, delta)

    def _skipped(self, call: _Call) -> FinishedCall:
        p = call.prepared
        why = self.halt_reason or "the turn stopped"
        return FinishedCall(p.call_id, p.name, "skipped", f"Not run: {why} before it started.", call.summary)

    # --- events and storage ----------------------------------------------------------

    async def _emit_start(self, call: _Call) -> None:
        p, s = call.prepared, self.scope
        data = ToolStart(call_id=p.call_id, name=p.name, arguments=p.shown, summary=call.summary,
                         arguments_raw=p.arguments_raw)
        def job(tx: Tx) -> None:
            wire.emit(tx, s.session_id, data, turn_id=s.turn_id, admission_id=s.admission_id)

        committed = s.fence.enqueue(job)
        # Queued is enough to open the gate: jobs commit in queue order, so the next
        # call's tool.start cannot overtake this one.
        call.announced = True
        call.started.set()
        await committed
        s.on_progress()

    async def _store(self, batch: list[tuple[_Call, FinishedCall]]) -> None:
        """Result rows and their `tool.complete` events in one transaction, in call order,
        after every earlier call's result."""
        s = self.scope
        for call, out in batch:
            if out.status in ("ok", "error") and _spillable(call):
                content, path = await asyncio.to_thread(
                    spill, self.ex.spill_dir, s.session_id, out.call_id, out.content, s.spill_chars)
                out.content, out.spilled_path = content, path

        def job(tx: Tx) -> None:
            for call, out in batch:
                self._store_one(tx, call, out)

        await s.fence.write(job)
        s.on_progress()

    def _store_one(self, tx: Tx, call: _Call, out: FinishedCall) -> None:
        s = self.scope
        # Who allowed it and what it announced while it ran (kept when it was stopped),
        # beside what the tool reports.
        out.meta = {**call.decided, **call.announced_meta, **out.meta}
        meta = dict(out.meta, duration_ms=out.duration_ms)
        if out.spilled_path:
            meta["spilled_path"] = out.spilled_path
        if not call.announced:  # clients see every call start before it completes
            wire.emit(tx, s.session_id, ToolStart(
                call_id=out.call_id, name=out.name, arguments=call.prepared.shown,
                summary=call.summary, arguments_raw=call.prepared.arguments_raw,
            ), turn_id=s.turn_id, admission_id=s.admission_id)
        messages.insert(tx, s.session_id, "tool", out.content, turn_id=s.turn_id,
                        status=out.status, call_id=out.call_id, tool_name=out.name, meta=meta)
        wire.emit(tx, s.session_id, ToolComplete(
            call_id=out.call_id, name=out.name, status=out.status, summary=out.summary,
            duration_ms=out.duration_ms, spilled_path=out.spilled_path, meta=out.meta or None,
            output=out.content[:OUTPUT_PREVIEW_CHARS] or None,
            output_truncated=len(out.content) > OUTPUT_PREVIEW_CHARS,
        ), turn_id=s.turn_id, admission_id=s.admission_id)

    # --- deadline, interrupt, heartbeats, progress ------------------------------------------

    def _halt(self, reason: str) -> None:
        if not self.halt.is_set():
            self.halt_reason = reason
            self.halt.set()

    async def _monitor(self) -> None:
        s = self.scope
        last = time.monotonic()
        while True:
            await asyncio.sleep(TICK_S)
            now = time.monotonic()
            if s.stop.is_set():
                self._halt(s.why())
            if self.people_waiting == 0:
                self.active_s += now - last
            last = now
            if self.active_s > s.deadline_s and not self.halt.is_set():
                self.deadline_hit = True
                self._halt(f"the tool batch ran past limits.tool_batch_deadline_s ({s.deadline_s:g} s)")
            if any(c.running for c in self.calls):
                # A tool at work is progress: its own timeout and the batch deadline bound
                # it, so the turn's stall watchdog must not take a quiet tool for a hang.
                s.on_progress()
            await self._flush_progress(now)

    async def _flush_progress(self, now: float) -> None:
        for call in self.calls:
            if not call.running:
                continue
            chunk = call.live.take()
            if chunk is not None:
                await self._send_progress(call, ToolProgress(
                    call_id=call.prepared.call_id, text=chunk.text,
                    elided_bytes=chunk.elided_bytes or None))
            elif now - max(call.last_progress, call.began) >= HEARTBEAT_S:
                await self._send_progress(call, ToolProgress(
                    call_id=call.prepared.call_id, text="", elapsed_s=int(now - call.began)))

    async def _drain_progress(self, call: _Call) -> None:
        """Sends what the finished call printed that was not sent yet."""
        while (chunk := call.live.take(final=True)) is not None:
            await self._send_progress(call, ToolProgress(
                call_id=call.prepared.call_id, text=chunk.text,
                elided_bytes=chunk.elided_bytes or None))

    async def _send_progress(self, call: _Call, data: ToolProgress) -> None:
        s = self.scope
        call.last_progress = time.monotonic()
        try:
            # Queued at once (no await before the enqueue), so one call's chunks, taken in
            # order by the monitor and then by the finished call, commit in that order.
            def job(tx: Tx) -> None:
                wire.emit(tx, s.session_id, data, turn_id=s.turn_id,
                          admission_id=s.admission_id)

            await s.fence.write(job)
        except StoreUnavailable:
            pass  # progress is a courtesy; results are what must be stored
        s.on_progress()


def _done(call: _Call) -> bool:
    return call.task is not None and call.task.done()


def _result(call: _Call) -> FinishedCall:
    assert call.task is not None
    return call.task.result()


def _spillable(call: _Call) -> bool:
    tool = call.prepared.tool
    return tool is None or tool.spill


def _summary(p: PreparedCall) -> str:
    if p.tool is not None and p.error is None:
        try:
            return p.tool.summary(p.arguments)[:300]
        except Exception:
            pass
    return p.name
