"""The PostgreSQL store itself, on the test run's real server: schema, isolation, fan-out.

- Its schema has every table and column of the SQLite file's (built by each store's own
  migrations from empty), and migrating again changes nothing; a newer schema is refused.
- Two stores (as two backends would hold) doing read-modify-write jobs on one row at once
  lose no update: SERIALIZABLE plus the retry of a refused batch.
- Events one store appends reach the other store's publisher in seq order, and an event
  whose notification never came (written without one) is read from the table, not lost.
- The store's reports of changed sessions and schedules reach the other store as they were
  made, in order with the batch's broadcasts, and become the same broadcasts there.
"""

from __future__ import annotations

import asyncio
import functools
import sqlite3
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from backend import wire
from backend.errors import NotFound, StoreTooNew, StoreUnavailable
from backend.store import events, pg_schema, runtime, schedules, sessions
from backend.store.db import Tx
from backend.store.events import StoredEvent
from backend.store.migrations import migrate as sqlite_migrate
from backend.store.pg import PgDatabase, pg_sql
from tests.fakes.openai_server import FakeOpenAI
from tests.pg_server import PgServer

from .backend_proc import Backend
from .test_damaged_store import assert_one_line, refused

SQLITE_ONLY_TABLES = {"messages_fts", "sqlite_sequence"}
PG_ONLY = {("messages", "search"), ("backends", "*")}


@pytest.fixture
def dsn(pg_server: PgServer) -> Iterator[str]:
    name = pg_server.create_database()
    yield pg_server.dsn(name)
    pg_server.drop_database(name)


@pytest.fixture
async def two(dsn: str) -> AsyncIterator[tuple[PgDatabase, PgDatabase]]:
    first, second = PgDatabase(dsn), PgDatabase(dsn)
    await first.open()
    await second.open()
    await first.wait_listening()
    await second.wait_listening()
    yield first, second
    await first.close()
    await second.close()


def _sqlite_columns(path: Path) -> dict[str, set[str]]:
    conn = sqlite3.connect(path, isolation_level=None)
    sqlite_migrate(conn)
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    out = {t: {r[1] for r in conn.execute(f"PRAGMA table_info({t})")} for t in tables
           if not t.startswith("messages_fts") and t not in SQLITE_ONLY_TABLES}
    conn.close()
    return out


def _pg_columns(dsn: str) -> dict[str, set[str]]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT table_name, column_name FROM information_schema.columns "
                            "WHERE table_schema = 'public'").fetchall()
    out: dict[str, set[str]] = {}
    for table, column in rows:
        out.setdefault(table, set()).add(column)
    return out


def test_the_schema_has_every_table_and_column_of_the_sqlite_file(dsn: str, tmp_path: Path) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert pg_schema.migrate(conn) == pg_schema.SCHEMA_VERSION
        assert pg_schema.migrate(conn) == pg_schema.SCHEMA_VERSION  # again: nothing to do
        versions = [r[0] for r in conn.execute("SELECT version FROM schema_migrations")]
    assert versions == list(range(1, pg_schema.SCHEMA_VERSION + 1))
    lite, pg = _sqlite_columns(tmp_path / "state.db"), _pg_columns(dsn)
    for table, columns in lite.items():
        assert table in pg, f"{table} is missing on PostgreSQL"
        assert columns == pg[table] - {c for t, c in PG_ONLY if t == table}, table
    # PostgreSQL-only: the peers' table, and attachments' bytes (SQLite keeps them in files).
    assert set(pg) - set(lite) == {"backends", "attachment_data", "attachment_partial"}


def test_a_newer_schema_is_refused(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        pg_schema.migrate(conn)
        conn.execute("INSERT INTO schema_migrations (version, applied_at) VALUES (99, 'later')")
        with pytest.raises(StoreTooNew, match="schema version 99"):
            pg_schema.migrate(conn)


def test_a_version_eight_usage_table_keeps_its_rows_and_takes_reviews(dsn: str) -> None:
    old_check = "CHECK (task IN ('turn', 'compression', 'title'))"
    with psycopg.connect(dsn, autocommit=True) as conn:
        # Version 8 as it was: step 1 is today's declaration, so its CHECK is put back as
        # version 8 left it.
        conn.execute("CREATE TABLE schema_migrations "
                     "(version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)")
        for version, step in enumerate(pg_schema.STEPS[:8], start=1):
            for sql in step:
                conn.execute(sql.encode())
            conn.execute("INSERT INTO schema_migrations VALUES (%s, 'then')", (version,))
        conn.execute(f"ALTER TABLE usage DROP CONSTRAINT usage_task_check, "
                     f"ADD CONSTRAINT usage_task_check {old_check}")
        conn.execute("INSERT INTO sessions (session_id, title, cwd, model, created_at, "
                     "updated_at) VALUES ('ses_1', 'old', '/tmp', 'gpt-x', 'x', 'x')")
        old = [("ses_1", "aux", "small", "compression", 1, 900, 80, 0, 0.01, 1),
               ("ses_1", "main", "gpt-x", "turn", 3, 120, 40, 10, 0.25, 0)]
        for row in old:
            conn.execute("INSERT INTO usage VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)", row)
        review = ("INSERT INTO usage (session_id, provider, model, task) "
                  "VALUES ('ses_1', 'aux', 'small', %s)")
        with pytest.raises(psycopg.errors.CheckViolation):
            conn.execute(review, ("review",))
        assert pg_schema.migrate(conn) == pg_schema.SCHEMA_VERSION
        assert conn.execute("SELECT * FROM usage ORDER BY task").fetchall() == old
        conn.execute(review, ("review",))
        with pytest.raises(psycopg.errors.CheckViolation):
            conn.execute(review, ("other",))

def test_placeholders_are_translated_outside_literals_only() -> None:
    assert pg_sql("SELECT * FROM t WHERE a = ? AND b LIKE 'x%?'") == \
        "SELECT * FROM t WHERE a = %s AND b LIKE 'x%%?'"
    assert pg_sql("UPDATE t SET a = :a WHERE id = :sid") == "UPDATE t SET a = %(a)s WHERE id = %(sid)s"
    assert pg_sql("SELECT ?1, ?2, ?1") == "SELECT %(p1)s, %(p2)s, %(p1)s"
    assert pg_sql("SELECT payload::jsonb ->> 'k' FROM t") == "SELECT payload::jsonb ->> 'k' FROM t"


async def test_read_modify_write_jobs_of_two_stores_lose_no_update(
    two: tuple[PgDatabase, PgDatabase],
) -> None:
    """Each job reads the epoch and writes it plus one, as SQLite's single writer would run
    them; under READ COMMITTED half the increments would be lost."""
    first, second = two
    before = await first.read(_epoch)

    def bump(tx: Tx) -> None:
        tx.execute("UPDATE runtime SET value = ? WHERE key = 'epoch'", (_epoch(tx) + 1,))

    await asyncio.gather(*(db.write(bump) for _ in range(60) for db in (first, second)))
    after = await second.read(_epoch)
    assert after - before == 120
    assert await first.write(runtime.bump_epoch) == after + 1


def _epoch(tx: Tx) -> int:
    row = tx.one("SELECT value FROM runtime WHERE key = 'epoch'")
    assert row is not None
    return int(row[0])


async def test_events_of_one_store_reach_the_other_in_order_even_without_a_notification(
    two: tuple[PgDatabase, PgDatabase],
) -> None:
    first, second = two
    seen: list[tuple[str, int | None, str]] = []
    arrived = asyncio.Event()

    def publish(item: Any) -> None:
        if isinstance(item, StoredEvent) and item.stored:
            seen.append((item.event.session_id, item.event.seq, item.event.data["n"]))
            if item.event.data["n"] == "last":
                arrived.set()

    second.publisher = publish
    sid = "ses_pgstore"
    await first.write(lambda tx: sessions.insert(tx, sid, "t", "/tmp", "m"))
    for n in ("a", "b"):
        await first.write(functools.partial(events.append, session_id=sid, type_="test.event",
                                            data={"n": n}))
    # A row written with no notification (as if it was lost), then one notified again.
    await first.write(lambda tx: tx.execute(
        "INSERT INTO events (session_id, seq, type, ts, data) VALUES (?, 3, 'test.event', "
        "'now', '{\"n\": \"silent\"}')", (sid,)))
    await first.write(lambda tx: events.append(tx, sid, "test.event", {"n": "last"}))
    await asyncio.wait_for(arrived.wait(), 10)
    assert seen == [(sid, 1, "a"), (sid, 2, "b"), (sid, 3, "silent"), (sid, 4, "last")]


async def test_reports_of_one_store_become_the_same_broadcasts_on_the_other(
    two: tuple[PgDatabase, PgDatabase],
) -> None:
    first, second = two
    here: list[StoredEvent] = []
    there: list[StoredEvent] = []
    arrived = asyncio.Event()

    def remote(item: Any) -> None:
        if isinstance(item, StoredEvent) and not item.stored:
            there.append(item)
            if item.event.type == "test.last":
                arrived.set()

    first.publisher = wire.announcing(lambda item: here.append(item) if isinstance(
        item, StoredEvent) and not item.stored else None)
    second.publisher = wire.announcing(remote)
    sid = "ses_reports"

    def job(tx: Tx) -> None:
        sessions.insert(tx, sid, "t", "/tmp", "m")
        sessions.touch(tx, sid)
        schedules.changed(tx, schedules.insert(tx, {
            "schedule_id": "sch_1", "principal": "owner", "session_id": None,
            "new_session": '{"title": "x"}', "text": "hi", "cron": "0 9 * * *", "at": None,
            "timezone": "UTC", "missed": "skip", "enabled": True, "next_fire_at": None}))
        schedules.delete(tx, "sch_1")
        events.broadcast(tx, "", "test.last", {})

    await first.write(job)
    await asyncio.wait_for(arrived.wait(), 10)
    assert [e.event.type for e in here] == [
        "schedule.changed", "schedule.changed", "test.last", "session.updated"]
    assert [wire.event(e.event) for e in there] == [wire.event(e.event) for e in here]


async def test_a_failing_statement_fails_its_own_job_only(
    two: tuple[PgDatabase, PgDatabase],
) -> None:
    """Jobs committed together each have a savepoint: one refused by the server (a value too
    long for its type, here) leaves the others of its batch committed, as on SQLite."""
    first, _ = two
    good = first.enqueue(lambda tx: tx.execute(
        "INSERT INTO tokens (token_id, token_hash, scopes, label, created_at) "
        "VALUES ('tok_a', 'h', 'read', 'kept', 'now')"))
    bad = first.enqueue(lambda tx: tx.execute(  # over a tsvector's 1 MB
        "SELECT to_tsvector('simple', string_agg(md5(i::text), ' ')) "
        "FROM generate_series(1, 40000) AS i"))
    results = await asyncio.gather(good, bad, return_exceptions=True)
    assert isinstance(results[1], StoreUnavailable), results
    assert not isinstance(results[0], BaseException), results
    rows = await first.read(lambda tx: tx.all("SELECT label FROM tokens"))
    assert [r["label"] for r in rows] == ["kept"]


async def test_a_job_that_raises_alone_in_its_batch_leaves_nothing(
    two: tuple[PgDatabase, PgDatabase],
) -> None:
    """A batch of one job has no savepoint: its failure rolls the whole transaction back."""
    first, _ = two

    def half_done(tx: Tx) -> None:
        tx.execute("INSERT INTO tokens (token_id, token_hash, scopes, label, created_at) "
                   "VALUES ('tok_b', 'h2', 'read', 'half', 'now')")
        raise NotFound("token", "tok_b")

    with pytest.raises(NotFound):
        await first.write(half_done)
    assert await first.read(lambda tx: tx.all("SELECT label FROM tokens")) == []
    await first.write(lambda tx: tx.execute(  # and the connection is usable after it
        "INSERT INTO tokens (token_id, token_hash, scopes, label, created_at) "
        "VALUES ('tok_c', 'h3', 'read', 'next', 'now')"))
    rows = await first.read(lambda tx: tx.all("SELECT label FROM tokens"))
    assert [r["label"] for r in rows] == ["next"]


def test_a_backend_whose_database_cannot_be_reached_exits_saying_so_without_the_password(
    tmp_path: Path, fake_provider: FakeOpenAI, pg_server: PgServer,
) -> None:
    """A wrong store is refused at start like a damaged file: exit 2, one line that names the
    database (its password masked) and says what to check; nothing is started."""
    wrong = f"postgresql://turnkey:s3cret-pw@127.0.0.1:{pg_server.port}/no_such_database"
    backend = Backend(tmp_path / "data", fake_provider.base_url, store=wrong)
    line = assert_one_line(refused(backend), "no_such_database", "could not be opened")
    assert "s3cret-pw" not in line
    assert ":***@" in line
    log = (backend.data_dir / "logs" / "backend.log").read_text()
    assert "s3cret-pw" not in log
