"""A database the backend cannot use: exit 2 with one line naming the file, never a new empty one.

Each case starts the real backend on a folder whose state.db is garbage, cut short, emptied,
too new, or missing beside its write-ahead log.  The process must exit by itself (a hang is
the failure: the subprocess timeout), print one line and no traceback, log the same line,
leave the file as it was and release the folder's lock, so that once the file is moved
aside the next start works and is not told a backend "is already running".
"""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.fakes.openai_server import FakeOpenAI

from .backend_proc import REPO, Backend
from .wire import assert_backend_healthy

EXIT_TIMEOUT_S = 20  # generous: the refusal takes well under a second; only a hang exceeds it
FRESH = "move it aside to start fresh, or restore a backup"

pytestmark = pytest.mark.sqlite_only("damaged, cut short, newer or orphaned state.db files")


@pytest.fixture(scope="module")
def real_db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[bytes]:
    """The bytes of a database a real backend created and closed cleanly."""
    fake = FakeOpenAI()
    backend = Backend(tmp_path_factory.mktemp("real"), fake.base_url)
    try:
        backend.start()
        assert backend.terminate() == 0
        yield (backend.data_dir / "state.db").read_bytes()
    finally:
        backend.close()
        fake.close()


def refused(backend: Backend) -> subprocess.CompletedProcess[str]:
    """Runs the backend on its folder; it must exit on its own, without a READY line."""
    try:
        done = subprocess.run(backend.command(), cwd=REPO, env=backend.env(), text=True,
                              stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=EXIT_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"the backend did not exit within {EXIT_TIMEOUT_S} s: {exc.stderr!r}")
    assert "TURNKEY_BACKEND_READY" not in done.stdout, done.stdout
    return done


def assert_one_line(done: subprocess.CompletedProcess[str], *words: str) -> str:
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    [line] = lines
    assert line.startswith("turnkey-backend: "), line
    for word in words:
        assert word in line, (word, line)
    return line.removeprefix("turnkey-backend: ")


def assert_logged(backend: Backend, message: str) -> None:
    log = (backend.data_dir / "logs" / "backend.log").read_text()
    assert f"not starting: {message}" in log, log
    assert "Traceback" not in log, log


def write_garbage(db: Path, real: bytes) -> None:
    db.write_bytes(bytes(range(256)) * 40)


def write_truncated(db: Path, real: bytes) -> None:
    assert len(real) > 4096, "a real database is more than its first page"
    db.write_bytes(real[:4096])


def write_empty(db: Path, real: bytes) -> None:
    db.write_bytes(b"")


CASES: dict[str, tuple[Callable[[Path, bytes], None], str]] = {
    "garbage": (write_garbage, "is not a SQLite database (file is not a database)"),
    "truncated": (write_truncated, "is damaged (database disk image is malformed)"),
    "empty": (write_empty, "is empty (0 bytes)"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_an_unusable_database_is_refused_and_left_as_it_was(
    case: str, tmp_path: Path, fake_provider: FakeOpenAI, real_db: bytes
) -> None:
    write, reason = CASES[case]
    backend = Backend(tmp_path / "data", fake_provider.base_url)
    db = backend.data_dir / "state.db"
    write(db, real_db)
    before = db.read_bytes()

    message = assert_one_line(refused(backend), f"{db} {reason}", FRESH)
    assert_logged(backend, message)
    assert db.read_bytes() == before, "the file is never replaced or repaired"
    assert not db.with_name("state.db-wal").exists()

    again = refused(backend)  # the first one left no lock behind and changed nothing
    assert assert_one_line(again) == message, "no 'already running' on the second try"

    db.rename(tmp_path / "state.db.aside")
    try:
        backend.start()  # the person's way out: a fresh database in its place
        assert db.stat().st_size > 0
    finally:
        backend.close()


async def test_moved_aside_the_next_start_is_fresh_and_works(
    tmp_path: Path, fake_provider: FakeOpenAI
) -> None:
    backend = Backend(tmp_path / "data", fake_provider.base_url)
    db = backend.data_dir / "state.db"
    db.write_bytes(b"")
    assert_one_line(refused(backend), str(db))
    db.rename(tmp_path / "state.db.aside")
    backend.start()
    try:
        await assert_backend_healthy(backend, fake_provider)
        assert not list(backend.data_dir.glob("state.db.new*")), "built aside, then moved in"
    finally:
        backend.close()


def test_a_newer_database_is_refused_in_one_line(
    tmp_path: Path, fake_provider: FakeOpenAI, real_db: bytes
) -> None:
    backend = Backend(tmp_path / "data", fake_provider.base_url)
    db = backend.data_dir / "state.db"
    db.write_bytes(real_db)
    with sqlite3.connect(db) as conn:
        conn.execute("INSERT INTO schema_migrations VALUES (999, 'the future')")
    conn.close()

    message = assert_one_line(refused(backend), f"{db} has schema version 999", "newer Turnkey")
    assert_logged(backend, message)
    with sqlite3.connect(db) as conn:
        versions = [r[0] for r in conn.execute("SELECT MAX(version) FROM schema_migrations")]
    conn.close()
    assert versions == [999], "nothing was migrated down"


def test_a_write_ahead_log_without_its_database_is_refused(
    tmp_path: Path, fake_provider: FakeOpenAI, real_db: bytes
) -> None:
    """A new database beside an old log would have the old log replayed into it."""
    backend = Backend(tmp_path / "data", fake_provider.base_url)
    wal = backend.data_dir / "state.db-wal"
    wal.write_bytes(real_db[:8192])

    message = assert_one_line(refused(backend), str(backend.data_dir / "state.db"), "state.db-wal")
    assert_logged(backend, message)
    assert not (backend.data_dir / "state.db").exists(), "no database was created beside it"

    shutil.move(wal, tmp_path / "state.db-wal.aside")
    backend.start()
    backend.close()
