"""The SQLite store from a blank file: migrations, group commit, rollback, publish order."""

import asyncio
import sqlite3
from pathlib import Path

import pytest

from backend.errors import StoreTooNew
from backend.store import events, runtime
from backend.store.db import Database, Tx
from backend.store.migrations import SCHEMA_VERSION, migrate

TABLES = {
    "sessions", "messages", "admissions", "events", "runtime", "schema_migrations",
    "turn_leases", "approvals", "approval_rules", "checkpoints", "usage",
}


def test_blank_database_migrates_to_the_current_schema(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "state.db", isolation_level=None)
    assert migrate(conn) == SCHEMA_VERSION
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert names >= TABLES
    assert migrate(conn) == SCHEMA_VERSION, "migrating twice is a no-op"
    versions = [r[0] for r in conn.execute("SELECT version FROM schema_migrations")]
    assert versions == list(range(1, SCHEMA_VERSION + 1))


def test_version_one_database_upgrades_in_place(tmp_path: Path) -> None:
    from backend.store.migrations import MIGRATIONS

    conn = sqlite3.connect(tmp_path / "state.db", isolation_level=None)
    conn.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT)")
    MIGRATIONS[0](conn)
    conn.execute("INSERT INTO schema_migrations VALUES (1, 'then')")
    conn.execute("INSERT INTO sessions (session_id, title, cwd, model, created_at, updated_at) "
                 "VALUES ('s', 't', '/', 'm', 'x', 'x')")
    assert migrate(conn) == SCHEMA_VERSION
    cols = {r[1] for r in conn.execute("PRAGMA table_info(messages)")}
    assert "meta" in cols
    assert conn.execute("SELECT COUNT(*) FROM sessions").fetchone()[0] == 1


def test_newer_database_is_refused(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "state.db", isolation_level=None)
    migrate(conn)
    conn.execute("INSERT INTO schema_migrations VALUES (?, 'later')", (SCHEMA_VERSION + 1,))
    with pytest.raises(StoreTooNew, match="newer Turnkey"):
        migrate(conn)


async def open_db(path: Path) -> Database:
    db = Database(path / "state.db")
    await db.open()
    return db


async def test_concurrent_writes_commit_and_publish_in_order(tmp_path: Path) -> None:
    db = await open_db(tmp_path)
    published: list[int] = []
    db.publisher = lambda item: published.append(item.event.seq)
    try:
        await db.write(lambda tx: tx.execute(
            "INSERT INTO sessions (session_id, title, cwd, model, created_at, updated_at) "
            "VALUES ('s', 't', '/', 'm', 'x', 'x')"))

        def append(tx: Tx) -> int:
            seq = events.append(tx, "s", "message.delta", {"text": "x"}).seq
            assert seq is not None
            return seq

        seqs = await asyncio.gather(*(db.write(append) for _ in range(200)))
        assert sorted(seqs) == list(range(1, 201)), "every write got its own seq"
        assert published == list(range(1, 201)), "events are published in seq order"
    finally:
        await db.close()


async def test_a_failing_job_rolls_back_alone(tmp_path: Path) -> None:
    db = await open_db(tmp_path)
    published: list[object] = []
    db.publisher = published.append
    try:
        await db.write(lambda tx: tx.execute(
            "INSERT INTO sessions (session_id, title, cwd, model, created_at, updated_at) "
            "VALUES ('s', 't', '/', 'm', 'x', 'x')"))

        def bad(tx: Tx) -> None:
            events.append(tx, "s", "message.delta", {"text": "lost"})
            raise ValueError("boom")

        good = db.write(lambda tx: events.append(tx, "s", "message.delta", {"text": "kept"}))
        results = await asyncio.gather(db.write(bad), good, return_exceptions=True)
        assert isinstance(results[0], ValueError)
        rows = await db.read(lambda tx: events.since(tx, "s", 0, 10))
        assert [e.data["text"] for e in rows] == ["kept"]
        assert rows[0].seq == 1, "the rolled-back job's seq is reused, leaving no gap"
        assert len(published) == 1, "a rolled-back job publishes nothing"
    finally:
        await db.close()


async def test_epoch_survives_reopen(tmp_path: Path) -> None:
    for expected in (1, 2, 3):
        db = await open_db(tmp_path)
        try:
            assert await db.write(runtime.bump_epoch) == expected
        finally:
            await db.close()
