"""The SQLite file: connections, durability settings, and its side of the group-committing writer.

The queue, group commit, publishing and timing are store/writer.py's (`Writer`), shared with
the PostgreSQL store; here are the file's connections (a writer and a reader, WAL,
synchronous=FULL, so a durable COMMIT is on disk), its migrations at open, and a batch's
transaction on the writer thread (BEGIN IMMEDIATE, one savepoint per job).

`Database` is the store's protocol (`writer.AbstractStore`), the name the layers above type
against; `SqliteDatabase` is this file's implementation of it.
"""

from __future__ import annotations

import functools
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite

from backend.errors import StoreRefused, StoreUnavailable
from backend.store import dbfile
from backend.store.migrations import migrate
from backend.store.writer import (
    POSTGRESQL,
    SQLITE,
    AbstractStore,
    Cursor,
    Hold,
    Job,
    Params,
    Row,
    Timing,
    Tx,
    Writer,
    translate,
)

# The store's names, as the modules above (and its own table modules) import them from here.
__all__ = ["POSTGRESQL", "SQLITE", "Cursor", "Database", "Hold", "Params", "Row",
           "SqliteDatabase", "Tx"]

T = TypeVar("T")

Database = AbstractStore  # what callers type against: either store

PRAGMAS = (
    "PRAGMA journal_mode=WAL",
    "PRAGMA synchronous=FULL",
    "PRAGMA foreign_keys=ON",
    "PRAGMA busy_timeout=10000",
)


class SqliteDatabase(Writer):
    """One SQLite file with a writer connection and a reader connection."""

    dialect = SQLITE

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        self._writer: aiosqlite.Connection | None = None
        self._reader: aiosqlite.Connection | None = None

    async def open(self) -> None:
        """Opens the file (creating it when there is none) and migrates it.

        Raises StoreRefused (StoreDamaged, StoreTooNew) with nothing left open when the
        file cannot be used: the caller reports the message and exits.
        """
        try:
            dbfile.prepare(self.path)
            self._writer = await _connect(self.path)
            await _run(self._writer, functools.partial(migrate, name=str(self.path)))
            self._reader = await _connect(self.path)
        except BaseException as exc:
            # An open connection's thread would keep the process alive after it gave up.
            await self._close_connections()
            if isinstance(exc, sqlite3.Error):
                raise dbfile.refusal(self.path, exc) from None
            raise
        self._start_writing()

    async def signal(self, data: dict[str, Any]) -> bool:
        """Sends `data` to the other backends sharing this store; False when there can be
        none (a SQLite file has one backend)."""
        return False

    def refusal(self, exc: StoreUnavailable) -> StoreRefused:
        """The start-up refusal for a write that failed before the backend was ready."""
        if isinstance(exc.__cause__, sqlite3.Error):
            return dbfile.refusal(self.path, exc.__cause__)
        return StoreRefused(f"{self.path} could not be prepared ({exc.message})")

    async def close(self) -> None:
        await self._stop_writing()
        await self._close_connections()

    async def _close_connections(self) -> None:
        for conn in (self._reader, self._writer):
            if conn is not None:
                await conn.close()
        self._reader = self._writer = None

    async def read(self, fn: Callable[[Tx], T]) -> T:
        """Runs `fn` on the reader connection (a consistent WAL snapshot per call)."""
        assert self._reader is not None, "database not open"

        def run(conn: sqlite3.Connection) -> T:
            conn.execute("BEGIN")
            try:
                return fn(Tx(conn))
            finally:
                conn.execute("COMMIT")

        try:
            return await _run(self._reader, run)
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"could not read the database: {exc}") from exc

    async def _on_writer_thread(self, fn: Callable[[], None]) -> None:
        assert self._writer is not None
        await _run(self._writer, lambda _raw: fn())

    def _commit(self, batch: list[Job], timing: Timing) -> None:
        assert self._writer is not None
        _commit_batch(self._writer._conn, batch=batch, timing=timing)

    def _is_store_error(self, exc: BaseException) -> bool:
        return isinstance(exc, sqlite3.Error)


def _commit_batch(conn: sqlite3.Connection, *, batch: list[Job], timing: Timing) -> None:
    """Runs on the writer thread: one transaction, one savepoint per job."""
    clock = time.monotonic  # the clock of Hold.at
    timing.started, cpu_started = clock(), time.thread_time()
    conn.execute("BEGIN IMMEDIATE")
    try:
        for job in batch:
            job_started = clock()
            conn.execute("SAVEPOINT job")
            tx = Tx(conn)
            try:
                job.result = job.fn(tx)
                tx.finish()
                job.published = tx.published
            except BaseException as exc:
                conn.execute("ROLLBACK TO job")
                job.error = translate(exc, sqlite3.Error)
            conn.execute("RELEASE job")
            if (took := clock() - job_started) >= timing.slowest_s:
                timing.slowest, timing.slowest_s = job.fn, took
        timing.commit_started = clock()
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    finally:
        timing.ended, timing.cpu_s = clock(), time.thread_time() - cpu_started



async def _connect(path: Path) -> aiosqlite.Connection:
    conn = await aiosqlite.connect(path, isolation_level=None, check_same_thread=False)
    conn.row_factory = sqlite3.Row
    try:
        for pragma in PRAGMAS:  # the first statement is where SQLite reads the file
            await conn.execute(pragma)
    except BaseException:
        await conn.close()
        raise
    return conn


async def _run(conn: aiosqlite.Connection, fn: Callable[[sqlite3.Connection], T]) -> T:
    """Runs `fn(raw_connection)` on aiosqlite's worker thread: one hop per transaction.

    aiosqlite exposes only statement-at-a-time calls publicly; a transaction of
    several statements would cost one thread hop each, which is what limits
    admissions per second.  `_execute` is the same entry point its own public
    methods use.
    """
    raw: sqlite3.Connection = conn._conn
    result: T = await conn._execute(fn, raw)  # type: ignore[no-untyped-call]
    return result
