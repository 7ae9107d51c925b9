"""backend.list: the backend processes on this backend's store, as an operator reads them.

On PostgreSQL that is the `backends` table (store/peers.py: each backend's start, heartbeat,
clean stop, and `dead_at` once a peer declared it dead), judged on the database's clock with
its `[lease] dead_after_s`; on SQLite, this process alone (one backend per file, so its
heartbeat is always now).  Sessions held are the unexpired turn leases naming each epoch.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from backend import wire
from backend.store import leases, peers
from backend.store.db import POSTGRESQL, Database, Tx
from backend.store.peers import PeerRecord
from shared import protocol as p
from shared.config import Config


class Fleet:
    """The backends on this store, for `backend.list`."""

    def __init__(self, db: Database, epoch: int, config: Callable[[], Config],
                 started_at: float) -> None:
        self.db = db
        self.epoch = epoch
        self.config = config
        self.started_at = started_at  # epoch seconds: this process's start (SQLite's row)

    async def listing(self, everything: bool = False) -> p.BackendListResult:
        """Live backends first, then by start; those gone for over a day only if
        `everything`."""

        def read(tx: Tx) -> tuple[float, list[PeerRecord], dict[int, int]]:
            local = time.time()  # leases expire on their holders' clocks
            if tx.dialect != POSTGRESQL:
                now = local
                rows = [peers.me(self.epoch, self.started_at, now)]
            else:
                now = peers.now(tx)  # heartbeats are on the database server's clock
                rows = peers.listing(tx, None if everything else now - p.RECENT_S, self.epoch)
            return now, rows, leases.held_by_epoch(tx, local)

        now, rows, held = await self.db.read(read)
        dead_after = self.config().lease.dead_after_s
        shown = [wire.peer(r, now, dead_after, held.get(r.epoch, 0), r.epoch == self.epoch)
                 for r in rows]
        shown.sort(key=lambda b: (b.state != "live", b.started_at, b.epoch))
        return p.BackendListResult(store="postgresql" if self.db.dialect == POSTGRESQL else "sqlite",
                                   dead_after_s=dead_after, backends=shown)
