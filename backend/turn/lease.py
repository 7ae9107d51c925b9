"""The turn lease: a session's room card, so only one process writes its transcript at a time.

A turn takes its session's lease before it touches the transcript.  The
lease expires after `lease.ttl_s` unless its holder refreshes it (every
`lease.refresh_s`, an UPDATE fenced on the holder, so a holder that lost it
finds out instead of extending someone else's).  A lease may be taken over
when it has expired, or when its holder is provably dead: same host and pid
namespace, and that pid is gone, a zombie, or now belongs to a process that
started at another time.  A holder whose liveness cannot be judged (another host or
namespace) is waited out.  Losing the lease interrupts the turn at once.

The same task watches liveness: a turn with no progress for
`limits.stall_timeout_s` is interrupted even though its refresher is alive
(a provider that stopped sending).  Time spent waiting for a person does not
count as a stall, nor does a running tool (the executor reports it as progress;
its own timeout and `limits.tool_batch_deadline_s` bound it).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Awaitable, Callable

from backend.store import admissions, leases
from backend.store.db import Database, Tx
from backend.store.fenced import count_takeover
from backend.store.leases import Holder, LeaseRecord, provably_dead
from backend.turn.finalize import close_tail, mark_lost

log = logging.getLogger("turn")

WAIT_POLL_S = 1.0
TAKEN_OVER_RESULT = (
    "The turn that made this call lost its hold on the session before the result was "
    "recorded, so the outcome is not known. Check before relying on it or running it again."
)
HOLDER_DEAD_NOTE = (
    "The process running this turn died, so another took over the session. The turn's "
    "outcome is unknown; it will not be re-run. Send a new message to continue."
)
LEASE_EXPIRED_NOTE = (
    "The process running this turn stopped renewing its hold on the session (paused, or cut "
    "off from the database), so another took over the session. The turn's outcome is "
    "unknown; it will not be re-run. Send a new message to continue."
)


def try_take(tx: Tx, session_id: str, holder: Holder, ttl: float) -> LeaseRecord | None:
    """Takes the lease if it is free, expired or held by a dead process; else returns the
    lease that holds it.  Runs inside the caller's transaction.

    Taking another holder's lease takes its turn too: the taker ends it `unknown`
    (take_turn), since the holder's own writes are fenced on the lease from now on and its
    end will never be written by it."""
    now = time.time()
    row = leases.current(tx, session_id)
    if row is not None and row.holder != holder:
        if row.expires_at > now and not provably_dead(row.holder):
            return row
        dead = row.expires_at > now
        log.warning("session %s: taking over the lease of %s (%s)", session_id, row.holder,
                    "holder is dead" if dead else "expired")
        take_turn(tx, row, HOLDER_DEAD_NOTE if dead else LEASE_EXPIRED_NOTE)
    leases.put(tx, session_id, holder, now, ttl)
    return None


def take_turn(tx: Tx, lease: LeaseRecord, note: str) -> None:
    """Ends the turn `lease` names `unknown`, for a taker: its calls without results get
    `unknown` ones, text it streamed is kept, `note` says what happened, and its admission
    and the steers that joined it become `unknown`, exactly as after a crash (the next
    prompt or admission.resolve settles them); then the lease is dropped.  A turn already
    settled only has its open calls closed."""
    sid, turn_id = lease.session_id, lease.holder.turn_id
    rows = admissions.started_of_turn(tx, sid, turn_id)
    if rows:
        mark_lost(tx, rows[0], note, TAKEN_OVER_RESULT)
        for joined in rows[1:]:
            admissions.mark_unknown(tx, joined.admission_id)
        count_takeover(tx)
    else:
        close_tail(tx, sid, turn_id, "unknown", TAKEN_OVER_RESULT)
    leases.release(tx, sid, lease.holder)


class LeaseWatch:
    """Refreshes a held lease and watches the turn's liveness until stopped.

    `on_lost(reason)` is called once, from the watch task, when the lease is lost
    or the turn stalls; the caller interrupts the turn with that reason.
    """

    def __init__(
        self, db: Database, session_id: str, holder: Holder, *, ttl: float, refresh: float,
        stall: float, on_lost: Callable[[str], None],
    ) -> None:
        self.db = db
        self.session_id = session_id
        self.holder = holder
        self.ttl = ttl
        self.refresh_s = refresh
        self.stall_s = stall
        self.on_lost = on_lost
        self.last_progress = time.monotonic()
        self.waiting_for_person = 0
        self._task: asyncio.Task[None] | None = None

    def progress(self) -> None:
        self.last_progress = time.monotonic()

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"lease-{self.session_id}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        tick = max(0.05, min(self.refresh_s, self.stall_s / 4))
        next_refresh = time.monotonic() + self.refresh_s
        expires = time.time() + self.ttl
        while True:
            await asyncio.sleep(tick)
            if self.waiting_for_person:
                self.progress()
            if time.monotonic() - self.last_progress > self.stall_s:
                self.on_lost(f"Stopped after no progress for {self.stall_s:g} s (the limit is "
                             "limits.stall_timeout_s in config.toml).")
                return
            if time.monotonic() < next_refresh:
                continue
            next_refresh = time.monotonic() + self.refresh_s
            until = time.time() + self.ttl
            try:
                held = await self.db.write(functools.partial(
                    leases.refresh, session_id=self.session_id, holder=self.holder, expires_at=until
                ))
            except Exception as exc:  # the store is failing: keep trying until the TTL runs out
                log.warning("session %s: lease refresh failed: %s", self.session_id, exc)
                if time.time() >= expires:
                    self.on_lost("Stopped: the session lease could not be renewed (the database "
                                 "took no writes).")
                    return
                continue
            if not held:
                log.warning("session %s: lease lost to another holder", self.session_id)
                self.on_lost("Stopped: another Turnkey process took over this session's lease.")
                return
            expires = until


async def wait_for_lease(
    db: Database, take: Callable[[Tx], LeaseRecord | None], *, wait_s: float,
    stop: asyncio.Event, on_waiting: Callable[[LeaseRecord], Awaitable[None]],
) -> str | None:
    """Polls `take` (one transaction each: it takes the lease, or returns the row that
    holds it) until the lease is taken.

    Returns None once taken, or the reason it was not: interrupted, or waited
    `wait_s` in vain.  `on_waiting` is awaited once, with the holder's lease.
    """
    deadline = time.monotonic() + wait_s
    announced = False
    while True:
        row = await db.write(take)
        if row is None:
            return None
        if not announced:
            announced = True
            await on_waiting(row)
        if time.monotonic() >= deadline:
            return f"Interrupted: the session stayed busy in another process for {wait_s:g} s."
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=min(WAIT_POLL_S, deadline - time.monotonic()))
        if stop.is_set():
            return "Interrupted while waiting for the session lease."
