"""The one door every write of a running turn goes through: its lease, checked in the write.

A turn's writes (its deltas and events, tool rows and results, approvals, checkpoints,
steers joining it, and its end) are jobs passed to `TurnFence.write` (or `enqueue`,
`write_patiently`), which runs the check first in the job's own transaction: the
session's lease still names this holder (its process, epoch and turn).  A backend that
was paused past its lease, or declared dead by its peers, and taken over finds another
holder (or none) there and writes nothing: the job raises LeaseLost and is rolled back.
Transactions are serializable on PostgreSQL and single-writer on SQLite, so a takeover
cannot slip between the check and the write.  tests/unit/test_fenced_writes.py checks
that the turn's modules write through nothing else.

`COUNTS` is what backend.stats reports of it: the writes refused here, and the turns
this backend took over from another holder (counted when that transaction commits).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from backend.errors import LeaseLost
from backend.store import leases
from backend.store.leases import Holder
from backend.store.writer import AbstractStore, AfterCommit, Tx

T = TypeVar("T")


@dataclass
class FleetCounts:
    takeovers: int = 0  # other holders' turns this backend ended `unknown` to take the session
    fenced_writes: int = 0  # this backend's turn writes refused: its lease was no longer its own


COUNTS = FleetCounts()


def count_takeover(tx: Tx) -> None:
    """Counts one takeover once `tx` commits (a rolled-back or retried job counts nothing)."""

    def add() -> None:
        COUNTS.takeovers += 1

    tx.publish(AfterCommit(add))


class Leased(Protocol):
    """A turn as its fence sees it: the session it runs in now (a rotation moves it to a
    child session, with its lease) and the lease holder it is."""

    @property
    def session_id(self) -> str: ...

    @property
    def holder(self) -> Holder: ...


@dataclass(frozen=True)
class TurnFence:
    """A running turn's writes, each fenced on its lease."""

    db: AbstractStore
    turn: Leased

    @property
    def session_id(self) -> str:
        return self.turn.session_id

    def check(self, tx: Tx) -> None:
        """Raises LeaseLost unless the session's lease names this holder."""
        row = leases.current(tx, self.turn.session_id)
        if row is None or row.holder != self.turn.holder:
            raise LeaseLost("this turn no longer holds its session's lease (it was taken "
                            "over); nothing more of it is written")

    def wrap(self, job: Callable[[Tx], T]) -> Callable[[Tx], T]:
        @functools.wraps(job)  # the writer names a hold by the job it wraps
        def fenced(tx: Tx) -> T:
            self.check(tx)
            return job(tx)

        return fenced

    async def write(self, job: Callable[[Tx], T]) -> T:
        try:
            return await self.db.write(self.wrap(job))
        except LeaseLost:
            COUNTS.fenced_writes += 1
            raise

    def enqueue(self, job: Callable[[Tx], T]) -> asyncio.Future[T]:
        """Queued now, in order with the turn's other writes; the future raises LeaseLost
        when the fence refused it."""
        future = self.db.enqueue(self.wrap(job))
        future.add_done_callback(_tally)
        return future

    async def write_patiently(self, job: Callable[[Tx], T], delays: Sequence[float]) -> T:
        """`write`, tried again while the store is unavailable; never after a refusal."""
        try:
            return await self.db.write_patiently(self.wrap(job), delays)
        except LeaseLost:
            COUNTS.fenced_writes += 1
            raise


def _tally(future: asyncio.Future[Any]) -> None:
    if not future.cancelled() and isinstance(future.exception(), LeaseLost):
        COUNTS.fenced_writes += 1
