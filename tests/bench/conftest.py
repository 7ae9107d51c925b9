"""Fixtures for the benchmarks: a fake provider and real backend processes on tmp_path.

The backend process helper is the integration suite's (imported, not copied); the data dir
lives under ``tmp_path`` so the backend's SQLite file and the raw baselines share one disk.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from pathlib import Path

import pytest

from tests.integration.backend_proc import Backend

StartBackend = Callable[[str], Backend]


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Remembers whether the test body failed, so teardown shows the backend's stderr only then."""
    report = yield
    if report.when == "call":
        item.stash[_FAILED] = report.failed
    return report


_FAILED = pytest.StashKey[bool]()


@pytest.fixture
def start_backend(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[StartBackend]:
    """``start(base_url)``: a started backend on its own data dir under ``tmp_path``."""
    made: list[Backend] = []

    def start(base_url: str) -> Backend:
        backend = Backend(tmp_path / f"data{len(made)}", base_url)
        made.append(backend)
        backend.start()
        return backend

    yield start
    for backend in made:
        backend.close()
        if request.node.stash.get(_FAILED, True):
            print(backend.stderr_tail())
