"""A blank SQLite file migrated to head equals store/schema.py's declaration, column by column.

The file is built by its numbered migrations (store/migrations.py), which existing files
upgrade through; the declaration is what PostgreSQL's tables are generated from and what
the copy reads.  This is what keeps the two from drifting: a migration that adds a column
the declaration lacks (or the other way round) fails here.  PostgreSQL's side is
tests/integration/test_pg_schema.py.

Read with PRAGMA table_info, foreign_key_list, index_list and index_xinfo; what no PRAGMA
tells (CHECK constraints, AUTOINCREMENT, WITHOUT ROWID) is read from the table's CREATE text.
A partial index's condition is compared by presence only: migration 10 wrote
`WHERE enabled`, which the declaration writes `enabled <> 0` so that both stores read it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from typing import Any

import pytest

from backend.store import pg_schema, schema
from backend.store.migrations import migrate
from backend.store.schema import Table

SQLITE_ONLY = {"schema_migrations", "sqlite_sequence"}  # and messages_fts with its shadows
DECLARED = schema.tables(schema.SQLITE)


@pytest.fixture(scope="module")
def conn() -> Iterator[sqlite3.Connection]:
    db = sqlite3.connect(":memory:", isolation_level=None)
    migrate(db)
    yield db
    db.close()


def _flat(sql: str) -> str:
    return " ".join(sql.split())


def _create_text(conn: sqlite3.Connection, table: str) -> str:
    row = conn.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?",
                       (table,)).fetchone()
    return _flat(row[0])


def test_the_file_has_the_declared_tables_and_no_other(conn: sqlite3.Connection) -> None:
    found = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    found = {n for n in found - SQLITE_ONLY if not n.startswith("messages_fts")}
    assert found == {t.name for t in DECLARED}


@pytest.mark.parametrize("table", DECLARED, ids=lambda t: t.name)
def test_columns_in_order_with_type_nullability_default_and_key(
        conn: sqlite3.Connection, table: Table) -> None:
    found = [(name, type_, bool(notnull), default, pk)
             for _cid, name, type_, notnull, default, pk in conn.execute(f"PRAGMA table_info({table.name})")]
    wanted = [(c.name, schema.sqlite_type(c), c.notnull, c.default,
               table.key.index(c.name) + 1 if c.name in table.key else 0) for c in table.columns]
    assert found == wanted


@pytest.mark.parametrize("table", DECLARED, ids=lambda t: t.name)
def test_foreign_keys(conn: sqlite3.Connection, table: Table) -> None:
    found = {(row[3], row[2], row[4], row[6])
             for row in conn.execute(f"PRAGMA foreign_key_list({table.name})")}
    wanted = {(c.name, c.ref.table, c.ref.column, c.ref.on_delete)
              for c in table.columns if c.ref is not None}
    assert found == wanted


@pytest.mark.parametrize("table", DECLARED, ids=lambda t: t.name)
def test_indexes_and_unique_constraints(conn: sqlite3.Connection, table: Table) -> None:
    made: dict[str, tuple[tuple[str, ...], bool, bool]] = {}
    unique: set[tuple[str, ...]] = set()
    for _seq, name, is_unique, origin, partial in conn.execute(f"PRAGMA index_list({table.name})"):
        columns = _index_columns(conn, name)
        if origin == "c":
            made[name] = (columns, bool(is_unique), bool(partial))
        elif origin == "u":
            unique.add(columns)
    assert made == {i.name: (i.columns, i.unique, i.where is not None) for i in table.indexes}
    assert unique == {(c.name,) for c in table.columns if c.unique} | set(table.unique)


def _index_columns(conn: sqlite3.Connection, index: str) -> tuple[str, ...]:
    rows: list[Any] = conn.execute(f"PRAGMA index_xinfo({index})").fetchall()
    return tuple(name + (" DESC" if desc else "") for _n, _cid, name, desc, _coll, key in rows if key)


@pytest.mark.parametrize("table", DECLARED, ids=lambda t: t.name)
def test_checks_row_id_and_storage(conn: sqlite3.Connection, table: Table) -> None:
    text = _create_text(conn, table.name)
    checks = [c.check for c in table.columns if c.check] + list(table.checks)
    assert text.count("CHECK (") == len(checks)
    for check in checks:
        assert f"CHECK ({_flat(check or '')})" in text
    assert ("AUTOINCREMENT" in text) == (table.identity is not None)
    assert text.endswith("WITHOUT ROWID") == table.without_rowid


def test_every_postgresql_table_is_created_by_exactly_one_step() -> None:
    created = [name for step in pg_schema.STEP_TABLES for name in step]
    assert sorted(created) == sorted(t.name for t in schema.tables(schema.POSTGRESQL))
    assert len(created) == len(set(created))


def test_tables_come_after_the_tables_they_reference() -> None:
    seen: set[str] = set()
    for table in schema.TABLES:
        for column in table.columns:
            assert column.ref is None or column.ref.table in seen | {table.name}, table.name
        seen.add(table.name)
