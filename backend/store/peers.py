"""The backends table (PostgreSQL store only): which backend processes share this database.

Each backend registers its epoch at start and beats its heartbeat every
`lease.heartbeat_s`.  A peer silent for `lease.dead_after_s` is declared dead, once,
for everyone (`dead_at`): its leases are taken and its started turns become `unknown`
(authority/takeover.py).  A declared-dead backend that was only paused finds out at its
next beat (`beat` returns False): it writes nothing more and stops (backend/app.py).
A pid means nothing across hosts; the epoch is unique per start and is what leases and
admissions name.

Times here are the database server's clock (`clock_timestamp()`), not each host's, so
hosts whose clocks disagree by seconds still agree on who is silent.

`listing` and `PeerRecord.state` are what backend.list shows of each row (live, silent,
declared dead, stopped); `me` is this process as a row, for the SQLite store, which has one
backend and no table.
"""

from __future__ import annotations

import os
import socket

from backend.store.db import POSTGRESQL, Tx
from backend.store.leases import Holder, provably_dead
from backend.store.records import Record
from shared.literals import BackendState

DB_NOW = "EXTRACT(EPOCH FROM clock_timestamp())::DOUBLE PRECISION"
COLUMNS = "epoch, host, pid, started_at, heartbeat_at, stopped, dead_at"


class PeerRecord(Record, frozen=True):
    """A backends row, without its process identity (pid_start, boot_token)."""

    epoch: int
    host: str
    pid: int
    started_at: float  # epoch seconds on the database server's clock, as every time here
    heartbeat_at: float
    stopped: bool
    dead_at: float | None

    def state(self, now: float, dead_after_s: float) -> BackendState:
        """What the row says of its process at `now`: `stopped` (it said so itself), `dead`
        (a peer declared it), `silent` (no heartbeat for over `dead_after_s`: it is declared
        dead at a live peer's next beat), else `live`."""
        if self.stopped:
            return "stopped"
        if self.dead_at is not None:
            return "dead"
        if now - self.heartbeat_at > dead_after_s:
            return "silent"
        return "live"


def now(tx: Tx) -> float:
    """The database server's clock."""
    row = tx.one(f"SELECT {DB_NOW} AS now")
    assert row is not None
    return float(row["now"])


def join(tx: Tx, epoch: int) -> None:
    """Registers this process (its epoch) as a live backend."""
    me = Holder.here(epoch, "")
    tx.execute("INSERT INTO backends (epoch, host, pid, pid_start, boot_token, started_at, "
               f"heartbeat_at) VALUES (?, ?, ?, ?, ?, {DB_NOW}, {DB_NOW})",
               (epoch, socket.gethostname(), me.pid, me.pid_start, me.boot_token))


def beat(tx: Tx, epoch: int) -> float | None:
    """Beats this backend's heartbeat; returns the beat before it, or None when its peers
    declared it dead meanwhile (it was silent too long: paused, or cut off from the
    database) or its row is gone."""
    row = tx.one("SELECT heartbeat_at FROM backends WHERE epoch = ? AND dead_at IS NULL "
                 "AND stopped = 0 FOR UPDATE", (epoch,))
    if row is None:
        return None
    tx.execute(f"UPDATE backends SET heartbeat_at = {DB_NOW} WHERE epoch = ?", (epoch,))
    return float(row["heartbeat_at"])


def standing(tx: Tx, epoch: int) -> bool:
    """False when this backend's peers declared it dead (or it left): it must claim nothing
    more.  Always True on a SQLite file, which has one backend."""
    if tx.dialect != POSTGRESQL:
        return True
    return tx.one("SELECT 1 FROM backends WHERE epoch = ? AND dead_at IS NULL AND stopped = 0",
                  (epoch,)) is not None


def leave(tx: Tx, epoch: int) -> None:
    """A clean stop: peers need not wait out the heartbeat to know it is gone."""
    tx.execute("UPDATE backends SET stopped = 1 WHERE epoch = ?", (epoch,))


def declare_dead(tx: Tx, epoch: int, my_last_beat: float, dead_after: float) -> list[PeerRecord]:
    """Declares dead every other backend that stayed silent for `dead_after` seconds while
    this one beat (`my_last_beat`, its beat before this one, came that long after the
    peer's last), or that is provably dead (on this host, its process gone); returns those
    declared by this call.  Silence this backend shared (the database was down for all)
    proves nothing: nobody is declared dead for it."""
    rows = tx.all(f"SELECT {COLUMNS}, pid_start, boot_token FROM backends "
                  "WHERE stopped = 0 AND dead_at IS NULL AND epoch <> ?", (epoch,))
    declared = []
    for r in rows:
        gone = my_last_beat - float(r["heartbeat_at"]) > dead_after or provably_dead(
            Holder(int(r["pid"]), r["pid_start"], r["boot_token"], int(r["epoch"]), ""))
        if gone:
            cur = tx.execute(f"UPDATE backends SET dead_at = {DB_NOW} "
                             "WHERE epoch = ? AND dead_at IS NULL", (r["epoch"],))
            if cur.rowcount:
                declared.append(PeerRecord.from_row(r))
    return declared


def live_epochs(tx: Tx) -> frozenset[int]:
    """The epochs of backends that did not stop, were not declared dead, and are not
    provably dead (one on this host whose process is gone, killed and restarted in its
    place, is dead now).  Only `declare_dead` judges silence, so that every backend acts on
    one decision."""
    rows = tx.all("SELECT epoch, pid, pid_start, boot_token FROM backends WHERE stopped = 0 "
                  "AND dead_at IS NULL")
    return frozenset(int(r["epoch"]) for r in rows if not provably_dead(
        Holder(int(r["pid"]), r["pid_start"], r["boot_token"], int(r["epoch"]), "")))


def by_epoch(tx: Tx, epochs: list[int]) -> dict[int, PeerRecord]:
    """The rows of these epochs (to name a dead holder's host and pid)."""
    if not epochs:
        return {}
    marks = ", ".join("?" for _ in epochs)
    return {int(r["epoch"]): PeerRecord.from_row(r) for r in tx.all(
        f"SELECT {COLUMNS} FROM backends WHERE epoch IN ({marks})",
        tuple(epochs))}


def forget_old(tx: Tx, keep_s: float) -> None:
    """Drops rows of backends gone for longer than `keep_s` (they are history only)."""
    tx.execute(f"DELETE FROM backends WHERE heartbeat_at < {DB_NOW} - ?", (keep_s,))


def listing(tx: Tx, since: float | None, epoch: int) -> list[PeerRecord]:
    """The backends heard from at `since` or later (None: every row still kept), and always
    `epoch`'s own row, in no particular order."""
    sql = f"SELECT {COLUMNS} FROM backends"
    if since is None:
        return PeerRecord.from_rows(tx.all(sql))
    return PeerRecord.from_rows(tx.all(sql + " WHERE heartbeat_at >= ? OR epoch = ?",
                                       (since, epoch)))


def me(epoch: int, started_at: float, now: float) -> PeerRecord:
    """This process as its row would read at `now` (its heartbeat: now), for a store without
    the table: SQLite has one backend, the one asking."""
    return PeerRecord(epoch=epoch, host=socket.gethostname(), pid=os.getpid(),
                      started_at=started_at, heartbeat_at=now, stopped=False, dead_at=None)
