"""Scheduled prompts: the firing transaction and the scheduler task that runs it on time.

A firing is one write job (`fire_due`): it records (schedule, fire time) in
schedule_fires — whose primary key makes a second firing of the same time
impossible, whichever process, restart or retry tries it — starts the session
when the schedule asks for a new one, admits the prompt through the authority's
own path (same row, events, queue and claim as a typed prompt) and moves
`next_fire_at` on.  A crash before the commit leaves the firing due, so the next
start fires it; after the commit it is an admission like any other, recovered
like one.

The scheduler sleeps until the earliest `next_fire_at` (at most MAX_SLEEP_S, so a
clock that jumps is noticed), is woken early by any change of a schedule, and
waits out a store that cannot write as the drainers do.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from backend import wire
from backend.authority import timing
from backend.authority.payload import Payload
from backend.authority.queue import RETRY_FIRST_S, RETRY_MAX_S, SessionAuthority, admit
from backend.errors import InvalidParams, StoreUnavailable
from backend.ids import new_id, stamp
from backend.store import admissions, compression, schedules, sessions, tokens
from backend.store.db import Database, Tx
from backend.store.schedules import ScheduleRecord
from backend.turn.route import Claim
from shared import logs
from shared.protocol import Receipt, SessionCreated

log = logging.getLogger("authority")

MAX_SLEEP_S = 60.0  # the longest sleep: a wall clock moved meanwhile is seen this late

Admit = Callable[[Tx, str, str, str, Payload], tuple[Receipt, Claim | None]]


@dataclass(frozen=True)
class Fired:
    """A committed firing: its receipt, and the turn its commit claimed (if any)."""

    schedule_id: str
    fire_at: str
    receipt: Receipt
    claim: Claim | None


def repeat_of(row: ScheduleRecord) -> timing.Repeat:
    return timing.repeat(row.cron, row.at, timing.zone(row.timezone, row.timezone))


def request_id(schedule_id: str, fire_at: str) -> str:
    """The admission's request id: one per (schedule, fire time), under the schedule's own
    principal, so a retried firing finds its admission instead of making a second."""
    return f"{admissions.SCHEDULED}{schedule_id}:{fire_at}"


def principal(schedule_id: str) -> str:
    return f"{admissions.SCHEDULED}{schedule_id}"


def fire_due(
    tx: Tx, schedule_id: str, now: datetime, since: datetime, default_model: str,
    admit_fn: Admit | None = None,
) -> Fired | None:
    """The firing transaction for one schedule at `now`, by a scheduler watching since
    `since` (see the module docstring and `timing.due`).  Reads the row here, inside the job,
    so a concurrent update or a second process decides on what is committed.  `admit_fn`
    claims the turn too (the authority's); without it the admission is only queued.
    Returns None when nothing fired."""
    row = schedules.get(tx, schedule_id)
    if row is None or not row.enabled or row.next_fire_at is None:
        return None
    try:
        rep = repeat_of(row)
    except InvalidParams as exc:  # e.g. a zone this computer's time zone data no longer has
        _stop(tx, schedule_id, _Stopped(f"its timing cannot be read any more ({exc.message}); "
                                        "edit it"))
        return None
    step = timing.due(rep, timing.parse_iso(row.next_fire_at), now, row.missed, since)
    next_at = timing.iso(step.next_at) if step.next_at is not None else None
    if step.fire_at is None:
        if next_at != row.next_fire_at:
            schedules.update(tx, schedule_id, {"next_fire_at": next_at})  # a skipped firing
        return None
    fire_at = timing.iso(step.fire_at)
    if not schedules.claim_fire(tx, schedule_id, fire_at):
        # Fired already (by another process, or before a crash): only move on.
        schedules.update(tx, schedule_id, {"next_fire_at": next_at})
        return None
    target = _revoked(tx, row, stamp(now.timestamp())) or _target(tx, row, default_model)
    if isinstance(target, _Stopped):
        _stop(tx, schedule_id, target)
        return None
    payload = Payload(text=row.text)
    rid = request_id(schedule_id, fire_at)
    if admit_fn is not None:
        receipt, claim = admit_fn(tx, principal(schedule_id), target, rid, payload)
    else:
        receipt, claim = admit(tx, principal(schedule_id), target, rid, payload), None
    schedules.fired(tx, schedule_id, fire_at, receipt.admission_id, target)
    schedules.update(tx, schedule_id, {
        "next_fire_at": next_at, "last_fired_at": fire_at,
        "last_admission_id": receipt.admission_id, "last_session_id": target,
    }, fired=True)
    return Fired(schedule_id, fire_at, receipt, claim)


@dataclass(frozen=True)
class _Stopped:
    reason: str


def _stop(tx: Tx, schedule_id: str, why: _Stopped) -> None:
    """Disables a schedule that cannot fire, saying why (shown with it), instead of failing
    its every round."""
    schedules.update(tx, schedule_id, {"enabled": False, "disabled_reason": why.reason,
                                       "next_fire_at": None})
    log.warning("schedule %s disabled: %s", schedule_id, why.reason)


def _revoked(tx: Tx, row: ScheduleRecord, at: str) -> _Stopped | None:
    """A schedule made with a minted token submits no more once that token is revoked, has
    expired (by `at`, the firing's time as an `ids.now` stamp) or has lost `submit`
    (token.update): ending a token must stop what it set going.  (The owner's principal is
    no minted token: it is not in the table.)"""
    made_by = tokens.get(tx, row.principal)
    if made_by is None:
        return None
    if made_by.revoked:
        return _Stopped("the token that created it was revoked; create it again to keep it")
    if not made_by.live(at):
        return _Stopped(f"the token that created it expired at {made_by.expires_at}; create "
                        "it again to keep it")
    if "submit" not in made_by.scopes:
        return _Stopped("the token that created it no longer has the submit scope; create it "
                        "again to keep it")
    return None


def _target(tx: Tx, row: ScheduleRecord, default_model: str) -> str | _Stopped:
    """The session this firing runs in: the schedule's own (followed to its newest child if
    compression rotated it), or a new one."""
    if row.session_id is not None:
        leaf = compression.leaf(tx, row.session_id)
        if not sessions.exists(tx, leaf):
            return _Stopped("its session was deleted; edit it to start a new session each time, "
                            "or delete it")
        return leaf
    spec = json.loads(row.new_session or "{}")
    cwd = spec.get("cwd") or str(Path.home())
    if not Path(cwd).is_dir():
        return _Stopped(f"its folder {cwd!r} no longer exists; create it or edit the schedule")
    session_id = new_id("ses")
    title = (spec.get("title") or "").strip()
    sessions.insert(tx, session_id, title or sessions.UNTITLED, cwd,
                    spec.get("model") or default_model, titled=bool(title))
    session = sessions.get(tx, session_id)
    assert session is not None
    wire.broadcast(tx, session_id, SessionCreated(session=wire.session(session)))
    return session_id


class Scheduler:
    """The one task that fires schedules on time; `wake` after any change of a schedule."""

    def __init__(self, db: Database, authority: SessionAuthority,
                 default_model: Callable[[], str]) -> None:
        self.db = db
        self.authority = authority
        self.default_model = default_model
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._since = datetime.now(UTC)

    def start(self) -> None:
        """Starts firing.  Firings whose time came before this call were missed (the backend
        was down): each schedule's `missed` policy decides about them."""
        self._since = datetime.now(UTC)
        self._task = asyncio.create_task(self._run(), name="scheduler")

    def wake(self) -> None:
        self._wake.set()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        delay = RETRY_FIRST_S
        while True:
            self._wake.clear()
            try:
                wait = await self._tick()
                delay = RETRY_FIRST_S
            except StoreUnavailable as exc:
                if delay == RETRY_FIRST_S:
                    log.warning("scheduler: cannot fire schedules (%s); trying again until the "
                                "database takes writes", exc.message)
                wait, delay = delay, min(delay * 2, RETRY_MAX_S)
            except Exception:
                logs.internal(log, "scheduler failed a round; trying again")
                wait = RETRY_MAX_S
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), wait)

    async def _tick(self) -> float:
        """Fires every due schedule, each in its own job; returns how long to sleep."""
        now = datetime.now(UTC)
        due = await self.db.read(lambda tx: schedules.due(tx, timing.iso(now)))
        model = self.default_model()
        for schedule_id in due:
            job = functools.partial(fire_due, schedule_id=schedule_id, now=now, since=self._since,
                                    default_model=model, admit_fn=self.authority.admit_internal)
            fired = await self.db.write(job)
            if fired is not None:
                log.info("schedule %s fired for %s: admission %s", fired.schedule_id,
                         fired.fire_at, fired.receipt.admission_id)
                self.authority.admitted(fired.receipt, fired.claim)
        earliest = await self.db.read(schedules.earliest)
        if earliest is None:
            return MAX_SLEEP_S
        left = (timing.parse_iso(earliest) - datetime.now(UTC)).total_seconds()
        return min(MAX_SLEEP_S, max(0.0, left) + 0.01)
