"""Test-wide set-up: the repository root is importable, and no test touches the real user's data."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # `tests.fakes` imports whatever rootdir/import mode pytest uses

from tests.fakes.openai_server import FakeOpenAI  # noqa: E402  (needs the path above)


@pytest.fixture(autouse=True, scope="session")
def _isolated_turnkey_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """TURNKEY_HOME points at a throwaway folder, so nothing falls back to the user's data dir."""
    old = os.environ.get("TURNKEY_HOME")
    os.environ["TURNKEY_HOME"] = str(tmp_path_factory.mktemp("turnkey-home"))
    yield
    if old is None:
        os.environ.pop("TURNKEY_HOME", None)
    else:
        os.environ["TURNKEY_HOME"] = old


# --- tests that run alone -------------------------------------------------------------------
# scripts/test runs the suite in two passes: `-n N -m "not serial"` on several workers, then
# `-m serial` in one process.  A serial test would be wrong beside another one: a benchmark's
# numbers would measure its neighbours, and test_deb.py installs into the real system and takes
# bubblewrap away meanwhile.
BENCH_DIR = ROOT / "tests" / "bench"
RUNS_ALONE = "runs alone, not beside other workers: run it without -n (scripts/test's serial pass)"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "serial(reason): runs alone, never beside another test (scripts/test's second pass)")


@pytest.hookimpl(tryfirst=True)  # before `-m` selects on the marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if BENCH_DIR in item.path.parents:
            item.add_marker(pytest.mark.serial("a benchmark: its numbers are only its own alone"))
    if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1:
        for item in items:
            if item.get_closest_marker("serial") is not None:
                item.add_marker(pytest.mark.skip(reason=RUNS_ALONE))


@pytest.fixture
def fake_provider() -> Iterator[FakeOpenAI]:
    """The scripted fake model server (real HTTP on loopback); fails the test on bad requests."""
    fake = FakeOpenAI()
    yield fake
    fake.close()
    assert fake.errors == [], f"the fake provider saw bad requests: {fake.errors}"


BUNDLE_BUILD_TIMEOUT_S = 600
# For a test that may be the first to ask for `bundle`: its build counts against that test's
# time, and pytest-timeout's default (120 s) is less than the build may take on a busy machine.
BUNDLE_TEST_TIMEOUT = pytest.mark.timeout(BUNDLE_BUILD_TIMEOUT_S + 300)


@pytest.fixture(scope="session")
def bundle() -> Path:
    """The installable app, built by packaging/build once per test run: dist/turnkey/turnkey."""
    start = time.monotonic()
    built = subprocess.run([str(ROOT / "packaging" / "build")], cwd=ROOT, capture_output=True,
                           text=True, timeout=BUNDLE_BUILD_TIMEOUT_S)
    assert built.returncode == 0, f"packaging/build failed:\n{built.stdout}\n{built.stderr[-6000:]}"
    print(f"\nbundle: {built.stdout.strip().splitlines()[-1]} "
          f"(the whole command: {time.monotonic() - start:.1f} s)")
    executable = ROOT / "dist" / "turnkey" / "turnkey"
    assert os.access(executable, os.X_OK), f"{executable} was not built"
    return executable


# --- ending the test process ---------------------------------------------------------------
# After a desktop test has quoted a message into the composer and the clipboard holds text,
# the interpreter's teardown of Qt (offscreen platform) dies with SIGSEGV once every test has
# passed and the summary is printed: no Python frame, and not under gdb (timing).  The app
# itself, on the xcb platform people run, quits with 0 after the same steps (checked under
# Xvfb).  Until that teardown is understood, a run that used Qt ends without it: the exit
# status is pytest's own.  (A crash *during* a test still fails it as before.)
_exit_status: list[int] = []


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _exit_status.append(int(exitstatus))


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    qt = sys.modules.get("PySide6.QtWidgets")
    if qt is None or qt.QApplication.instance() is None or not _exit_status:
        return
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(_exit_status[-1])
