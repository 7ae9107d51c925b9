"""The PostgreSQL store: the SQLite file's jobs and guarantees, across backend processes and hosts.

`store = "postgresql://..."` in config.toml selects it.  Jobs are the same plain
functions over a `Tx` as on SQLite; each runs on psycopg 3's connection on a worker
thread (one hop per transaction, like aiosqlite), so the store's code exists once.

- **Serializable transactions.**  SQLite has one writer, so every job sees the
  database as if nothing else ran.  Here several backends write at once; each batch
  runs at SERIALIZABLE isolation, which gives jobs that same guarantee, and a batch
  PostgreSQL refuses for a conflict (SQLSTATE 40001, or a deadlock) is run again
  whole, up to CONFLICT_RETRIES times.  A job must therefore be a function of the
  database alone (they are: their effects outside it are published after commit).
- **Group commit.**  As on SQLite, the jobs queued while a commit is in flight commit
  together, each under its own savepoint.
- **Live events between backends.**  A batch that stored events notifies the
  `turnkey` channel in its own transaction (NOTIFY is delivered on commit, or never):
  which sessions, which seqs, and the session-less broadcasts whole (events, and the
  reports of changed sessions and schedules, which each backend's edge makes events
  of).  Every backend listens; another backend's events are read back from the events
  table and published to its own subscribers in seq order.  The table, not the notification, is the truth:
  a gap (a missed notification, a lost listening connection) is filled by reading from
  the last seq seen, so nothing is lost or doubled.
- **Signals.**  `signal()` sends a small request to every other backend on the same
  channel (an interrupt for a turn another backend runs, a token to read again), which
  each hands to its `on_signal` (store/signals.py routes them by kind).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import random
import re
import secrets
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import msgspec
import psycopg
from psycopg import errors as pg_errors

from backend.errors import StoreRefused, StoreUnavailable, TurnkeyError
from backend.store import pg_schema
from backend.store.events import EventRecord, Moved, Report, StoredEvent, since
from backend.store.schedules import ScheduleChange
from backend.store.sessions import SessionChanged
from backend.store.writer import POSTGRESQL, Cursor, Job, Params, Timing, Tx, Writer, translate
from shared import logs
from shared.config import store_redacted

log = logging.getLogger("store")

T = TypeVar("T")

CHANNEL = "turnkey"
CONFLICT_RETRIES = 30
NOTIFY_MAX = 7900  # bytes; PostgreSQL's limit is 8000
CONNECT_TIMEOUT_S = 10
LISTEN_RETRY_S = (0.5, 1.0, 2.0, 5.0)
CATCH_UP_LIMIT = 5000


# --- SQL and rows --------------------------------------------------------------------

_TOKEN = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|::|:[A-Za-z_]\w*|\?\d*|%")


@functools.lru_cache(maxsize=2048)
def pg_sql(sql: str) -> str:
    """A statement in the store's shared dialect (`?`, `?NNN` and `:name` placeholders) as
    psycopg reads it (`%s`, `%(pNNN)s`, `%(name)s`, a literal `%` doubled).  A statement
    with numbered placeholders is given its parameters as `{"pNNN": ...}` (`PgTx`)."""

    def one(m: re.Match[str]) -> str:
        t = m.group(0)
        if t[0] in "'\"":
            return t.replace("%", "%%")
        if t == "?":
            return "%s"
        if t[0] == "?":
            return f"%(p{t[1:]})s"
        if t == "%":
            return "%%"
        if t == "::":
            return t
        return f"%({t[1:]})s"

    return _TOKEN.sub(one, sql)


@functools.lru_cache(maxsize=1024)
def _row_class(names: tuple[str, ...]) -> type[tuple[Any, ...]]:
    """A tuple that is also read by column name, as sqlite3.Row is (one class per shape)."""
    index = {name: i for i, name in enumerate(names)}
    get = tuple.__getitem__

    class PgRow(tuple[Any, ...]):
        __slots__ = ()

        def keys(self) -> list[str]:
            return list(names)

        def __getitem__(self, key: Any) -> Any:
            return get(self, index[key]) if isinstance(key, str) else get(self, key)

    return PgRow


def _rows(cursor: Any) -> Callable[[Sequence[Any]], Any]:
    desc = cursor.description
    if desc is None:
        return tuple
    return _row_class(tuple(c.name for c in desc))


def _value(v: Any) -> Any:
    """A parameter as PostgreSQL takes it: the schema's flags are integers, as SQLite's, and
    its text cannot hold NUL, which a tool's output (a binary file read as text) may: each
    becomes U+FFFD, the character that stands for what could not be kept."""
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, str) and "\x00" in v:
        return v.replace("\x00", "\ufffd")
    return v


class PgTx(Tx):
    """A `Tx` on a psycopg connection: the shared dialect translated per statement."""

    def execute(self, sql: str, params: Params = ()) -> Cursor:
        if isinstance(params, dict):
            args: Any = {k: _value(v) for k, v in params.items()}
        elif "?1" in sql:
            args = {f"p{i}": _value(v) for i, v in enumerate(params, 1)}
        else:
            args = tuple(_value(v) for v in params)
        try:
            cur: Cursor = self.conn.execute(pg_sql(sql), args)
        except psycopg.Error as exc:
            exc.add_note(f"statement: {sql}")  # for the log's traceback; not in the message
            raise
        return cur


# --- connections ----------------------------------------------------------------------


class _Conn:
    """One psycopg connection and the thread it is used on; reopened when it broke."""

    def __init__(self, dsn: str, name: str) -> None:
        self.dsn = dsn
        self.conn: psycopg.Connection[Any] | None = None
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"pg-{name}")

    def connection(self) -> psycopg.Connection[Any]:
        """The connection, opened again when it broke; on this object's thread only."""
        if self.conn is None or self.conn.broken or self.conn.closed:
            if self.conn is not None:
                with contextlib.suppress(Exception):
                    self.conn.close()
            self.conn = None
            self.conn = psycopg.connect(self.dsn, autocommit=True, row_factory=_rows,
                                        connect_timeout=CONNECT_TIMEOUT_S,
                                        application_name="turnkey-backend")
        return self.conn

    async def run(self, fn: Callable[[psycopg.Connection[Any]], T]) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.pool, lambda: fn(self.connection()))

    async def close(self) -> None:
        def shut() -> None:
            if self.conn is not None:
                with contextlib.suppress(Exception):
                    self.conn.close()
                self.conn = None

        with contextlib.suppress(RuntimeError):  # the pool was shut down already
            await asyncio.get_running_loop().run_in_executor(self.pool, shut)
        self.pool.shutdown(wait=True)


def _is_conflict(exc: BaseException) -> bool:
    """PostgreSQL refused the transaction for another one's sake: run it again."""
    return isinstance(exc, pg_errors.SerializationFailure | pg_errors.DeadlockDetected)


class _Conflict(Exception):
    """Raised out of a job's savepoint: the whole batch must run again."""


class PgDatabase(Writer):
    """The store on a PostgreSQL database shared by any number of backend processes."""

    dialect = POSTGRESQL

    def __init__(self, dsn: str) -> None:
        super().__init__()
        self.dsn = dsn
        self.name = store_redacted(dsn)
        self.origin = secrets.token_hex(8)  # tells this process's notifications from others'
        self._w = _Conn(dsn, "writer")
        self._r = _Conn(dsn, "reader")
        self._listener: asyncio.Task[None] | None = None
        self._seen: dict[str, int] = {}
        self._catching: dict[str, asyncio.Lock] = {}
        self._listening = asyncio.Event()

    # --- opening and closing -------------------------------------------------------

    async def open(self) -> None:
        try:
            await self._w.run(functools.partial(pg_schema.migrate, name=self.name))
        except TurnkeyError:
            await self._close_pg()
            raise
        except psycopg.Error as exc:
            await self._close_pg()
            raise StoreRefused(f"{self.name} could not be opened: {_first_line(exc)}; check "
                               "that the server runs, the database exists and the user may "
                               "use it (store in config.toml)") from None
        except BaseException:
            await self._close_pg()
            raise
        self._start_writing()
        self._listener = asyncio.create_task(self._listen(), name="store-listener")

    async def wait_listening(self, timeout: float = 10.0) -> None:
        """Returns once notifications of other backends are being received."""
        await asyncio.wait_for(self._listening.wait(), timeout)

    def refusal(self, exc: StoreUnavailable) -> StoreRefused:
        return StoreRefused(f"{self.name} could not be prepared ({exc.message})")

    async def close(self) -> None:
        await self._stop_writing()
        if self._listener is not None:
            self._listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._listener
        await self._close_pg()

    async def _close_pg(self) -> None:
        await self._w.close()
        await self._r.close()

    # --- reading and writing ---------------------------------------------------------

    async def read(self, fn: Callable[[Tx], T]) -> T:
        def run(conn: psycopg.Connection[Any]) -> T:
            conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            try:
                return fn(PgTx(conn, dialect=POSTGRESQL))
            finally:
                if not conn.broken:
                    conn.execute("ROLLBACK")

        try:
            return await self._r.run(run)
        except psycopg.Error as exc:
            raise StoreUnavailable(f"could not read the database: {_first_line(exc)}") from exc

    async def _on_writer_thread(self, fn: Callable[[], None]) -> None:
        await asyncio.get_running_loop().run_in_executor(self._w.pool, fn)

    def _commit(self, batch: list[Job], timing: Timing) -> None:
        # (the connection per batch: one that broke is opened again for the next)
        _commit_batch(self._w.connection(), batch=batch, timing=timing, origin=self.origin)

    def _is_store_error(self, exc: BaseException) -> bool:
        return isinstance(exc, psycopg.Error)

    # --- publishing, in seq order per session ---------------------------------------

    def _publish(self, item: Any) -> None:
        if isinstance(item, StoredEvent) and item.stored and item.event.seq is not None:
            sid, seq = item.event.session_id, item.event.seq
            seen = self._seen.get(sid)
            if seen is not None and seq > seen + 1:  # another backend's events come first
                asyncio.get_running_loop().create_task(self._catch_up(sid, seq))
                return
            if seen is not None and seq <= seen:
                return
            self._seen[sid] = seq
        super()._publish(item)

    async def _catch_up(self, session_id: str, upto: int | None = None) -> None:
        """Publishes the session's stored events after the last one seen, from the table."""
        lock = self._catching.setdefault(session_id, asyncio.Lock())
        async with lock:
            start = self._seen.get(session_id, 0)
            if upto is not None and start >= upto:
                return
            try:
                found = await self.read(lambda tx: since(tx, session_id, start, CATCH_UP_LIMIT))
            except StoreUnavailable as exc:
                log.warning("could not read events of session %s: %s", session_id, exc.message)
                return
            for event in found:
                assert event.seq is not None
                if event.seq > self._seen.get(session_id, 0):
                    self._seen[session_id] = event.seq
                    super()._publish(StoredEvent(event))

    async def _listen(self) -> None:
        """Receives the other backends' notifications for as long as the store is open."""
        failures = 0
        while not self._closing:
            try:
                conn = await psycopg.AsyncConnection.connect(
                    self.dsn, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S,
                    application_name="turnkey-listener")
            except psycopg.Error as exc:
                delay = LISTEN_RETRY_S[min(failures, len(LISTEN_RETRY_S) - 1)]
                failures += 1
                log.warning("could not listen for other backends (%s); trying again in %g s",
                            _first_line(exc), delay)
                await asyncio.sleep(delay)
                continue
            try:
                async with conn:
                    await conn.execute(f"LISTEN {CHANNEL}")
                    if failures:  # notifications were missed meanwhile: the table has them
                        for sid in list(self._seen):
                            await self._catch_up(sid)
                    failures = 0
                    self._listening.set()
                    async for note in conn.notifies():
                        self._received(note.payload)
            except psycopg.Error as exc:
                failures += 1
                self._listening.clear()
                log.warning("lost the connection that listens for other backends (%s)",
                            _first_line(exc))
                await asyncio.sleep(LISTEN_RETRY_S[0])

    def _received(self, payload: str) -> None:
        try:
            note = json.loads(payload)
        except ValueError:
            log.warning("ignored a malformed notification on %s", CHANNEL)
            return
        if not isinstance(note, dict) or note.get("o") == self.origin:
            return
        for sid, _lo, hi in note.get("s", ()):
            if hi > self._seen.get(sid, 0):
                asyncio.get_running_loop().create_task(self._foreign(sid, _lo, hi))
        for item in _broadcasts(note):
            super()._publish(item)
        for parent, child in note.get("m", ()):
            super()._publish(Moved(parent, child))
        if "c" in note:
            try:
                self.on_signal(note["c"])
            except Exception:
                logs.internal(log, "acting on another backend's signal failed")

    async def _foreign(self, session_id: str, lo: int, hi: int) -> None:
        if session_id not in self._seen:
            self._seen[session_id] = lo - 1  # what came before is replayed by subscribers
        await self._catch_up(session_id, hi)

    async def signal(self, data: dict[str, Any]) -> bool:
        """Sends `data` to every other backend on this database (their `on_signal`)."""
        payload = json.dumps({"o": self.origin, "c": data})

        def send(tx: Tx) -> None:
            tx.execute("SELECT pg_notify(?, ?)", (CHANNEL, payload))

        await self.write(send)
        return True


def _commit_batch(conn: psycopg.Connection[Any], *, batch: list[Job], timing: Timing,
                  origin: str) -> None:
    """Runs on the writer thread: one serializable transaction, one savepoint per job, run
    again whole when PostgreSQL refuses it for a conflict."""
    clock = time.monotonic
    timing.started, cpu_started = clock(), time.thread_time()
    try:
        for attempt in range(CONFLICT_RETRIES):
            try:
                _attempt(conn, batch, timing, origin)
                return
            except _Conflict:
                pass
            except psycopg.Error as exc:
                if not _is_conflict(exc):
                    raise
            if not conn.broken:
                conn.execute("ROLLBACK")
            time.sleep(random.uniform(0, 0.002 * (attempt + 1)))
        raise StoreUnavailable(f"the database refused this write {CONFLICT_RETRIES} times for "
                               "conflicting with other backends' writes")
    finally:
        timing.ended, timing.cpu_s = clock(), time.thread_time() - cpu_started


def _attempt(conn: psycopg.Connection[Any], batch: list[Job], timing: Timing,
             origin: str) -> None:
    clock = time.monotonic
    alone = len(batch) == 1  # the usual case: the transaction is the job's, no savepoint
    conn.execute("BEGIN ISOLATION LEVEL SERIALIZABLE")
    try:
        for job in batch:
            job_started = clock()
            job.result, job.error, job.published = None, None, []
            if not alone:
                conn.execute("SAVEPOINT job")
            tx = PgTx(conn, dialect=POSTGRESQL)
            try:
                job.result = job.fn(tx)
                tx.finish()
                job.published = tx.published
            except BaseException as exc:
                if _is_conflict(exc):
                    raise _Conflict() from None
                if conn.broken:  # the server went away: the whole batch failed
                    raise
                job.error = translate(exc, psycopg.Error)
                if alone:
                    conn.execute("ROLLBACK")
                    return
                conn.execute("ROLLBACK TO SAVEPOINT job")
            if not alone:
                conn.execute("RELEASE SAVEPOINT job")
            if (took := clock() - job_started) >= timing.slowest_s:
                timing.slowest, timing.slowest_s = job.fn, took
        payload = _notification(batch, origin)
        if payload is not None:
            conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, payload))
        timing.commit_started = clock()
        conn.execute("COMMIT")
    except BaseException:
        if not conn.broken and conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            conn.execute("ROLLBACK")
        raise


def _notification(batch: list[Job], origin: str) -> str | None:
    """What other backends are told of this batch: each session's new seqs, the
    session-less broadcasts (left out when too long: they are hints, not state) and
    conversations that moved."""
    seqs: dict[str, list[int]] = {}
    broadcasts: list[Any] = []
    moved: list[list[str]] = []
    for job in batch:
        if job.error is not None:
            continue
        for item in job.published:
            if isinstance(item, StoredEvent) and item.stored and item.event.seq is not None:
                span = seqs.setdefault(item.event.session_id, [item.event.seq, item.event.seq])
                span[0], span[1] = min(span[0], item.event.seq), max(span[1], item.event.seq)
            elif isinstance(item, StoredEvent):
                broadcasts.append(_event_dict(item.event))
            elif isinstance(item, Report):
                broadcasts.append(msgspec.to_builtins(item))
            elif isinstance(item, Moved):
                moved.append([item.parent, item.child])
    if not (seqs or broadcasts or moved):
        return None
    note: dict[str, Any] = {"o": origin, "s": [[sid, lo, hi] for sid, (lo, hi) in seqs.items()]}
    if moved:
        note["m"] = moved
    text = json.dumps(note)
    if broadcasts:
        # Reports apart ("r", each with its place among the broadcasts), so that a backend
        # that knows no reports reads the events of "b" as before and skips the rest.
        with_b = json.dumps({
            **note, "b": [b for b in broadcasts if "report" not in b],
            "r": [[i, b] for i, b in enumerate(broadcasts) if "report" in b],
        })
        if len(with_b.encode()) <= NOTIFY_MAX:
            text = with_b
    if len(text.encode()) > NOTIFY_MAX:  # very many sessions in one batch: say so, read all
        text = json.dumps({"o": origin, "s": [[sid, lo, hi] for sid, (lo, hi) in
                                              list(seqs.items())[:100]]})
    return text


def _event_dict(event: EventRecord) -> dict[str, Any]:
    return {"session_id": event.session_id, "type": event.type, "ts": event.ts,
            "data": event.data, "turn_id": event.turn_id, "admission_id": event.admission_id}


_REPORTS = SessionChanged | ScheduleChange


def _broadcasts(note: dict[str, Any]) -> list[StoredEvent | Report]:
    """The broadcasts of another backend's notification, in the order its store published
    them: the events of "b", and the reports of "r" at their places among them (the edge
    makes the event of a report)."""
    reports = {i: data for i, data in note.get("r", ())}
    rest = iter(note.get("b", ()))
    out: list[StoredEvent | Report] = []
    for i in range(len(reports) + len(note.get("b", ()))):
        if i in reports:
            out.append(msgspec.convert(reports[i], _REPORTS))
        else:
            out.append(StoredEvent(EventRecord(**next(rest)), False))
    return out


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]

