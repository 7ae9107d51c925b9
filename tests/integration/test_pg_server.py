"""The test run's own PostgreSQL server (tests/pg_server.py) and the store-agnostic query helper.

These run before anything else about PostgreSQL can: if the server cannot start, or leaves
processes behind, or the helper reads rows differently on the two stores, every ``[pg]``
integration test would fail (or pass) for the wrong reason.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest

from tests.pg_server import SUPERUSER, PgServer, PgServerError, find_bin_dir, server_pids

from .backend_proc import REPO, Backend, Stores

GONE_TIMEOUT_S = 15.0


def wait_no_server(root: Path) -> list[int]:
    """Poll until no postgres process names ``root`` (or the time is up); returns what is left."""
    deadline = time.monotonic() + GONE_TIMEOUT_S
    while (left := server_pids(root)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def owner(pid: int) -> int | None:
    """The user a process runs as; None once it has ended (a short-lived worker, listed a
    moment before, may be gone by now)."""
    try:
        return Path(f"/proc/{pid}").stat().st_uid
    except FileNotFoundError:
        return None


def test_a_server_starts_hands_out_a_database_and_stops_leaving_nothing() -> None:
    server = PgServer()
    root = server.root
    with server:
        pids = server_pids(root)
        assert pids, "the postmaster and its workers run"
        owners = {uid for pid in pids if (uid := owner(pid)) is not None}
        assert owners, "the postmaster's owner is read"
        assert 0 not in owners, "PostgreSQL never runs as root"
        if os.geteuid() == 0:
            assert root.stat().st_uid == Path(f"/proc/{pids[0]}").stat().st_uid != 0

        name = server.create_database()
        with psycopg.connect(server.dsn(name)) as conn:
            row = conn.execute("SELECT current_user, current_database(), "
                               "(SELECT count(*) FROM pg_tables WHERE schemaname = 'public')"
                               ).fetchone()
        assert row == (SUPERUSER, name, 0), "an empty database the test's user owns"
        assert server.dsn(name).startswith(f"postgresql://{SUPERUSER}@127.0.0.1:{server.port}/")

        held = psycopg.connect(server.dsn(name))  # a killed backend's connection, left open
        try:
            server.drop_database(name)
        finally:
            held.close()
        assert server.databases() == []
    assert wait_no_server(root) == []
    assert not root.exists(), "the temp folder is removed"


def test_the_server_dies_with_a_test_process_killed_outright(tmp_path: Path) -> None:
    script = tmp_path / "start.py"
    script.write_text(
        "import sys, time\n"
        f"sys.path.insert(0, {str(REPO)!r})\n"
        "from tests.pg_server import PgServer\n"
        "server = PgServer()\n"
        "server.start()\n"
        "print(server.root, flush=True)\n"
        "time.sleep(120)\n"
    )
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        root = Path(proc.stdout.readline().strip())
        assert server_pids(root), "it started"
        proc.kill()
        proc.wait(timeout=10)
        assert wait_no_server(root) == [], "no postgres outlives a SIGKILLed test run"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    subprocess.run(["rm", "-rf", str(root)], check=True)  # its clean-up never ran


def test_an_interrupted_run_stops_the_server(tmp_path: Path) -> None:
    """Ctrl-C in the middle of a [pg] test: the session fixture still stops the server."""
    test_file = tmp_path / "test_interrupted.py"
    test_file.write_text(
        "def test_interrupted(pg_server):\n"
        "    print('ROOT=' + str(pg_server.root), flush=True)\n"
        "    raise KeyboardInterrupt\n"
    )
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider",
         "-p", "tests.integration.conftest", "--rootdir", str(tmp_path), str(test_file)],
        cwd=REPO, capture_output=True, text=True, timeout=120, check=False,
    )
    roots = [line[5:] for line in run.stdout.splitlines() if line.startswith("ROOT=")]
    assert len(roots) == 1, f"the test ran and started the server:\n{run.stdout}\n{run.stderr}"
    assert run.returncode == 2, "pytest reports the interruption"
    assert wait_no_server(Path(roots[0])) == []
    assert not Path(roots[0]).exists(), "the temp folder is removed"


def test_missing_binaries_fail_with_what_to_run(tmp_path: Path) -> None:
    with pytest.raises(PgServerError) as raised:
        find_bin_dir(lib=tmp_path / "postgresql", path=str(tmp_path))
    assert "scripts/bootstrap dev" in str(raised.value)
    assert "apt-get install postgresql" in str(raised.value)


def test_debian_binaries_are_found_off_path() -> None:
    found = find_bin_dir(path="")
    assert (found / "initdb").is_file()
    assert (found / "postgres").is_file()


def test_query_runs_one_statement_the_same_way_on_both_stores(tmp_path: Path, store: Stores) -> None:
    backend = Backend(tmp_path / "data", "http://127.0.0.1:9/v1", store=store.new())
    assert backend.on_postgres == (store.kind == "pg")
    assert backend.query("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT, score REAL)") == []
    rows = [(1, "50% off?", 0.5), (2, "it's", None)]
    for row in rows:
        backend.query("INSERT INTO notes (id, body, score) VALUES (?, ?, ?)", row)
    assert backend.query("SELECT id, body, score FROM notes WHERE body LIKE '%' || ? ORDER BY id",
                         ("'s",)) == [{"id": 2, "body": "it's", "score": None}]
    assert backend.query("SELECT * FROM notes ORDER BY id") == [
        {"id": 1, "body": "50% off?", "score": 0.5}, {"id": 2, "body": "it's", "score": None}]
    if store.kind == "sqlite":
        assert (backend.data_dir / "state.db").is_file()
    else:
        assert not (backend.data_dir / "state.db").exists()
        assert f'store = "{backend.store}"' in (backend.data_dir / "config.toml").read_text()
