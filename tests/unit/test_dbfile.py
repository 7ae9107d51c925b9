"""The database file before it is opened: created whole, refused when it cannot be ours."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from backend.errors import StoreDamaged, StoreRefused
from backend.store import dbfile
from backend.store.db import SqliteDatabase
from backend.store.migrations import SCHEMA_VERSION


def test_a_missing_database_is_created_whole_in_wal_mode(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    (tmp_path / "state.db.new").write_bytes(b"left by a start that died creating it")
    dbfile.prepare(db)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.db"]
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("SELECT MAX(version) FROM schema_migrations").fetchone()[0] == SCHEMA_VERSION
    finally:
        conn.close()


def test_an_existing_database_is_left_to_open(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    dbfile.prepare(db)
    before = db.read_bytes()
    dbfile.prepare(db)
    assert db.read_bytes() == before


def test_an_empty_file_is_never_initialized(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    db.touch()
    with pytest.raises(StoreDamaged, match=r"state\.db is empty \(0 bytes\).*move it aside"):
        dbfile.prepare(db)
    assert db.stat().st_size == 0


def test_a_log_without_its_database_is_refused(tmp_path: Path) -> None:
    (tmp_path / "state.db-wal").write_bytes(b"x" * 100)
    with pytest.raises(StoreDamaged, match=r"missing but its write-ahead log state\.db-wal"):
        dbfile.prepare(tmp_path / "state.db")
    assert not (tmp_path / "state.db").exists()
    (tmp_path / "state.db-wal").write_bytes(b"")
    dbfile.prepare(tmp_path / "state.db")  # an empty log holds nothing to replay


@pytest.mark.parametrize(("code", "kind", "words"), [
    (sqlite3.SQLITE_NOTADB, StoreDamaged, "is not a SQLite database"),
    (sqlite3.SQLITE_CORRUPT, StoreDamaged, "is damaged"),
    (sqlite3.SQLITE_CORRUPT | (1 << 8), StoreDamaged, "is damaged"),  # an extended code
    (sqlite3.SQLITE_FULL, StoreRefused, "the disk is full"),
    (sqlite3.SQLITE_IOERR, StoreRefused, "could not be opened"),
])
def test_refusals_name_the_file_and_say_what_to_do(
    tmp_path: Path, code: int, kind: type[StoreRefused], words: str
) -> None:
    error = sqlite3.DatabaseError("boom")
    error.sqlite_errorcode = code
    refusal = dbfile.refusal(tmp_path / "state.db", error)
    assert type(refusal) is kind
    assert refusal.message.startswith(f"{tmp_path / 'state.db'} ")
    assert words in refusal.message
    assert "\n" not in refusal.message


def test_the_advice_names_the_log_that_must_move_with_it(tmp_path: Path) -> None:
    (tmp_path / "state.db-wal").write_bytes(b"log")
    error = sqlite3.DatabaseError("file is not a database")
    error.sqlite_errorcode = sqlite3.SQLITE_NOTADB
    assert "move it (with state.db-wal) aside" in dbfile.refusal(tmp_path / "state.db", error).message


async def test_open_leaves_nothing_running_when_it_refuses(tmp_path: Path) -> None:
    db = SqliteDatabase(tmp_path / "state.db")
    (tmp_path / "state.db").write_bytes(b"not a database, not even close" * 200)
    before = set(threading.enumerate())
    with pytest.raises(StoreDamaged, match="is not a SQLite database"):
        await db.open()
    for thread in set(threading.enumerate()) - before:  # a connection's worker, ending
        thread.join(timeout=10)
        assert not thread.is_alive(), "no connection thread keeps the process up"
    await db.close()
