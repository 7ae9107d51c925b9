"""The runtime table: the epoch counter that tells this process's work from earlier ones'."""

from __future__ import annotations

from backend.store.db import Tx


def bump_epoch(tx: Tx) -> int:
    """Increments and returns the epoch; called once per start, before recovery."""
    tx.execute("UPDATE runtime SET value = value + 1 WHERE key = 'epoch'")
    row = tx.one("SELECT value FROM runtime WHERE key = 'epoch'")
    assert row is not None
    return int(row[0])
