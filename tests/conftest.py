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


@pytest.fixture
def fake_provider() -> Iterator[FakeOpenAI]:
    """The scripted fake model server (real HTTP on loopback); fails the test on bad requests."""
    fake = FakeOpenAI()
    yield fake
    fake.close()
    assert fake.errors == [], f"the fake provider saw bad requests: {fake.errors}"


BUNDLE_BUILD_TIMEOUT_S = 600


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
