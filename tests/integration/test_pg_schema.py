"""A blank PostgreSQL database migrated to head equals store/schema.py's declaration.

The SQLite side is tests/unit/test_schema_declaration.py.  Here the database is built by
store/pg_schema.py (its DDL generated from the declaration, plus what only PostgreSQL has)
on the test run's server, and read back from information_schema, column by column:
order, type, nullability, default, identity, primary key, UNIQUE and foreign keys; CHECKs
are counted (PostgreSQL rewrites their text); indexes, which information_schema does not
list, are read from pg_index.  What only PostgreSQL has (pg_schema.PG_ONLY_COLUMNS and
PG_ONLY_INDEXES) is left out of the comparison.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from backend.store import pg_schema, schema
from backend.store.schema import Table
from tests.pg_server import PgServer

DECLARED = schema.tables(schema.POSTGRESQL)


@pytest.fixture(scope="module")
def conn(pg_server: PgServer) -> Iterator[psycopg.Connection[Any]]:
    """One blank database for the module (the run's server, tests/integration/conftest.py)."""
    name = pg_server.create_database()
    with psycopg.connect(pg_server.dsn(name), autocommit=True) as db:
        pg_schema.migrate(db)
        yield db
    pg_server.drop_database(name)


def _all(conn: psycopg.Connection[Any], sql: str, *params: Any) -> list[tuple[Any, ...]]:
    return conn.execute(sql, params).fetchall()


def test_the_database_has_the_declared_tables_and_no_other(conn: psycopg.Connection[Any]) -> None:
    found = {r[0] for r in _all(conn, "SELECT table_name FROM information_schema.tables "
                                      "WHERE table_schema = 'public'")}
    assert found - {"schema_migrations"} == {t.name for t in DECLARED}


@pytest.mark.parametrize("table", DECLARED, ids=lambda t: t.name)
def test_columns_in_order_with_type_nullability_default_and_identity(
        conn: psycopg.Connection[Any], table: Table) -> None:
    found = [row for row in _all(
        conn, "SELECT column_name, data_type, is_nullable = 'YES', column_default, "
              "is_identity = 'YES' FROM information_schema.columns WHERE table_schema = "
              "'public' AND table_name = %s ORDER BY ordinal_position", table.name)
        if (table.name, row[0]) not in pg_schema.PG_ONLY_COLUMNS]
    wanted = [(c.name, schema.pg_type(c).lower(), not c.notnull and c.name not in table.key,
               c.default, c.identity) for c in table.columns]
    assert found == wanted


def _constrained(conn: psycopg.Connection[Any], table: str, kind: str) -> set[tuple[str, ...]]:
    """The column lists of the table's constraints of `kind` (PRIMARY KEY, UNIQUE)."""
    rows = _all(conn, "SELECT tc.constraint_name, k.column_name FROM "
                      "information_schema.table_constraints tc JOIN "
                      "information_schema.key_column_usage k USING (constraint_schema, "
                      "constraint_name) WHERE tc.table_schema = 'public' AND tc.table_name = %s "
                      "AND tc.constraint_type = %s ORDER BY k.ordinal_position", table, kind)
    out: dict[str, tuple[str, ...]] = {}
    for name, column in rows:
        out[name] = (*out.get(name, ()), column)
    return set(out.values())


@pytest.mark.parametrize("table", DECLARED, ids=lambda t: t.name)
def test_primary_key_and_unique_constraints(conn: psycopg.Connection[Any], table: Table) -> None:
    assert _constrained(conn, table.name, "PRIMARY KEY") == {table.key}
    assert _constrained(conn, table.name, "UNIQUE") == \
        {(c.name,) for c in table.columns if c.unique} | set(table.unique)


@pytest.mark.parametrize("table", DECLARED, ids=lambda t: t.name)
def test_foreign_keys_and_checks(conn: psycopg.Connection[Any], table: Table) -> None:
    found = set(_all(
        conn, "SELECT k.column_name, u.table_name, u.column_name, r.delete_rule FROM "
              "information_schema.referential_constraints r JOIN "
              "information_schema.key_column_usage k USING (constraint_schema, constraint_name) "
              "JOIN information_schema.constraint_column_usage u USING (constraint_schema, "
              "constraint_name) WHERE k.table_schema = 'public' AND k.table_name = %s",
        table.name))
    assert found == {(c.name, c.ref.table, c.ref.column, c.ref.on_delete)
                     for c in table.columns if c.ref is not None}
    checks = _all(conn, "SELECT constraint_name FROM information_schema.table_constraints "
                        "WHERE table_schema = 'public' AND table_name = %s AND constraint_type = "
                        "'CHECK' AND constraint_name NOT LIKE '%%_not_null'", table.name)
    assert len(checks) == len([c for c in table.columns if c.check]) + len(table.checks)


@pytest.mark.parametrize("table", DECLARED, ids=lambda t: t.name)
def test_indexes(conn: psycopg.Connection[Any], table: Table) -> None:
    """The indexes that back no constraint: name, columns in order, unique, partial."""
    rows = _all(conn, "SELECT i.relname, x.indisunique, x.indpred IS NOT NULL, "
                      "pg_get_indexdef(x.indexrelid) FROM pg_index x "
                      "JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid "
                      "WHERE t.relname = %s AND NOT EXISTS "
                      "(SELECT 1 FROM pg_constraint c WHERE c.conindid = x.indexrelid)", table.name)
    found = {name: (_columns(definition), unique, partial)
             for name, unique, partial, definition in rows if name not in pg_schema.PG_ONLY_INDEXES}
    assert found == {i.name: (i.columns, i.unique, i.where is not None) for i in table.indexes}


def _columns(definition: str) -> tuple[str, ...]:
    """`CREATE INDEX n ON public.t USING btree (a DESC, b) WHERE ...` -> ("a DESC", "b")."""
    inside = definition.split(" USING ", 1)[1].split("(", 1)[1].split(")", 1)[0]
    return tuple(part.strip() for part in inside.split(","))
