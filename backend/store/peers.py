"""The backends table (PostgreSQL store only): which backend processes share this database.

Each backend registers its epoch at start and beats its heartbeat every
`lease.refresh_s`.  A peer whose heartbeat is older than `lease.ttl_s` is taken
for dead, whatever host it ran on: its started turns become `unknown` and what
was queued behind them may be taken over (authority/takeover.py).  A pid means
nothing across hosts; the epoch is unique per start and is what leases and
admissions name.
"""

from __future__ import annotations

import socket

from backend.store.db import Tx
from backend.store.leases import Holder, provably_dead


def join(tx: Tx, epoch: int, now: float) -> None:
    """Registers this process (its epoch) as a live backend."""
    me = Holder.here(epoch, "")
    tx.execute("INSERT INTO backends (epoch, host, pid, pid_start, boot_token, started_at, "
               "heartbeat_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
               (epoch, socket.gethostname(), me.pid, me.pid_start, me.boot_token, now, now))


def beat(tx: Tx, epoch: int, now: float) -> None:
    tx.execute("UPDATE backends SET heartbeat_at = ? WHERE epoch = ?", (now, epoch))


def leave(tx: Tx, epoch: int) -> None:
    """A clean stop: peers need not wait out the heartbeat to know it is gone."""
    tx.execute("UPDATE backends SET stopped = 1 WHERE epoch = ?", (epoch,))


def live_epochs(tx: Tx, now: float, ttl: float) -> frozenset[int]:
    """The epochs of backends that beat within `ttl` seconds, did not stop, and are not
    provably dead: one on this host whose process is gone (killed, and this process
    restarted in its place) is dead now, not after its heartbeat runs out."""
    rows = tx.all("SELECT epoch, pid, pid_start, boot_token FROM backends "
                  "WHERE stopped = 0 AND heartbeat_at > ?", (now - ttl,))
    return frozenset(int(r["epoch"]) for r in rows if not provably_dead(
        Holder(int(r["pid"]), r["pid_start"], r["boot_token"], int(r["epoch"]), "")))


def forget_old(tx: Tx, now: float, keep_s: float) -> None:
    """Drops rows of backends gone for longer than `keep_s` (they are history only)."""
    tx.execute("DELETE FROM backends WHERE heartbeat_at < ?", (now - keep_s,))
