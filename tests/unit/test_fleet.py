"""backend/authority/fleet.py on the SQLite store: this backend alone, beating now, holding
the sessions its turns' leases name."""

from __future__ import annotations

import socket
import time

from backend.authority.fleet import Fleet
from backend.store import leases
from backend.store.db import Database, Tx
from backend.store.leases import Holder
from shared.config import Config


async def test_on_sqlite_the_listing_is_this_backend_with_its_leases(db: Database) -> None:
    now = time.time()

    def take(tx: Tx) -> None:
        leases.put(tx, "mine", Holder(1, "s", "b", 3, "t1"), now, 300)
        leases.put(tx, "gone", Holder(1, "s", "b", 3, "t2"), now - 600, 300)  # expired
        leases.put(tx, "older", Holder(1, "s", "b", 2, "t3"), now, 300)  # an earlier start's

    await db.write(take)
    config = Config()
    result = await Fleet(db, 3, lambda: config, started_at=now - 42).listing()
    assert (result.store, result.dead_after_s) == ("sqlite", config.lease.dead_after_s)
    [me] = result.backends
    assert (me.epoch, me.host, me.this, me.state) == (3, socket.gethostname(), True, "live")
    assert me.sessions_held == 1
    assert me.heartbeat_age_s < 1
    assert me.started_at < me.heartbeat_at
    assert me.dead_at is None
