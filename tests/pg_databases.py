"""Fresh databases on an existing PostgreSQL server, for tests of `turnkey store migrate`.

$TURNKEY_TEST_PG_DSN names the server (a URL to its `postgres` database, as a user that may
create databases), else the dev server on 127.0.0.1:55432; with neither, the tests that need
it are skipped, saying so.  `DevPg` needs only an admin URL, so moving to the test run's own
server (tests/pg_server.py, the `pg_server` fixture, once merged) is one line in each `pg`
fixture: `server = DevPg(pg_server.dsn("postgres"))`, then `yield server` and
`server.drop_all()`.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from psycopg import sql

DEFAULT_ADMIN_DSN = "postgresql://postgres@127.0.0.1:55432/postgres"


class DevPg:
    """Databases made on the server, each dropped by `drop_all`."""

    def __init__(self, admin_dsn: str) -> None:
        self.admin_dsn = admin_dsn
        self.made: list[str] = []

    def admin(self, statement: sql.SQL | sql.Composed) -> None:
        with psycopg.connect(self.admin_dsn, autocommit=True, connect_timeout=5) as conn:
            conn.execute(statement)

    def create_database(self) -> str:
        name = f"tk_migrate_{uuid.uuid4().hex[:10]}"
        self.admin(sql.SQL("CREATE DATABASE {} TEMPLATE template0").format(sql.Identifier(name)))
        self.made.append(name)
        return name

    def drop_database(self, name: str) -> None:
        """FORCE ends the connections a killed backend may have left."""
        self.admin(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))

    def drop_all(self) -> None:
        for name in self.made:
            self.drop_database(name)

    def dsn(self, name: str) -> str:
        return urlunsplit(urlsplit(self.admin_dsn)._replace(path=f"/{name}"))


def dev_pg() -> Iterator[DevPg]:
    """The body of a `pg` fixture: the server, its databases dropped afterwards."""
    given = os.environ.get("TURNKEY_TEST_PG_DSN")
    server = DevPg(given or DEFAULT_ADMIN_DSN)
    try:
        server.admin(sql.SQL("SELECT 1"))
    except psycopg.OperationalError as exc:
        if given:
            raise
        pytest.skip(f"no PostgreSQL server at {DEFAULT_ADMIN_DSN} ({exc}); set TURNKEY_TEST_PG_DSN")
    yield server
    server.drop_all()
