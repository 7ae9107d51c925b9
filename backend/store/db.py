"""The SQLite file: connections, durability settings, and the group-committing writer.

All writes go through `Database.write(job)`.  A job is a plain function run
on the writer connection's thread inside a transaction; jobs queued while a
commit is in flight are committed together (each under its own savepoint, so
one failing job does not sink the others).  A caller's `write` returns only
after the COMMIT that holds its job is durable (WAL, synchronous=FULL), so
"accepted" always means "on disk".  Events a job appends are published, in
commit order, after that COMMIT.  A job may register finishers
(`Tx.before_commit`) that run once at its end, inside its savepoint, to act on
the job's final state.

The writer also times itself (`Database.holds`): how long each batch held the write lock,
from BEGIN IMMEDIATE to the end of its COMMIT, with its slowest job's name; the loop
records it after the batch, so timing costs two clock reads per job.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import sqlite3
import time
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

import aiosqlite
import msgspec

from backend.errors import StoreRefused, StoreUnavailable, TurnkeyError
from backend.store import dbfile
from backend.store.migrations import migrate
from shared import logs
from shared.durations import Durations

log = logging.getLogger("store")

T = TypeVar("T")

PRAGMAS = (
    "PRAGMA journal_mode=WAL",
    "PRAGMA synchronous=FULL",
    "PRAGMA foreign_keys=ON",
    "PRAGMA busy_timeout=10000",
)


class Row(Protocol):
    """A result row, by column name or index: sqlite3.Row, or the PostgreSQL store's."""

    def keys(self) -> list[str]: ...

    def __getitem__(self, key: int | str, /) -> Any: ...

    def __iter__(self) -> Iterator[Any]: ...

    def __len__(self) -> int: ...


class Cursor(Protocol):
    """What `Tx.execute` returns on either store."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


Params = tuple[Any, ...] | dict[str, Any]

SQLITE = "sqlite"
POSTGRESQL = "postgresql"


@dataclass
class Tx:
    """What a job sees: the connection, inside an open transaction.

    Statements are written once, in the SQL both stores read (`?` placeholders); the
    few that differ branch on `dialect`.  The PostgreSQL store's Tx (store/pg.py)
    translates the placeholders."""

    conn: Any
    published: list[Any] = field(default_factory=list)
    dialect: str = SQLITE
    _finishers: dict[Hashable, Callable[[Tx], None]] = field(
        default_factory=dict, init=False, repr=False
    )
    _finished: set[Hashable] = field(default_factory=set, init=False, repr=False)

    def execute(self, sql: str, params: Params = ()) -> Cursor:
        cur: Cursor = self.conn.execute(sql, params)
        return cur

    def one(self, sql: str, params: Params = ()) -> Row | None:
        row: Row | None = self.execute(sql, params).fetchone()
        return row

    def all(self, sql: str, params: Params = ()) -> list[Row]:
        return list(self.execute(sql, params).fetchall())

    def publish(self, item: Any) -> None:
        """Queues `item` for the publisher, which sees it only if this job commits."""
        self.published.append(item)

    def before_commit(self, key: Hashable, fn: Callable[[Tx], None]) -> None:
        """Runs `fn(tx)` once at the end of this job, after its own work, in its savepoint.

        The first registration of a key wins; later ones (even after it ran) are ignored,
        so callers may register freely and the finisher sees the job's final state.  If
        a finisher raises, the whole job fails: it rolls back and publishes nothing.
        Finishers run in registration order, including any they register themselves.
        """
        if key not in self._finishers and key not in self._finished:
            self._finishers[key] = fn

    def finish(self) -> None:
        """Runs the registered finishers (the writer calls this once the job's fn returned)."""
        while self._finishers:
            key = next(iter(self._finishers))
            fn = self._finishers.pop(key)
            self._finished.add(key)
            fn(self)


class Hold(msgspec.Struct, kw_only=True, frozen=True):
    """One write transaction of the writer: BEGIN IMMEDIATE to the end of COMMIT (the fields
    are `backend.stats`'s HoldSample's, which the edge makes of it)."""

    at: float  # the backend's monotonic clock (seconds) when the transaction ended
    ms: float  # the write lock's hold: the batch's jobs and the durable COMMIT
    jobs: int  # jobs in the batch (group commit)
    slowest: str  # the batch's longest job: its function's module and qualified name
    slowest_ms: float
    commit_ms: float  # the COMMIT alone (WAL append and fsync)
    cpu_ms: float  # the writer thread's CPU time over the hold


@dataclass
class _Timing:
    """Filled in by `_commit_batch` on the writer thread, read by the loop after it."""

    started: float = 0.0
    ended: float = 0.0
    commit_started: float = 0.0
    cpu_s: float = 0.0  # the writer thread's CPU time over the hold
    slowest: Callable[[Tx], Any] | None = None
    slowest_s: float = 0.0

    def sample(self, jobs: int) -> Hold:
        return Hold(
            at=self.ended, ms=(self.ended - self.started) * 1000, jobs=jobs,
            slowest=_job_name(self.slowest), slowest_ms=self.slowest_s * 1000,
            commit_ms=max(0.0, self.ended - self.commit_started) * 1000 if self.commit_started else 0.0,
            cpu_ms=self.cpu_s * 1000,
        )


@dataclass
class _Job:
    fn: Callable[[Tx], Any]
    future: asyncio.Future[Any]
    published: list[Any] = field(default_factory=list)
    result: Any = None
    error: BaseException | None = None


class Database:
    """One SQLite file with a writer connection and a reader connection.

    The PostgreSQL store (store/pg.py) is a subclass: the queue, group commit,
    publishing and timing are this class's; opening, reading and committing a batch
    are each store's own (`open`, `read`, `_commit`)."""

    dialect = SQLITE

    def __init__(self, path: Path) -> None:
        self.path = path
        self._writer: aiosqlite.Connection | None = None
        self._reader: aiosqlite.Connection | None = None
        self._queue: list[_Job] = []
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self._failed_commits = 0  # in a row: the store is failing (a full disk) until one works
        self.publisher: Callable[[Any], None] = lambda item: None
        self.on_signal: Callable[[dict[str, Any]], None] = lambda data: None  # other backends'

        self.holds: Durations[Hold] = Durations()  # write-lock hold per committed batch

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
        self._task = asyncio.create_task(self._write_loop(), name="store-writer")

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
        self._closing = True
        self._wake.set()
        if self._task:
            await self._task
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

    async def write(self, fn: Callable[[Tx], T]) -> T:
        """Runs `fn` in a transaction; returns after its COMMIT is durable.

        Raises the job's own exception if it failed (its changes rolled back), or
        StoreUnavailable if the commit itself failed (nothing of it is stored).
        """
        result: T = await self.enqueue(fn)
        return result

    async def write_patiently(self, fn: Callable[[Tx], T], delays: Sequence[float]) -> T:
        """Like `write`, but tries again after each of `delays` (seconds) while the store
        is unavailable; raises the last StoreUnavailable once they are spent.  For writes
        that must not be given up at the first failure (a turn's end)."""
        for delay in delays:
            try:
                return await self.write(fn)
            except StoreUnavailable as exc:
                log.info("a write failed (%s); trying again in %g s", exc.message, delay)
                await asyncio.sleep(delay)
        return await self.write(fn)

    def enqueue(self, fn: Callable[[Tx], T]) -> asyncio.Future[T]:
        """Like `write`, but queues the job now and returns the future of its result.

        Jobs commit in the order they were queued, so a caller may queue several
        in a row and rely on that order without awaiting each commit in between.
        """
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        if self._closing:
            future.set_exception(StoreUnavailable("the backend is shutting down"))
            return future
        self._queue.append(_Job(fn, future))
        self._wake.set()
        return future

    async def _commit(self, batch: list[_Job], timing: _Timing) -> None:
        """Commits `batch` as one transaction (each job under its own savepoint)."""
        assert self._writer is not None
        await _run(self._writer, functools.partial(_commit_batch, batch=batch, timing=timing))

    def _is_store_error(self, exc: BaseException) -> bool:
        """Whether `exc` is the database's own failure (a full disk, a lost server)."""
        return isinstance(exc, sqlite3.Error)

    async def _write_loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            if not self._queue:
                if self._closing:
                    return
                continue
            batch, self._queue = self._queue, []
            timing = _Timing()
            try:
                await self._commit(batch, timing)
            except Exception as exc:  # the COMMIT itself failed: nothing of the batch is stored
                if timing.ended:
                    self.holds.add(timing.sample(len(batch)))
                self._commit_failed(exc, len(batch))
                for job in batch:
                    if not job.future.done():
                        job.future.set_exception(_unavailable(exc))
                continue
            self.holds.add(timing.sample(len(batch)))
            if self._failed_commits:
                log.warning("the database commits again, after %d failed commits",
                            self._failed_commits)
                self._failed_commits = 0
            for job in batch:
                if job.error is None:
                    for item in job.published:
                        self._publish(item)
                if job.future.done():
                    continue
                if job.error is not None:
                    job.future.set_exception(job.error)
                else:
                    job.future.set_result(job.result)
            if self._queue:
                self._wake.set()

    def _commit_failed(self, exc: Exception, jobs: int) -> None:
        """Logs a failed commit: the database's (a full disk, I/O, a lost server) once per
        failing spell, as the environment's fault; anything else as our bug, with its
        traceback."""
        self._failed_commits += 1
        if not self._is_store_error(exc):
            logs.internal(log, "commit of %d jobs failed", jobs)
        elif self._failed_commits == 1:
            log.warning("the database cannot commit (%s); writes fail until it can", exc)

    def _publish(self, item: Any) -> None:
        try:
            self.publisher(item)
        except Exception:
            logs.internal(log, "publishing a committed event failed")


def _commit_batch(conn: sqlite3.Connection, *, batch: list[_Job], timing: _Timing) -> None:
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
                job.error = _translate(exc)
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


def _job_name(fn: Callable[..., Any] | None) -> str:
    """`module:qualname` of a job's function (a partial's function), `backend.` left off;
    a lambda's with its line (`...<lambda>@123`), as it has no name of its own."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    if fn is None:
        return ""
    module = getattr(fn, "__module__", None) or "?"
    qualname = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    if qualname.endswith("<lambda>") and (code := getattr(fn, "__code__", None)) is not None:
        qualname += f"@{code.co_firstlineno}"
    return f"{module.removeprefix('backend.')}:{qualname}"


def _translate(exc: BaseException, store_error: type[Exception] = sqlite3.Error) -> BaseException:
    """A job's exception as its caller gets it: the database's own (`store_error`) as
    StoreUnavailable, ours and anything else as raised."""
    if isinstance(exc, TurnkeyError | AssertionError):
        return exc
    if isinstance(exc, store_error):
        return _unavailable(exc)
    return exc


def _unavailable(exc: BaseException) -> StoreUnavailable:
    """SQLite's failure as ours; the original stays the cause (its error code matters)."""
    error = StoreUnavailable(f"could not save to the database: {exc}")
    error.__cause__ = exc
    return error


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
