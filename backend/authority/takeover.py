"""Peers on one PostgreSQL database: a heartbeat, and taking over a dead peer's work.

Every `lease.refresh_s` this backend beats its heartbeat (store/peers.py) and looks
for peers that stopped beating for `lease.ttl_s`: their started turns whose lease ran
out become `unknown` (never re-run, exactly as after a restart), their approvals
expire, and a session whose queue has waited longer than the TTL with no live lease
is drained here.  Claims stay exactly-once however many backends look at once: a
claim is one serializable transaction on the session's locked row
(store/admissions.lock_queue).

Other backends' requests (an interrupt for a turn that runs there) arrive as store
signals (store/pg.py `signal`, `on_signal`).
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
                 config: Callable[[], Config]) -> None:
        self.db = db
        self.authority = authority
        self.epoch = epoch
        self.config = config
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="peers")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        with contextlib.suppress(StoreUnavailable):
            await self.db.write(functools.partial(peers.leave, epoch=self.epoch))

    async def _run(self) -> None:
        while True:
            lease = self.config().lease
            await asyncio.sleep(max(0.2, min(lease.refresh_s, lease.ttl_s / 3)))
            try:
                await self.sweep()
            except StoreUnavailable as exc:
                log.warning("the heartbeat could not be written: %s", exc.message)

    async def sweep(self) -> None:
        """One heartbeat and one look at the peers."""
        ttl = self.config().lease.ttl_s

        def job(tx: Any) -> list[str]:
            now = time.time()
            peers.beat(tx, self.epoch, now)
            peers.forget_old(tx, now, FORGET_AFTER_S)
            return take_over(tx, self.epoch, peers.live_epochs(tx, now, ttl), ttl)

        for session_id in await self.db.write(job):
            log.info("session %s: draining a queue no live backend drains", session_id)
            self.authority.wake(session_id)

    def on_signal(self, data: dict[str, Any]) -> None:
        """Another backend's request: interrupt a turn that runs here."""
        if data.get("kind") == INTERRUPT and isinstance(data.get("session_id"), str):
            reason = data.get("reason")
            if isinstance(reason, str) and reason:
                self.authority.interrupt(data["session_id"], reason)
            else:
                self.authority.interrupt(data["session_id"])
