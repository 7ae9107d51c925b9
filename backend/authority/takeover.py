"""Peers on one PostgreSQL database: a heartbeat, and taking over a dead peer's work.

Every `lease.heartbeat_s` this backend beats its heartbeat (store/peers.py) and looks
for peers silent for `lease.dead_after_s`: each is declared dead for everyone, its
leases are taken at once and its started turns become `unknown` (never re-run, exactly
as after a restart), its approvals expire, and a session whose queue has waited that
long with no live lease is drained here.  Silence counts only while this backend beat:
after the database was down for everyone, nobody is declared dead for it.  A paused
backend that wakes up finds its own row declared dead at its next beat, and stops: its
turns' writes are fenced on the leases it lost (store/fenced.py), so it wrote nothing
meanwhile.  Claims stay
exactly-once however many backends look at once: a claim is one serializable
transaction on the session's locked row (store/admissions.lock_queue).

Other backends' requests (an interrupt for a turn that runs there) arrive as store
signals of kind INTERRUPT (store/pg.py `signal`), which store/signals.py hands to
`on_signal`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Callable
from typing import Any

from backend.authority.queue import SessionAuthority
from backend.authority.recovery import take_over
from backend.errors import StoreUnavailable
from backend.store import leases, peers
from backend.store.db import Database
from backend.store.peers import PeerRecord
from shared.config import Config

log = logging.getLogger("authority")

FORGET_AFTER_S = 7 * 24 * 3600  # rows of long-gone backends are dropped after a week
INTERRUPT = "interrupt"


async def interrupt_anywhere(db: Database, authority: SessionAuthority, session_id: str) -> bool:
    """Interrupts the session's running turn, here or, on a shared PostgreSQL store, in the
    backend whose live lease runs it (a store signal); False when no turn runs."""
    if authority.interrupt(session_id):
        return True
    lease = await db.read(lambda tx: leases.current(tx, session_id))
    if lease is None or lease.expires_at <= time.time():
        return False
    return await db.signal({"kind": INTERRUPT, "session_id": session_id})


class Takeover:
    """The heartbeat and the dead-peer sweep of one backend on a shared database."""

    def __init__(self, db: Database, authority: SessionAuthority, epoch: int,
                 config: Callable[[], Config], on_declared_dead: Callable[[], None],
                 on_taken: Callable[[], None] = lambda: None) -> None:
        self.db = db
        self.on_taken = on_taken  # peers' turns were taken over (their questions' answers)
        self.authority = authority
        self.epoch = epoch
        self.config = config
        self.on_declared_dead = on_declared_dead  # this backend's peers declared it dead
        self.declared_dead = False
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="peers")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if not self.declared_dead:
            with contextlib.suppress(StoreUnavailable):
                await self.db.write(functools.partial(peers.leave, epoch=self.epoch))

    async def _run(self) -> None:
        while not self.declared_dead:
            await asyncio.sleep(self.config().lease.heartbeat_s)
            try:
                await self.sweep()
            except StoreUnavailable as exc:
                log.warning("the heartbeat could not be written: %s", exc.message)

    async def sweep(self) -> None:
        """One heartbeat and one look at the peers: any silent for `lease.dead_after_s` is
        declared dead and its sessions taken over, in this one transaction."""
        dead_after = self.config().lease.dead_after_s

        def job(tx: Any) -> tuple[list[str], list[tuple[PeerRecord, float]]] | None:
            last = peers.beat(tx, self.epoch)
            if last is None:
                return None
            now = peers.now(tx)
            dead = [(peer, now - peer.heartbeat_at)
                    for peer in peers.declare_dead(tx, self.epoch, last, dead_after)]
            peers.forget_old(tx, FORGET_AFTER_S)
            return take_over(tx, self.epoch, peers.live_epochs(tx), dead_after), dead

        swept = await self.db.write(job)
        if swept is None:
            self.declared_dead = True
            log.warning("this backend's peers declared it dead (it did not beat its heartbeat "
                        "for %g s: paused, or cut off from the database) and took over its "
                        "sessions; it writes nothing more and stops", dead_after)
            self.on_declared_dead()
            return
        drained, dead = swept
        if dead:
            self.on_taken()
        for peer, silent in dead:
            log.warning("backend %s pid %d (epoch %d) is dead: no heartbeat for %.1f s; its "
                        "sessions were taken over", peer.host, peer.pid, peer.epoch, silent)
        for session_id in drained:
            log.info("session %s: draining a queue no live backend drains", session_id)
            self.authority.wake(session_id)

    def on_signal(self, data: dict[str, Any]) -> None:
        """Another backend's request: interrupt a turn that runs here."""
        if data.get("kind") == INTERRUPT and isinstance(data.get("session_id"), str):
            review = data.get("review_turn")
            if isinstance(review, str):  # a person's input for a session whose review runs here
                self.authority.interrupt_review(data["session_id"], review)
                return
            reason = data.get("reason")
            if isinstance(reason, str) and reason:
                self.authority.interrupt(data["session_id"], reason)
            else:
                self.authority.interrupt(data["session_id"])
