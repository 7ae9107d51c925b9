"""The backend under test as a real subprocess: config, start, READY, kill -9, restart, clean-up."""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import dict_row

from tests.pg_server import PgServer, find_bin_dir

REPO = Path(__file__).resolve().parents[2]
READY = re.compile(r"TURNKEY_BACKEND_READY port=(\d+)")
START_TIMEOUT_S = 30.0
ERROR_LINE = re.compile(r"\b(ERROR|CRITICAL)\b|^Traceback ")


class BackendStartError(AssertionError):
    """The backend did not print its READY line; the message carries its stderr."""


def store_line(store: str | None) -> str:
    """config.toml's top-level ``store`` key: a PostgreSQL URL, or nothing for SQLite."""
    return "" if store is None else f"store = {json.dumps(store)}\n"


def config_toml(base_url: str, extra: str = "", store: str | None = None) -> str:
    """A config.toml whose default provider is the OpenAI-compatible server at ``base_url``."""
    return (
        store_line(store)
        + 'default_provider = "main"\n'
        f"{extra}\n"
        "[providers.main]\n"
        'kind = "openai"\n'
        f'base_url = "{base_url}"\n'
        'model = "fake-model"\n'
        "context_window = 128000\n"
    )


class Backend:
    """One data dir and the backend processes started on it, one at a time.

    ``store`` is the PostgreSQL URL the backend keeps its state in (config.toml's ``store``
    key), or None for the default: SQLite in DATA_DIR/state.db."""

    def __init__(
        self, data_dir: Path, base_url: str, extra_config: str = "",
        extra_env: dict[str, str] | None = None, store: str | None = None,
        own_pid_namespace: bool = False,
    ) -> None:
        self.data_dir = data_dir
        self.store = store
        # In a pid namespace of its own (unshare), a backend is another host to its peers:
        # they cannot judge its pid, only its heartbeat (backend/store/peers.py).
        self.own_pid_namespace = own_pid_namespace
        self.extra_env = dict(extra_env or {})  # added to the environment of every start
        data_dir.mkdir(parents=True, exist_ok=True)
        (data_dir / "config.toml").write_text(config_toml(base_url, extra_config, store))
        self.stderr_path = data_dir / "test-backend-stderr.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.stdout_lines: list[str] = []  # what the current process printed, READY included
        self.info: dict[str, Any] = {}  # backend.json of the current process
        self.port = 0
        self.token = ""
        self.starts = 0

    @property
    def pid(self) -> int:
        assert self.proc is not None, "backend not started"
        return self.proc.pid

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/rpc"

    def command(self) -> list[str]:
        serve = self.serve_command()
        if not self.own_pid_namespace:
            return serve
        # sh is the namespace's init (pid 1 ignores signals it has no handler for), the
        # backend its child; --kill-child takes the namespace down with unshare.
        return ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child", "--",
                "sh", "-c", '"$@" & wait $!', "sh", *serve]

    def serve_command(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "backend",
            "serve",
            "--data-dir",
            str(self.data_dir),
            "--port",
            "0",
        ]

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"  # httpx must not proxy loopback
        env["TURNKEY_HOME"] = str(self.data_dir)
        env.update(self.extra_env)
        return env

    def start(self, timeout: float = START_TIMEOUT_S) -> None:
        """Start a process and wait for its READY line and backend.json."""
        assert self.proc is None or self.proc.poll() is not None, "a backend is still running"
        self.starts += 1
        with self.stderr_path.open("ab") as err:
            err.write(f"\n===== start #{self.starts} =====\n".encode())
            err.flush()
            self.proc = subprocess.Popen(
                self.command(),
                cwd=REPO,
                env=self.env(),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=err,
            )
        lines: queue.Queue[str | None] = queue.Queue()
        self.stdout_lines = []
        threading.Thread(target=_pump, args=(self.proc, lines), daemon=True).start()
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                self.kill9()
                raise BackendStartError(f"no READY line within {timeout}s\n{self.stderr_tail()}")
            if line is None:
                rc = self.proc.wait()
                raise BackendStartError(f"backend exited {rc} before READY\n{self.stderr_tail()}")
            self.stdout_lines.append(line)
            if match := READY.fullmatch(line):
                break
        self.port = int(match.group(1))
        self.info = json.loads((self.data_dir / "backend.json").read_text())
        self.token = self.info["token"]
        # Keep draining stdout in the pump thread so a chatty backend never blocks on a pipe.
        threading.Thread(target=_collect, args=(lines, self.stdout_lines), daemon=True).start()
        if self.store is not None:
            self._check_on_postgres()

    def _check_on_postgres(self) -> None:
        """A [pg] test must exercise PostgreSQL: fail if the backend opened SQLite instead, or
        has not created its tables in the database it was given."""
        if (self.data_dir / "state.db").exists():
            self.kill9()
            raise BackendStartError(f"the backend was given store = {self.store!r} but opened "
                                    f"{self.data_dir / 'state.db'}\n{self.stderr_tail()}")
        [tables] = self.query("SELECT COUNT(*) AS n FROM information_schema.tables "
                              "WHERE table_schema = current_schema()")
        if not tables["n"]:
            self.kill9()
            raise BackendStartError(f"the backend is READY but created no tables in {self.store}"
                                    f"\n{self.stderr_tail()}")

    @property
    def on_postgres(self) -> bool:
        return self.store is not None

    def write_config(self, text: str) -> None:
        """Replace config.toml with ``text``, keeping this backend's store: a test that writes
        its own configuration still runs on the store it was parametrized with."""
        (self.data_dir / "config.toml").write_text(store_line(self.store) + text)

    def query(self, sql: str, params: tuple[Any, ...] | list[Any] = ()) -> list[dict[str, Any]]:
        """Run one statement on this backend's store, from outside the backend, and return its
        rows as dicts: the same check on SQLite (DATA_DIR/state.db) and on PostgreSQL.  Write
        ``?`` placeholders; on PostgreSQL they become psycopg's ``%s``.  Autocommit: a write
        is visible to the backend as soon as this returns."""
        if self.store is None:
            conn = sqlite3.connect(self.data_dir / "state.db", timeout=10, isolation_level=None)
            conn.row_factory = sqlite3.Row
            try:
                return [dict(row) for row in conn.execute(sql, tuple(params)).fetchall()]
            finally:
                conn.close()
        with psycopg.connect(self.store, autocommit=True, row_factory=dict_row) as pg:
            cursor = pg.execute(pg_placeholders(sql).encode(), tuple(params))
            return list(cursor.fetchall()) if cursor.description is not None else []

    def store_dump(self) -> bytes:
        """Everything the store holds, as bytes to search for something that must never be
        stored (a key, a token): SQLite's files (state.db and its WAL and SHM) or a plain-text
        pg_dump of the PostgreSQL database (values decompressed; bytea would be hex)."""
        if self.store is None:
            return b"".join(p.read_bytes() for p in sorted(self.data_dir.glob("state.db*")))
        dumped = subprocess.run([str(find_bin_dir() / "pg_dump"), "--no-owner", "-d", self.store],
                                capture_output=True, timeout=60, check=False)
        assert dumped.returncode == 0, f"pg_dump failed: {dumped.stderr.decode(errors='replace')}"
        return dumped.stdout

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def backend_pid(self) -> int:
        """The backend process's pid as this test sees it (inside its own namespace it is
        the child of that namespace's sh, itself unshare's child)."""
        pid = self.pid
        if self.own_pid_namespace:
            for _ in range(2):
                pid = _only_child(pid)
        return pid

    def pause(self) -> None:
        """SIGSTOP: the backend is alive but silent (no heartbeat, no lease refresh)."""
        os.kill(self.backend_pid(), signal.SIGSTOP)

    def resume(self) -> None:
        os.kill(self.backend_pid(), signal.SIGCONT)

    def kill9(self) -> None:
        """SIGKILL the current process and reap it: the crash every durability test needs."""
        if self.alive():
            assert self.proc is not None
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def terminate(self, timeout: float = 20.0) -> int:
        """SIGTERM and wait; return the exit status (SIGKILL and raise if it hangs)."""
        assert self.proc is not None
        if self.alive():
            os.kill(self.backend_pid(), signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill9()
                raise AssertionError(f"backend ignored SIGTERM for {timeout}s") from None
        return self.proc.returncode

    def restart(self) -> None:
        """A new process on the same data dir (SIGTERM first if one still runs)."""
        if self.alive():
            self.terminate()
        self.start()

    def close(self) -> None:
        self.kill9()

    def logged_errors(self) -> list[str]:
        """Lines of the backend's logs and stderr that report an error or a traceback."""
        files = [self.stderr_path, *sorted((self.data_dir / "logs").glob("*"))]
        found = []
        for path in files:
            if path.is_file():
                text = path.read_text(errors="replace")
                found += [line for line in text.splitlines() if ERROR_LINE.search(line)]
        return found

    def stderr_tail(self, chars: int = 6000) -> str:
        try:
            text = self.stderr_path.read_text(errors="replace")
        except FileNotFoundError:
            return "(no stderr file)"
        return f"--- backend stderr ({self.stderr_path}) ---\n{text[-chars:]}"


@contextmanager
def running(*made: Backend) -> Iterator[tuple[Backend, ...]]:
    """Starts the backends and yields them; then kills each (a stopped one too) and fails
    if any logged an error."""
    try:
        for backend in made:
            backend.start()
        yield made
    finally:
        errors: list[str] = []
        for backend in made:
            backend.close()
            print(backend.stderr_tail(3000))
            errors += backend.logged_errors()
        assert not errors, "a backend logged errors:\n" + "\n".join(errors[:20])


def _only_child(pid: int) -> int:
    deadline = time.monotonic() + 10
    while True:
        children = [int(c) for task in Path(f"/proc/{pid}/task").iterdir()
                    for c in (task / "children").read_text().split()]
        if children:
            assert len(children) == 1, f"process {pid} has children {children}"
            return children[0]
        assert time.monotonic() < deadline, f"process {pid} has no child"
        time.sleep(0.05)


def pg_placeholders(sql: str) -> str:
    """SQLite's ``?`` placeholders as psycopg's ``%s`` (a literal ``%`` doubled).  The tests'
    statements have no ``?`` inside string literals, which this does not look for."""
    return sql.replace("%", "%%").replace("?", "%s")


def _pump(proc: subprocess.Popen[bytes], lines: queue.Queue[str | None]) -> None:
    assert proc.stdout is not None
    for raw in proc.stdout:
        lines.put(raw.decode(errors="replace").rstrip("\r\n"))
    lines.put(None)


def _collect(lines: queue.Queue[str | None], into: list[str]) -> None:
    while (line := lines.get()) is not None:
        into.append(line)


class Stores:
    """The store a test's backends use: ``new()`` gives a fresh store for one more backend
    (None: SQLite in its data dir; or the URL of a new, empty PostgreSQL database, from the
    server ``server()`` returns).  ``drop_all()`` drops the databases at the end of the test."""

    def __init__(self, kind: str, server: Callable[[], PgServer]) -> None:
        self.kind = kind
        self._server = server
        self._databases: list[tuple[PgServer, str]] = []

    def new(self) -> str | None:
        if self.kind == "sqlite":
            return None
        server = self._server()
        name = server.create_database()
        self._databases.append((server, name))
        return server.dsn(name)

    def drop_all(self) -> None:
        for server, name in self._databases:
            server.drop_database(name)
        self._databases.clear()


BackendFactory = Callable[..., Backend]  # the `backend_factory` fixture: make(base_url, extra_config, start)
