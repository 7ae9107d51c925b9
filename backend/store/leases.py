"""The turn_leases table: which process may write a session's transcript right now.

A lease (and a compression lock, see compression.py) names its holder in one text
column; `Holder.encode` and `Holder.decode` are the only code that writes or reads
that text, and `provably_dead` the only judge of whether the holder is gone.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cache

from backend.host import boot_token, process_start
from backend.store.db import Row, Tx
from backend.store.records import Record, record
from shared.launcher import alive


@dataclass(frozen=True, slots=True)
class Holder:
    """Who holds a lease: a process (pid and its start time) on a host and pid namespace
    (`boot_token`), in a backend epoch, for one turn (or `compress`, for a compression lock)."""

    pid: int
    pid_start: str
    boot_token: str
    epoch: int
    turn_id: str

    @classmethod
    def here(cls, epoch: int, turn_id: str) -> Holder:
        """This process as a holder."""
        return cls(os.getpid(), _own_start(), boot_token(), epoch, turn_id)

    def encode(self) -> str:
        """The stored text: `pid:start@boot#epoch/turn` (a boot token may hold '/' and ':',
        a turn id holds neither '/' nor '#', so `decode` reads it from both ends)."""
        return f"{self.pid}:{self.pid_start}@{self.boot_token}#{self.epoch}/{self.turn_id}"

    @classmethod
    def decode(cls, text: str) -> Holder:
        """The holder `encode` stored as `text`; ValueError when it is not one."""
        pid, sep1, rest = text.partition(":")
        start, sep2, rest = rest.partition("@")
        rest, sep3, turn_id = rest.rpartition("/")
        boot, sep4, epoch = rest.rpartition("#")
        if sep1 and sep2 and sep3 and sep4 and pid.isdigit() and epoch.isdigit():
            return cls(int(pid), start, boot, int(epoch), turn_id)
        raise ValueError(f"not a lease holder: {text!r}")


@cache
def _own_start() -> str:
    return process_start(os.getpid())


def provably_dead(holder: Holder) -> bool:
    """True only when the holder is certainly gone: same host and namespace, and its pid is
    free, a zombie (exited, not yet reaped by its parent), or belongs to a process started
    at another time."""
    if holder.boot_token != boot_token():
        return False
    if not alive(holder.pid):
        return True
    started = process_start(holder.pid)
    return bool(started and holder.pid_start and started != holder.pid_start)


class LeaseRecord(Record, frozen=True):
    """A turn_leases row (its pid, boot_token, epoch and turn_id columns are the holder's),
    or a compression_locks row, which has the same shape."""

    session_id: str
    holder: Holder
    acquired_at: float
    expires_at: float

    @classmethod
    def from_row(cls, r: Row) -> LeaseRecord:
        return record(cls, r, holder=Holder.decode(r["holder"]))


def current(tx: Tx, session_id: str) -> LeaseRecord | None:
    r = tx.one("SELECT * FROM turn_leases WHERE session_id = ?", (session_id,))
    return LeaseRecord.from_row(r) if r is not None else None


def put(tx: Tx, session_id: str, holder: Holder, now: float, ttl: float) -> None:
    """Takes the lease (inserting, or replacing a row the caller proved free)."""
    tx.execute(
        "INSERT INTO turn_leases (session_id, holder, pid, boot_token, epoch, turn_id, "
        "acquired_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (session_id) DO UPDATE SET holder = excluded.holder, pid = excluded.pid, "
        "boot_token = excluded.boot_token, epoch = excluded.epoch, turn_id = excluded.turn_id, "
        "acquired_at = excluded.acquired_at, expires_at = excluded.expires_at",
        (session_id, holder.encode(), holder.pid, holder.boot_token, holder.epoch, holder.turn_id,
         now, now + ttl),
    )


def refresh(tx: Tx, session_id: str, holder: Holder, expires_at: float) -> bool:
    """Extends the lease, fenced on the holder; False when someone else holds it now."""
    cur = tx.execute(
        "UPDATE turn_leases SET expires_at = ? WHERE session_id = ? AND holder = ?",
        (expires_at, session_id, holder.encode()),
    )
    return cur.rowcount == 1


def release(tx: Tx, session_id: str, holder: Holder) -> None:
    tx.execute("DELETE FROM turn_leases WHERE session_id = ? AND holder = ?",
               (session_id, holder.encode()))


def all_rows(tx: Tx) -> list[LeaseRecord]:
    return [LeaseRecord.from_row(r) for r in tx.all("SELECT * FROM turn_leases")]


def held_by_epoch(tx: Tx, now: float) -> dict[int, int]:
    """How many sessions each backend epoch holds an unexpired turn lease on now (epochs
    that hold none are left out)."""
    rows = tx.all("SELECT epoch, COUNT(*) AS n FROM turn_leases WHERE expires_at > ? "
                  "GROUP BY epoch", (now,))
    return {int(r["epoch"]): int(r["n"]) for r in rows}
