"""Sub-agents: the child sessions that `delegate` calls run, admitted like typed prompts.

A delegate call (backend/tools/delegate.py) gets here through the `Delegator`
protocol.  Its child is a session of its own, linked to the parent's session and
call (`sessions.delegated_from` / `delegated_call`, one child per call), with the
parent's folder and model; approvals and the sandbox are the backend's, so the
same.  The framed task enters through `SessionAuthority.submit` with the internal
principal `delegate:<parent session>` and the request id `delegate:<call id>`: a
call that ran again would find the same child and the same admission, never start
a second.  The parent's call then waits for that admission to settle, woken by
the committed events that can settle it (`observe`, chained to the store's
publisher), and re-reads the row each time.

At most `limits.delegate_concurrency` children run at once in the backend per
level of delegation (with the default depth of 1 there is one level); a further
call waits for a slot before its child exists (and says so in its live output).
A child waiting for a person pauses the parent batch's deadline
(`Executor.watch_person` relays it to the call's `ctx.on_person`).  Stopping the
parent's call (interrupt, deadline, shutdown, deletion) interrupts the child's
turn, or cancels its admission if it has not started, and waits a little for it
to end, so the parent's turn closes after its child's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from backend import wire
from backend.authority.queue import SessionAuthority
from backend.authority.recovery import DELEGATE_PRINCIPAL
from backend.config import ConfigFile
from backend.errors import AdmissionState, NotFound
from backend.ids import new_id
from backend.store import admissions, sessions
from backend.store.db import Database, Tx
from backend.store.events import StoredEvent
from backend.tools.base import ToolContext
from backend.tools.delegate import ChildEnd, ChildOutcome, Delegation
from backend.tools.executor import Executor
from shared.protocol import (
    EVENT_NAMES,
    AdmissionSettled,
    PromptSubmitParams,
    SessionCreated,
    SessionDeletedEvent,
    SessionUpdated,
)

log = logging.getLogger("authority")

PRINCIPAL_PREFIX = DELEGATE_PRINCIPAL
REQUEST_PREFIX = "delegate:"
# The child's closing note and failure_reason when its parent's call was stopped.
PARENT_STOPPED = "Its parent turn was stopped, so this sub-agent stopped too."
STOP_WAIT_S = 10.0  # how long a stopped call waits for its child's turn to end
# Committed events after which a child's admission may have settled (or its session gone).
_WAKING = frozenset(EVENT_NAMES[t] for t in (AdmissionSettled, SessionUpdated, SessionDeletedEvent))


class ChildSessions:
    """The backend's `Delegator`: creates, runs, waits for and stops child sessions."""

    def __init__(self, db: Database, authority: SessionAuthority, executor: Executor,
                 config: ConfigFile) -> None:
        self.db = db
        self.authority = authority
        self.executor = executor
        self.config = config
        # Children holding a slot, and calls waiting for one, by the delegating session's depth:
        # each level has its own slots, so a child that delegates never waits for a slot its
        # own level holds (one shared pool could deadlock: every slot held by a child waiting
        # for a slot for its grandchild).
        self.running: dict[int, int] = {}
        self._slot_waiters: dict[int, list[asyncio.Future[None]]] = {}
        self._wakes: dict[str, asyncio.Event] = {}  # by child session id and by admission id

    # --- the Delegator protocol -------------------------------------------------------------

    def offered(self, depth: int) -> bool:
        return depth < self.config.config.limits.delegate_depth

    async def delegate(self, job: Delegation, ctx: ToolContext) -> ChildEnd:
        depth = await self.db.read(lambda tx: sessions.delegation_depth(tx, job.parent_session_id))
        async with self._slot(depth, ctx):
            child = await self.db.write(lambda tx: child_of(tx, job))
            if ctx.announce is not None:
                await ctx.announce({"child_session_id": child})
            ctx.progress(f"Sub-agent session {child} is working on it.\n")
            wake = asyncio.Event()
            self._wakes[child] = wake
            try:
                return await self._run(job, child, wake, ctx)
            finally:
                self._wakes.pop(child, None)

    # --- the store's publisher, chained ----------------------------------------------------

    def observe(self, item: Any) -> None:
        """Sees every committed event: wakes the call waiting for the child it concerns."""
        if not isinstance(item, StoredEvent) or item.event.type not in _WAKING:
            return
        event = item.event
        for key in (event.session_id, event.admission_id):
            wake = self._wakes.get(key) if key else None
            if wake is not None:
                wake.set()

    # --- one child ----------------------------------------------------------------------------

    async def _run(self, job: Delegation, child: str, wake: asyncio.Event,
                   ctx: ToolContext) -> ChildEnd:
        params = PromptSubmitParams(session_id=child, request_id=REQUEST_PREFIX + job.call_id,
                                    text=job.prompt)
        # Shielded: a stop that lands while the admission commits must still find (and
        # stop) the child whose turn that commit started.
        submitting = asyncio.ensure_future(
            self.authority.submit(PRINCIPAL_PREFIX + job.parent_session_id, params))
        admission_id: str | None = None
        relay = _PersonRelay(ctx)
        # Before the admission: the child's turn may start (and ask) as soon as it commits.
        unwatch = self.executor.watch_person(child, relay)
        try:
            receipt = await asyncio.shield(submitting)
            admission_id = receipt.admission_id
            self._wakes[admission_id] = wake
            return await self._wait(child, admission_id, wake)
        except asyncio.CancelledError:
            if admission_id is None:
                with contextlib.suppress(Exception):  # a failed admission started nothing
                    admission_id = (await submitting).admission_id
            if admission_id is not None:
                await self._stop(child, admission_id, wake)
            raise
        finally:
            unwatch()
            relay.release()
            if admission_id is not None:
                self._wakes.pop(admission_id, None)

    async def _wait(self, child: str, admission_id: str, wake: asyncio.Event) -> ChildEnd:
        """Until the child's admission settles; re-read after every event that may settle it."""
        while True:
            wake.clear()  # before the read: an event committed after it sets it again
            end = await self.db.read(lambda tx: _end_of(tx, child, admission_id))
            if end is not None:
                return end
            await wake.wait()

    async def _stop(self, child: str, admission_id: str, wake: asyncio.Event) -> None:
        """The parent's call was stopped: so is the child, and its end is waited for a while."""
        self.authority.interrupt(child, PARENT_STOPPED)
        with contextlib.suppress(AdmissionState, NotFound):
            await self.authority.cancel(admission_id)  # only if it has not started yet
        self.authority.interrupt(child, PARENT_STOPPED)  # it may have started meanwhile
        try:
            await asyncio.wait_for(self._wait(child, admission_id, wake), STOP_WAIT_S)
        except TimeoutError:
            log.warning("sub-agent session %s did not end within %.0f s of its parent's stop",
                        child, STOP_WAIT_S)

    # --- the concurrency bound -------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _slot(self, depth: int, ctx: ToolContext) -> AsyncIterator[None]:
        """One of the `limits.delegate_concurrency` slots of sessions `depth` delegations
        below a person's (read at each call, so config.set applies to the next one); waiters
        are woken in arrival order and check again."""
        waiters = self._slot_waiters.setdefault(depth, [])
        told = False
        while self.running.get(depth, 0) >= self.config.config.limits.delegate_concurrency:
            if not told:
                ctx.progress(f"Waiting for a free sub-agent slot ({self.running[depth]} running).\n")
                told = True
            waiter = asyncio.get_running_loop().create_future()
            waiters.append(waiter)
            try:
                await waiter
            finally:
                with contextlib.suppress(ValueError):
                    waiters.remove(waiter)
        self.running[depth] = self.running.get(depth, 0) + 1
        try:
            yield
        finally:
            self.running[depth] -= 1
            for waiter in list(waiters):
                if not waiter.done():
                    waiter.set_result(None)


class _PersonRelay:
    """Passes a child turn's waits for a person to the parent's call; `release` takes back
    any still counted when the call ends, so the parent's counter never stays raised."""

    def __init__(self, ctx: ToolContext) -> None:
        self.ctx = ctx
        self.count = 0

    def __call__(self, delta: int) -> None:
        if self.count + delta < 0:
            return  # a -1 without its +1 (never expected): the parent's count must not go below
        self.count += delta
        self.ctx.on_person(delta)
        if delta > 0 and self.count == 1:
            self.ctx.progress("The sub-agent is waiting for an approval in its session.\n")
        elif delta < 0 and self.count == 0:
            self.ctx.progress("The sub-agent goes on.\n")

    def release(self) -> None:
        if self.count:
            self.ctx.on_person(-self.count)
            self.count = 0


def child_of(tx: Tx, job: Delegation) -> str:
    """The call's child session: found if the call made one already, else created."""
    found = sessions.delegated_child(tx, job.parent_session_id, job.call_id)
    if found is not None:
        return found
    parent = sessions.row(tx, job.parent_session_id)
    if parent is None:
        raise NotFound("session", job.parent_session_id)
    child = new_id("ses")
    sessions.insert_delegated(tx, child, parent, job.call_id, job.title)
    session = sessions.get(tx, child)
    assert session is not None
    wire.broadcast(tx, child, SessionCreated(session=wire.session(session)))
    return child


# A settled admission's outcome, as the call reports it, and the reason when none is stored.
_OUTCOMES: dict[str, tuple[ChildOutcome, str]] = {
    "failed": ("failed", "its turn failed"),
    "rejected": ("failed", "its task was refused"),
    "interrupted": ("interrupted", "its turn was stopped"),
    "cancelled": ("cancelled", "its task was cancelled before it started"),
}


def _end_of(tx: Tx, child: str, admission_id: str) -> ChildEnd | None:
    """How the child's admission ended; None while it is queued or running."""
    row = admissions.by_id(tx, admission_id)
    if row is None or not sessions.exists(tx, child):
        return ChildEnd(child, "deleted", reason="its session was deleted while it worked")
    if row.status == "unknown":
        return ChildEnd(child, "unknown", reason="the backend stopped, or could not save its "
                        "end, while it ran")
    if row.status != "terminal":
        return None
    if row.outcome == "completed":
        return ChildEnd(child, "completed", final_text=row.final_text or "")
    outcome, default = _OUTCOMES.get(row.outcome or "failed", _OUTCOMES["failed"])
    return ChildEnd(child, outcome, reason=row.failure_reason or default)
