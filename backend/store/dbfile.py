"""The database file before it is opened: a new one is created whole, a damaged one refused.

SQLite happily turns a 0-byte file into an empty database, and a stale
write-ahead log beside a new file into a corrupt one, so neither is left to
it.  A database that does not exist yet is built in a side file and renamed
into place once migrated: a 0-byte `state.db` is therefore never one this
code was creating, only one that lost its contents, and it is refused like a
damaged file.  Every refusal is one line that names the file and says what
to do; nothing is ever replaced.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from pathlib import Path

from backend.errors import StoreDamaged, StoreRefused
from backend.store.migrations import migrate

SIDECARS = ("-wal", "-shm")
FRESH_START = "move it aside to start fresh, or restore a backup"


def prepare(path: Path) -> None:
    """Creates the database when there is none; raises StoreDamaged when the file that is
    there cannot be ours (emptied, or a write-ahead log without its database)."""
    if path.exists():
        if path.stat().st_size == 0:
            raise StoreDamaged(f"{path} is empty (0 bytes): the sessions it held are gone; "
                               f"{_aside(path)}")
        return
    wal = _sidecar(path, "-wal")
    if wal.exists() and wal.stat().st_size > 0:
        # SQLite would replay this log into the new file as if it were that file's own.
        raise StoreDamaged(f"{path} is missing but its write-ahead log {wal.name} is there; "
                           f"move {wal.name} aside too to start fresh, or restore a backup")
    _create(path)


def refusal(path: Path, exc: sqlite3.Error) -> StoreRefused:
    """The one-line reason the backend will not start on `path`, from SQLite's error."""
    code = getattr(exc, "sqlite_errorcode", -1) & 0xFF  # the primary code
    if code == sqlite3.SQLITE_NOTADB:
        return StoreDamaged(f"{path} is not a SQLite database ({exc}); {_aside(path)}")
    if code == sqlite3.SQLITE_CORRUPT:
        return StoreDamaged(f"{path} is damaged ({exc}); {_aside(path)}")
    if code == sqlite3.SQLITE_FULL:
        return StoreRefused(f"{path} could not be opened: the disk is full ({exc}); free some "
                            "space and start again")
    return StoreRefused(f"{path} could not be opened ({exc}); check the disk and the data "
                        "folder's permissions")


def _aside(path: Path) -> str:
    """The advice, naming the files that must move together (a log replayed into another
    database corrupts it)."""
    companions = [p.name for p in (_sidecar(path, s) for s in SIDECARS) if p.exists()]
    if not companions:
        return FRESH_START
    return f"move it (with {' and '.join(companions)}) aside to start fresh, or restore a backup"


def _sidecar(path: Path, suffix: str) -> Path:
    return path.with_name(path.name + suffix)


def _create(path: Path) -> None:
    """Builds the migrated database in a side file, then renames it into place."""
    side = path.with_name(path.name + ".new")
    for leftover in (side, *(_sidecar(side, s) for s in SIDECARS)):
        leftover.unlink(missing_ok=True)  # an earlier start that died while creating it
    conn = sqlite3.connect(side, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")  # recorded in the file: it stays WAL
        migrate(conn, str(path))
    finally:
        conn.close()  # the last connection checkpoints its log into the file and removes it
    os.replace(side, path)
    with contextlib.suppress(OSError):  # the rename is durable once the folder is synced
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
