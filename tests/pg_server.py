"""A throwaway PostgreSQL server for the test run: initdb into a temp folder, start, hand out databases.

CI runs as root, and PostgreSQL refuses to run as root, so then initdb and postgres run as the
unprivileged ``postgres`` system user that Debian's package creates (the temp folder is made
theirs).  The server listens on 127.0.0.1 on a free port and on a private unix-socket folder,
trusts every local connection (a test cluster nobody else can reach), and runs with fsync off:
the tests kill our backend, never this server, so nothing depends on PostgreSQL's own
durability here.  Each test gets a fresh, empty database (``CREATE DATABASE ... TEMPLATE
template0``), so the backend migrates from nothing exactly as on a new installation.
"""

from __future__ import annotations

import ctypes
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

SUPERUSER = "turnkey"  # the cluster's superuser, whatever OS user runs it
RUN_AS_WHEN_ROOT = "postgres"  # the system user Debian's postgresql package creates
DEBIAN_LIB = Path("/usr/lib/postgresql")  # VERSION/bin: Debian keeps the server binaries off PATH
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 30.0
BIND_ATTEMPTS = 5  # a free port can be taken by someone else between our probe and postgres's bind
MISSING = (
    "PostgreSQL's server binaries (initdb, postgres) were not found in {where} or on PATH; "
    "the tests run every backend test against PostgreSQL too. Run `scripts/bootstrap dev` "
    "(as root it installs Debian's `postgresql` package), or install it yourself: "
    "`sudo apt-get install postgresql`."
)
PR_SET_PDEATHSIG = 1


class PgServerError(AssertionError):
    """The test server could not be set up; the message says why and carries the server log."""


def find_bin_dir(lib: Path = DEBIAN_LIB, path: str | None = None) -> Path:
    """The folder holding initdb and postgres: the newest of Debian's versions under ``lib``,
    else the one on ``path`` (default $PATH).  Raises PgServerError saying how to install."""
    candidates = sorted(lib.glob("*/bin"), key=_version_key, reverse=True)
    for folder in candidates:
        if (folder / "initdb").is_file() and (folder / "postgres").is_file():
            return folder
    initdb, postgres = shutil.which("initdb", path=path), shutil.which("postgres", path=path)
    if initdb and postgres and Path(initdb).parent == Path(postgres).parent:
        return Path(initdb).parent
    raise PgServerError(MISSING.format(where=f"{lib}/*/bin"))


def _version_key(folder: Path) -> tuple[int, ...]:
    """/usr/lib/postgresql/15/bin -> (15,): sort numerically, not as text (9 < 15)."""
    name = folder.parent.name
    return tuple(int(part) for part in name.split(".") if part.isdigit())


def free_port() -> int:
    """A port nobody listens on right now (bind-then-close; postgres may still lose a race)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _parent_death_signal() -> Callable[[], None] | None:
    """A function for the child to run before exec: if the test process dies (even by
    SIGKILL), the postmaster gets SIGINT, PostgreSQL's fast shutdown, so no server outlives
    its test run.  The child runs it after switching to the unprivileged user (a change of
    user clears the setting).  prctl is looked up here, in the parent: the child may only
    call it.  Linux ties the signal to the *thread* that forks, so it is set only from the
    main thread (a worker thread's end would stop the server mid-run)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl

    def set_it() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGINT, 0, 0, 0)

    return set_it


class PgServer:
    """One PostgreSQL cluster in its own temp folder, started and stopped by the test run."""

    def __init__(self) -> None:
        self.bin_dir = find_bin_dir()
        self.user = RUN_AS_WHEN_ROOT if os.geteuid() == 0 else None
        self.root = Path(tempfile.mkdtemp(prefix="turnkey-pg-"))
        self.data = self.root / "data"
        self.sockets = self.root / "sock"
        self.log_path = self.root / "server.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0
        self._made = 0
        self._prepare_root()

    def _prepare_root(self) -> None:
        """The temp folder belongs to whoever runs postgres; /tmp itself is world-traversable."""
        self.sockets.mkdir(mode=0o700)
        self.log_path.touch()
        if self.user is not None:
            try:
                entry = pwd.getpwnam(self.user)
            except KeyError:
                shutil.rmtree(self.root, ignore_errors=True)
                raise PgServerError(
                    f"the tests run as root, and PostgreSQL refuses to; they run it as the "
                    f"'{self.user}' system user, which does not exist. Run `scripts/bootstrap dev` "
                    f"(it installs Debian's postgresql package, which creates that user)."
                ) from None
            for path in (self.root, self.sockets, self.log_path):
                os.chown(path, entry.pw_uid, entry.pw_gid)

    # --- starting and stopping ----------------------------------------------------------------

    def start(self) -> None:
        """initdb, then postgres on a free port; returns once it accepts connections."""
        self._run([
            str(self.bin_dir / "initdb"), "-D", str(self.data), "-U", SUPERUSER, "--auth=trust",
            "--encoding=UTF8", "--locale=C", "--no-sync",
        ])
        for _attempt in range(BIND_ATTEMPTS):
            self.port = free_port()
            self._spawn()
            if self._wait_ready():
                return
            if "could not bind" not in self.log_tail():
                break
        self.stop()
        raise PgServerError(f"PostgreSQL did not start\n{self.log_tail()}")

    def _run(self, argv: list[str]) -> None:
        done = subprocess.run(argv, user=self.user, cwd=self.root, capture_output=True, text=True,
                              timeout=120, check=False)
        if done.returncode != 0:
            raise PgServerError(f"{' '.join(argv)} failed ({done.returncode}):\n"
                                f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")

    def _spawn(self) -> None:
        settings = {
            "listen_addresses": "127.0.0.1",
            "port": str(self.port),
            "unix_socket_directories": str(self.sockets),
            "fsync": "off",  # we kill our backend in tests, never this server
            "synchronous_commit": "off",
            "full_page_writes": "off",
            "max_connections": "200",  # several backends, each with a pool, plus the checks
            "shared_buffers": "32MB",
            "log_min_messages": "warning",
        }
        argv = [str(self.bin_dir / "postgres"), "-D", str(self.data)]
        for key, value in settings.items():
            argv += ["-c", f"{key}={value}"]
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                argv, user=self.user, cwd=self.root, stdin=subprocess.DEVNULL, stdout=log,
                stderr=log, preexec_fn=_parent_death_signal(), start_new_session=True,
            )

    def _wait_ready(self) -> bool:
        """Poll a connection until one succeeds (True) or the postmaster exits (False)."""
        assert self.proc is not None
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                with psycopg.connect(self.dsn("postgres"), connect_timeout=2):
                    return True
            except psycopg.OperationalError:
                time.sleep(0.05)
        return False

    def stop(self) -> None:
        """Fast shutdown (SIGINT: clients are disconnected), wait for every server process to go,
        and remove the temp folder.  Idempotent, so it is safe from several clean-up paths."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)  # postgres and its children: one session
                proc.wait(timeout=10)
        shutil.rmtree(self.root, ignore_errors=True)

    def restart(self, down_s: float = 0.0) -> None:
        """Fast shutdown (every client disconnected), `down_s` seconds with no server, then
        the same cluster again on the same port; the data stays."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(timeout=STOP_TIMEOUT_S)
        time.sleep(down_s)
        self._spawn()
        if not self._wait_ready():
            raise PgServerError(f"PostgreSQL did not come back\n{self.log_tail()}")

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, chars: int = 4000) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return "(no server log)"
        return f"--- PostgreSQL log ({self.log_path}) ---\n{text[-chars:]}"

    # --- databases ----------------------------------------------------------------------------

    def dsn(self, dbname: str) -> str:
        """The URL the backend gets in config.toml's ``store`` key."""
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{dbname}"

    def create_database(self) -> str:
        """A new empty database (from template0: nothing the backend did not create itself)."""
        self._made += 1
        name = f"tk_{self._made}"
        self._admin(sql.SQL("CREATE DATABASE {} TEMPLATE template0").format(sql.Identifier(name)))
        return name

    def drop_database(self, name: str) -> None:
        """Drop it even if a killed backend's connections linger (FORCE ends them)."""
        self._admin(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))

    def databases(self) -> list[str]:
        """The test databases that exist now (tk_N), for checks that clean-up happened."""
        with psycopg.connect(self.dsn("postgres"), autocommit=True) as conn:
            rows = conn.execute("SELECT datname FROM pg_database WHERE datname LIKE 'tk\\_%'")
            return sorted(str(row[0]) for row in rows.fetchall())

    def _admin(self, statement: sql.Composed) -> None:
        if not self.running():
            raise PgServerError(f"the PostgreSQL test server is not running\n{self.log_tail()}")
        with psycopg.connect(self.dsn("postgres"), autocommit=True) as conn:
            conn.execute(statement)

    def __enter__(self) -> PgServer:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def server_pids(root: Path) -> list[int]:
    """Pids of postgres processes whose command line names ``root`` (the postmaster's -D does;
    its children are found through their parent), for checks that nothing was left running."""
    found: set[int] = set()
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
        if str(root) in cmdline:
            found.add(int(entry.name))
    return sorted(found | {pid for pid, parent in parents.items() if parent in found})
