"""Fixtures: a scripted fake provider, real backend processes on temp data dirs, raw clients.

Every test that uses a backend runs twice, once per store: ``[sqlite]`` (DATA_DIR/state.db)
and ``[pg]`` (a fresh database on the PostgreSQL server this test run starts, tests/pg_server.py).
A test about the SQLite file itself, or one no store takes part in (a frame the protocol layer
refuses), is marked ``@pytest.mark.sqlite_only("why")`` and runs once.  ``-k sqlite`` never
starts PostgreSQL; ``-k pg`` runs only the PostgreSQL half.  Under pytest-xdist each worker
process starts its own PostgreSQL server and Synapse (session fixtures are per process).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tests.fakes.openai_server import FakeOpenAI
from tests.matrix_server import MatrixServer
from tests.pg_server import PgServer

from .backend_proc import Backend, BackendFactory, Stores, running
from .wire import Connect, Rpc

STORES = ("sqlite", "pg")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "sqlite_only(reason): runs on SQLite only: the test is about SQLite's file, or "
        "checks what no store takes part in (a frame the protocol layer refuses)")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize every test that reaches ``store`` (through backend_factory, backend, ...)."""
    if "store" not in metafunc.fixturenames:
        return
    marker = metafunc.definition.get_closest_marker("sqlite_only")
    if marker is not None and not (marker.args or marker.kwargs.get("reason")):
        raise pytest.UsageError(f"{metafunc.definition.nodeid}: sqlite_only needs a reason")
    kinds = ["sqlite"] if marker is not None else list(STORES)
    metafunc.parametrize("store", kinds, indirect=True, ids=kinds)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """The test run's PostgreSQL server, started the first time a ``[pg]`` test needs it and
    stopped at the end of the run, whatever happened (its processes also die with this one)."""
    with PgServer() as server:
        yield server


@pytest.fixture
def store(request: pytest.FixtureRequest) -> Iterator[Stores]:
    """Which store this run of the test uses (``[sqlite]`` or ``[pg]``)."""
    kind = getattr(request, "param", "sqlite")
    # The server is asked for lazily: a run of only [sqlite] tests never starts PostgreSQL.
    stores = Stores(kind, lambda: request.getfixturevalue("pg_server"))
    yield stores
    stores.drop_all()


@pytest.fixture
def backend_factory(tmp_path: Path, store: Stores) -> Iterator[BackendFactory]:
    """``make(base_url, extra_config="", start=True)``: a Backend on its own data dir and its
    own store (a fresh PostgreSQL database on ``[pg]``), stopped at the end of the test."""
    made: list[Backend] = []

    def make(base_url: str, extra_config: str = "", start: bool = True,
             extra_env: dict[str, str] | None = None) -> Backend:
        backend = Backend(tmp_path / f"data{len(made)}", base_url, extra_config, extra_env,
                          store=store.new())
        made.append(backend)
        if start:
            backend.start()
        return backend

    yield make
    errors: list[str] = []
    for backend in made:
        backend.close()
        print(backend.stderr_tail())  # shown by pytest only when the test failed
        errors += backend.logged_errors()
    assert not errors, "the backend logged errors:\n" + "\n".join(errors[:20])


@pytest.fixture
def backend(backend_factory: BackendFactory, fake_provider: FakeOpenAI) -> Backend:
    """A started backend whose default provider is ``fake_provider``."""
    return backend_factory(fake_provider.base_url)


@pytest.fixture
async def connect(backend: Backend) -> AsyncIterator[Connect]:
    """``await connect(initialize=True, token=..., headers=..., name=...)`` to ``backend``."""
    opened: list[Rpc] = []

    async def _connect(
        *,
        initialize: bool = True,
        token: str | None = None,
        headers: dict[str, str] | None = None,
        name: str = "rpc",
    ) -> Rpc:
        rpc = await Rpc.open(
            backend.port,
            token if token is not None else backend.token,
            initialize=initialize,
            headers=headers,
            name=name,
        )
        opened.append(rpc)
        return rpc

    yield _connect
    for rpc in opened:
        if not rpc.closed.is_set():
            try:
                await rpc.close()
            except (TimeoutError, OSError):
                rpc.abort()


# --- two backends on one PostgreSQL database --------------------------------------------------

# Short leases, so a dead peer is noticed within seconds.
PEER_CONFIG = 'idle_exit_minutes = 0\n[lease]\nttl_s = 3\nrefresh_s = 1\n'


@pytest.fixture
def shared_dsn(pg_server: PgServer) -> Iterator[str]:
    name = pg_server.create_database()
    yield pg_server.dsn(name)
    pg_server.drop_database(name)


@pytest.fixture
def fakes() -> Iterator[tuple[FakeOpenAI, FakeOpenAI]]:
    """One model server per backend of `pair`: which backend ran a turn is which server it
    asked."""
    a, b = FakeOpenAI(), FakeOpenAI()
    yield a, b
    a.close()
    b.close()
    assert a.errors == []
    assert b.errors == []


@pytest.fixture
def pair(tmp_path: Path, shared_dsn: str,
         fakes: tuple[FakeOpenAI, FakeOpenAI]) -> Iterator[tuple[Backend, Backend]]:
    """Two started backend processes sharing one fresh PostgreSQL database, each with its own
    data folder and model server (`fakes`); any error either logs fails the test."""
    a, b = (Backend(tmp_path / f"peer{i}", fake.base_url, PEER_CONFIG, store=shared_dsn)
            for i, fake in enumerate(fakes))
    with running(a, b):
        yield a, b


# --- the Matrix homeserver ------------------------------------------------------------------


@pytest.fixture(scope="session")
def matrix_server() -> Iterator[MatrixServer]:
    """The test run's Matrix homeserver (Synapse, tests/matrix_server.py), started the first
    time a test asks for it and stopped at the end of the run whatever happened (it also dies
    with this process).  Tests normally take ``matrix`` instead, which also heals outages."""
    with MatrixServer() as server:
        yield server


@pytest.fixture
def matrix(matrix_server: MatrixServer) -> Iterator[MatrixServer]:
    """The session's homeserver, up and answering when the test starts; at its end the test's
    clients are closed and the server is brought back up, so a test that failed mid-outage
    (stopped, killed or paused server) does not take the next tests down with it."""
    matrix_server.ensure_up()
    yield matrix_server
    matrix_server.close_clients()
    matrix_server.ensure_up()
