"""What both stores share: a job's `Tx`, the store's protocol, and the group-committing writer.

All writes go through `write(job)`.  A job is a plain function run on the writer
connection's thread inside a transaction; jobs queued while a commit is in flight are
committed together (each under its own savepoint, so one failing job does not sink the
others).  A caller's `write` returns only after the COMMIT that holds its job is durable,
so "accepted" always means "on disk".  Events a job appends are published, in commit order,
after that COMMIT.  The writer's thread takes the next batch itself as soon as a COMMIT
ends, while the event loop publishes the last one: the loop is not on the path from one
batch to the next, so a busy loop (50 streams) does not hold every queued delta back for
its turn twice per batch (issue 39).  A job may register finishers (`Tx.before_commit`) that run once at its
end, inside its savepoint, to act on the job's final state.

The writer also times itself (`Writer.holds`): how long each batch held the write lock,
from BEGIN to the end of its COMMIT, with its slowest job's name; the loop records it after
the batch, so timing costs two clock reads per job.

`AbstractStore` is what the layers above use of a store (store/db.py calls it `Database`);
`Writer` is the part of it both implementations share, the SQLite file's
(`SqliteDatabase`, store/db.py) and PostgreSQL's (`PgDatabase`, store/pg.py): each opens,
reads and commits a batch its own way.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import msgspec

from backend.errors import LeaseLost, StoreRefused, StoreUnavailable, TurnkeyError
from backend.store.schema import POSTGRESQL, SQLITE
from shared import logs
from shared.durations import Durations

__all__ = ["POSTGRESQL", "SQLITE", "AbstractStore", "Cursor", "Hold", "Job", "Params", "Row",
           "Timing", "Tx", "Writer", "job_name", "translate", "unavailable"]

log = logging.getLogger("store")

T = TypeVar("T")


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
class Timing:
    """Filled in by each store's `_commit_batch` on the writer thread, read by the loop after it."""

    started: float = 0.0
    ended: float = 0.0
    commit_started: float = 0.0
    cpu_s: float = 0.0  # the writer thread's CPU time over the hold
    slowest: Callable[[Tx], Any] | None = None
    slowest_s: float = 0.0

    def sample(self, jobs: int) -> Hold:
        return Hold(
            at=self.ended, ms=(self.ended - self.started) * 1000, jobs=jobs,
            slowest=job_name(self.slowest), slowest_ms=self.slowest_s * 1000,
            commit_ms=max(0.0, self.ended - self.commit_started) * 1000 if self.commit_started else 0.0,
            cpu_ms=self.cpu_s * 1000,
        )


@dataclass(frozen=True)
class AfterCommit:
    """A published item the writer runs instead of publishing, once its job committed
    (a count that must not be kept for a job rolled back or tried again)."""

    fn: Callable[[], None]


@dataclass
class Job:
    fn: Callable[[Tx], Any]
    future: asyncio.Future[Any]
    published: list[Any] = field(default_factory=list)
    result: Any = None
    error: BaseException | None = None


class AbstractStore(Protocol):
    """A store as the layers above use it, on either database.  `publisher` sees every
    committed job's published items (and, on PostgreSQL, other backends'); `on_signal` the
    other backends' signals."""

    publisher: Callable[[Any], None]
    on_signal: Callable[[dict[str, Any]], None]

    @property
    def dialect(self) -> str: ...

    @property
    def holds(self) -> Durations[Hold]: ...

    async def open(self) -> None: ...

    async def close(self) -> None: ...

    async def read(self, fn: Callable[[Tx], T]) -> T: ...

    async def write(self, fn: Callable[[Tx], T]) -> T: ...

    async def write_patiently(self, fn: Callable[[Tx], T], delays: Sequence[float]) -> T: ...

    def enqueue(self, fn: Callable[[Tx], T]) -> asyncio.Future[T]: ...

    async def signal(self, data: dict[str, Any]) -> bool: ...

    def refusal(self, exc: StoreUnavailable) -> StoreRefused: ...


class Writer(ABC):
    """The queue, group commit, publishing and timing of a store; a subclass opens the
    database (and starts `_write_loop`), reads, commits a batch and closes."""

    dialect: str

    def __init__(self) -> None:
        self._queue: deque[Job] = deque()  # appended on the loop, taken on the writer's thread
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self._failed_commits = 0  # in a row: the store is failing (a full disk) until one works
        self.publisher: Callable[[Any], None] = lambda item: None
        self.on_signal: Callable[[dict[str, Any]], None] = lambda data: None  # other backends'
        self.holds: Durations[Hold] = Durations()  # write-lock hold per committed batch

    @abstractmethod
    async def open(self) -> None: ...

    @abstractmethod
    async def close(self) -> None: ...

    @abstractmethod
    async def read(self, fn: Callable[[Tx], T]) -> T: ...

    @abstractmethod
    async def signal(self, data: dict[str, Any]) -> bool: ...

    @abstractmethod
    def refusal(self, exc: StoreUnavailable) -> StoreRefused: ...

    @abstractmethod
    async def _on_writer_thread(self, fn: Callable[[], None]) -> None:
        """Runs `fn` on the writer connection's thread and waits for it."""

    @abstractmethod
    def _commit(self, batch: list[Job], timing: Timing) -> None:
        """On the writer's thread: commits `batch` as one transaction (each job under its own
        savepoint)."""

    @abstractmethod
    def _is_store_error(self, exc: BaseException) -> bool:
        """Whether `exc` is the database's own failure (a full disk, a lost server)."""

    def _start_writing(self) -> None:
        """Starts the write loop; the subclass's `open` calls it once the database is ready."""
        self._task = asyncio.create_task(self._write_loop(), name="store-writer")

    async def _stop_writing(self) -> None:
        """Refuses new jobs and waits for the queued ones to commit (the start of `close`)."""
        self._closing = True
        self._wake.set()
        if self._task:
            await self._task

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
            except LeaseLost:
                raise  # a refusal, not a failing store: trying again changes nothing
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
        self._queue.append(Job(fn, future))
        self._wake.set()
        return future

    async def _write_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self._wake.wait()
            self._wake.clear()
            if not self._queue:
                if self._closing:
                    return
                continue
            # Until the queue is empty; a job queued after the thread found it empty set
            # `_wake` again, so it is taken by the next round.
            await self._on_writer_thread(functools.partial(self._drain, loop))

    def _drain(self, loop: asyncio.AbstractEventLoop) -> None:
        """On the writer's thread: commits batch after batch while jobs are queued, handing
        each to the loop once committed (`call_soon_threadsafe` keeps commit order)."""
        while n := len(self._queue):
            batch = [self._queue.popleft() for _ in range(n)]  # deque ends are thread-safe
            timing = Timing()
            error: Exception | None = None
            try:
                self._commit(batch, timing)
            except Exception as exc:  # the COMMIT itself failed: nothing of the batch is stored
                error = exc
            loop.call_soon_threadsafe(self._committed, batch, timing, error)

    def _committed(self, batch: list[Job], timing: Timing, error: Exception | None) -> None:
        """On the loop, in commit order: records the hold, publishes, answers the callers."""
        if error is not None:
            if timing.ended:
                self.holds.add(timing.sample(len(batch)))
            self._commit_failed(error, len(batch))
            for job in batch:
                if not job.future.done():
                    job.future.set_exception(unavailable(error))
            return
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
        if isinstance(item, AfterCommit):
            item.fn()
            return
        try:
            self.publisher(item)
        except Exception:
            logs.internal(log, "publishing a committed event failed")


def job_name(fn: Callable[..., Any] | None) -> str:
    """`module:qualname` of a job's function (a partial's function), `backend.` left off;
    a lambda's with its line (`...<lambda>@123`), as it has no name of its own."""
    while fn is not None and (isinstance(fn, functools.partial) or hasattr(fn, "__wrapped__")):
        fn = fn.func if isinstance(fn, functools.partial) else fn.__wrapped__
    if fn is None:
        return ""
    module = getattr(fn, "__module__", None) or "?"
    qualname = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    if qualname.endswith("<lambda>") and (code := getattr(fn, "__code__", None)) is not None:
        qualname += f"@{code.co_firstlineno}"
    return f"{module.removeprefix('backend.')}:{qualname}"


def translate(exc: BaseException, store_error: type[Exception]) -> BaseException:
    """A job's exception as its caller gets it: the database's own (`store_error`) as
    StoreUnavailable, ours and anything else as raised."""
    if isinstance(exc, TurnkeyError | AssertionError):
        return exc
    if isinstance(exc, store_error):
        return unavailable(exc)
    return exc


def unavailable(exc: BaseException) -> StoreUnavailable:
    """The database's failure as ours; the original stays the cause (its error code matters)."""
    error = StoreUnavailable(f"could not save to the database: {exc}")
    error.__cause__ = exc
    return error

