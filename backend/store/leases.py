"""The turn_leases table: which process may write a session's transcript right now."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from backend.store.db import Tx


@dataclass(frozen=True)
class Holder:
    """Who holds a lease: a process (pid and its start time) on a host and pid namespace
    (`boot_token`), in a backend epoch, for one turn."""

    pid: int
    pid_start: str
    boot_token: str
    epoch: int
    turn_id: str

    @property
    def key(self) -> str:
        return f"{self.pid}:{self.pid_start}@{self.boot_token}#{self.epoch}/{self.turn_id}"


def current(tx: Tx, session_id: str) -> sqlite3.Row | None:
    return tx.one("SELECT * FROM turn_leases WHERE session_id = ?", (session_id,))


def put(tx: Tx, session_id: str, holder: Holder, now: float, ttl: float) -> None:
    """Takes the lease (inserting, or replacing a row the caller proved free)."""
    tx.execute(
        "INSERT OR REPLACE INTO turn_leases (session_id, holder, pid, boot_token, epoch, turn_id, "
        "acquired_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (session_id, holder.key, holder.pid, holder.boot_token, holder.epoch, holder.turn_id,
         now, now + ttl),
    )


def refresh(tx: Tx, session_id: str, holder: Holder, expires_at: float) -> bool:
    """Extends the lease, fenced on the holder; False when someone else holds it now."""
    cur = tx.execute(
        "UPDATE turn_leases SET expires_at = ? WHERE session_id = ? AND holder = ?",
        (expires_at, session_id, holder.key),
    )
    return cur.rowcount == 1


def release(tx: Tx, session_id: str, holder: Holder) -> None:
    tx.execute("DELETE FROM turn_leases WHERE session_id = ? AND holder = ?",
               (session_id, holder.key))


def all_rows(tx: Tx) -> list[sqlite3.Row]:
    return tx.all("SELECT * FROM turn_leases")


def drop(tx: Tx, session_id: str, holder_key: str) -> None:
    tx.execute("DELETE FROM turn_leases WHERE session_id = ? AND holder = ?",
               (session_id, holder_key))
