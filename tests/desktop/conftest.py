"""Desktop tests: real widgets offscreen, a qasync loop inside pytest-qt, a real backend process.

The loop runs "already running" on the Qt event loop that pytest-qt spins, so
tests stay synchronous: they drive with `qtbot.waitUntil` and run coroutines
with `drive(qtbot, coro)`.  The model is the fake provider on loopback.
"""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")  # before any QApplication exists
# No desktop notifications on the developer's own desktop, and the in-window fallback the tests
# expect; tests of the D-Bus channel point this at a private bus of their own.
os.environ.pop("DBUS_SESSION_BUS_ADDRESS", None)

import asyncio
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import keyring
import pytest
import qasync
from PySide6.QtWidgets import QApplication

from tests.fakes.memory_keyring import MemoryKeyring
from tests.fakes.openai_server import FakeOpenAI
from tests.integration.backend_proc import Backend

T = TypeVar("T")
_retired_loops: list[asyncio.AbstractEventLoop] = []


@pytest.fixture(autouse=True)
def test_keyring(monkeypatch: pytest.MonkeyPatch) -> Iterator[MemoryKeyring]:
    """Every desktop test keeps what the app stores in the keyring (a remote backend's token)
    in a dict: never in the developer's own keyring."""
    monkeypatch.delenv("TURNKEY_NO_KEYRING", raising=False)
    previous = keyring.get_keyring()
    ring = MemoryKeyring()
    keyring.set_keyring(ring)
    yield ring
    keyring.set_keyring(previous)


@pytest.fixture
def qloop(qapp: QApplication) -> Iterator[asyncio.AbstractEventLoop]:
    loop = qasync.QEventLoop(qapp, already_running=True)
    asyncio.set_event_loop(loop)
    yield loop
    # Let callbacks scheduled by closing windows and connections run before the loop goes.
    for _ in range(20):
        qapp.processEvents()
    # An "already running" qasync loop registers itself as the thread's running loop and is
    # never stopped by anyone else; undo that, or every later asyncio test in this process
    # fails with "cannot be called from a running event loop".
    asyncio.events._set_running_loop(None)
    executor = getattr(loop, "_QEventLoop__default_executor", None)
    if executor is not None:
        executor.shutdown()  # its worker threads
    asyncio.set_event_loop(None)
    # Not closed: Qt may still hold events for its timers and notifiers, and deleting them
    # under Qt's feet crashed later tests.  Kept alive for the rest of the run instead.
    _retired_loops.append(loop)


def drive(qtbot: Any, coro: Coroutine[Any, Any, T], timeout_ms: int = 30_000) -> T:
    """Runs `coro` on the qasync loop while Qt spins; returns its result or raises its error."""
    task = asyncio.ensure_future(coro)
    qtbot.waitUntil(task.done, timeout=timeout_ms)
    return task.result()


@pytest.fixture
def desk_backend(tmp_path: Path, fake_provider: FakeOpenAI) -> Iterator[Backend]:
    """A real backend process on its own data dir, the fake provider as its model."""
    backend = Backend(tmp_path / "data", fake_provider.base_url,
                      extra_env={"TURNKEY_NO_KEYRING": "1"})
    backend.start()
    yield backend
    backend.close()
    print(backend.stderr_tail())
    errors = backend.logged_errors()
    assert not errors, "the backend logged errors:\n" + "\n".join(errors[:20])


@pytest.fixture
def make_controller(qloop: asyncio.AbstractEventLoop, qtbot: Any, desk_backend: Backend) -> Iterator[Any]:
    """``make_controller(restore=False)``: the whole app wired to `desk_backend`, connected."""
    from desktop.qt.aio import settle
    from desktop.qt.controller import Controller

    made: list[Controller] = []

    def make(restore: bool = False) -> Controller:
        ctl = Controller(desk_backend.data_dir, restart_after_s=None)
        ctl.exit_app = lambda: None  # Quit ends the test's app, not pytest-qt's QApplication
        made.append(ctl)
        ctl.start(restore=restore)
        qtbot.waitUntil(lambda: ctl.link.current == "connected", timeout=15_000)
        return ctl

    yield make
    for ctl in made:
        for win in list(ctl.windows):
            win.close()
        for view in ctl.fleet_views.values():
            view.close()  # a Backends view left open would go on asking every 2 s
        ctl.main.close()
        drive(qtbot, settle())
        drive(qtbot, ctl.notifier.stop())
        drive(qtbot, ctl.link.close())


@pytest.fixture
def controller(make_controller: Any) -> Any:
    return make_controller()
