"""The backends table (PostgreSQL store only): which backend processes share this database.

Each backend registers its epoch at start and beats its heartbeat every
`lease.refresh_s`.  A peer whose heartbeat is older than `lease.ttl_s` is taken
for dead, whatever host it ran on: its started turns become `unknown` and what
was queued behind them may be taken over (authority/takeover.py).  A pid means
nothing across hosts; the epoch is unique per start and is what leases and
admissions name.
"""

from __future__ import annotations

import os
import socket

from backend.store.db import Tx


def join(tx: Tx, epoch: int, now: float) -> None:
    """Registers this process (its epoch) as a live backend."""
    tx.execute("INSERT INTO backends (epoch, host, pid, started_at, heartbeat_at) "
               "VALUES (?, ?, ?, ?, ?)", (epoch, socket.gethostname(), os.getpid(), now, now))


def beat(tx: Tx, epoch: int, now: float) -> None:
    tx.execute("UPDATE backends SET heartbeat_at = ? WHERE epoch = ?", (now, epoch))


def leave(tx: Tx, epoch: int) -> None:
    """A clean stop: peers need not wait out the heartbeat to know it is gone."""
    tx.execute("UPDATE backends SET stopped = 1 WHERE epoch = ?", (epoch,))


def live_epochs(tx: Tx, now: float, ttl: float) -> frozenset[int]:
    """The epochs of backends that beat within `ttl` seconds and did not stop."""
    return frozenset(int(r[0]) for r in tx.all(
        "SELECT epoch FROM backends WHERE stopped = 0 AND heartbeat_at > ?", (now - ttl,)))


def forget_old(tx: Tx, now: float, keep_s: float) -> None:
    """Drops rows of backends gone for longer than `keep_s` (they are history only)."""
    tx.execute("DELETE FROM backends WHERE heartbeat_at < ?", (now - keep_s,))
