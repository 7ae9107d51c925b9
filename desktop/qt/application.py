"""The desktop app's Qt application on a qasync loop: the main window, the event loop until Quit,
the tray-only start and the smoke check.  What is decided before Qt loads (a later launch
handing over, the backend started early) is desktop/app.py's, which calls `run_app`."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import qasync
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication, QSystemTrayIcon  # PySide6 before qasync: it picks the binding

from desktop import startup_trace
from desktop.app import serve
from desktop.instance import FolderLock
from desktop.qt import theme
from desktop.qt.aio import spawn
from desktop.qt.controller import Controller
from desktop.qt.instance import InstanceServer
from desktop.qt.tray import window_icon
from shared.client import BackendInfo
from shared.launcher import running, stop_backend
from shared.remote import RemoteTarget

log = logging.getLogger("desktop")


def run_in_tray(data_dir: Path, lock: FolderLock, remote: RemoteTarget | None) -> int | None:
    """`turnkey --background` with a display: the app with no window, in the system tray; None
    (nothing done) when there is no tray."""
    app = application()
    if not QSystemTrayIcon.isSystemTrayAvailable():
        return None
    return run_app(app, data_dir, lock, remote=remote, hidden=True)


def application() -> QApplication:
    app = QApplication.instance() or QApplication(sys.argv[:1])
    assert isinstance(app, QApplication)
    app.setApplicationName("Turnkey")
    app.setApplicationDisplayName("Turnkey")
    app.setDesktopFileName("turnkey")
    app.setWindowIcon(window_icon())
    theme.apply(app)
    startup_trace.mark("qapplication")
    return app


def run_app(app: QApplication, data_dir: Path, lock: FolderLock | None, *,
            restore: bool = True, smoke: bool = False, session_id: str = "",
            remote: RemoteTarget | None = None, started: float | None = None,
            hidden: bool = False, spawned: subprocess.Popen[bytes] | None = None) -> int:
    """The app's event loop until Quit (see desktop/app.py's `run`); `hidden`: no window until
    asked for; `spawned`: the backend this launch started before loading Qt (the link waits
    for its READY line)."""
    started = time.monotonic() if started is None else started
    server = InstanceServer(lock) if lock is not None else None
    if server is not None:
        try:
            server.listen()
        except OSError as exc:  # the app runs all the same; a later launch says it could not reach it
            log.warning("later launches cannot hand over to this app: %s", exc)

    report: dict[str, Any] = {}

    async def main() -> None:
        controller = Controller(data_dir, remote=remote)
        controller.link.spawned = spawned
        if server is not None:
            server.requested.connect(lambda request: serve(controller, request))
        if session_id:
            controller.ready.connect(lambda: controller.open_target(session_id))
        if smoke:
            controller.keep_layout = False
            controller.ready.connect(lambda: spawn(_smoke_check(controller, started, report)))
            controller.link.failed.connect(lambda message: _smoke_failed(controller, message, report))
            QTimer.singleShot(int(SMOKE_TIMEOUT_S * 1000),
                              lambda: _smoke_failed(controller, "timed out", report))
        done = asyncio.get_running_loop().create_future()

        def finish() -> None:
            if not done.done():
                done.set_result(None)

        # Quit ends the app by ending this coroutine, after it has closed the windows and the
        # connection; Qt's own quit (a logout) ends it too.
        controller.exit_app = finish
        app.aboutToQuit.connect(finish)
        # Closing the last window leaves the app in the background when notifications still
        # reach the person, else quits (Controller.last_window_closed; the backend goes on
        # either way).  Qt's own quit-on-last-window would stop the loop before Quit's clean-up ran.
        app.setQuitOnLastWindowClosed(False)
        app.lastWindowClosed.connect(controller.last_window_closed)
        signal.signal(signal.SIGINT, lambda *_: controller.quit())
        controller.start(restore and not smoke, hidden=hidden)
        await done
        # Work still in flight (a reload, the link's reader) ends here, not in a stopped loop.
        rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in rest:
            task.cancel()
        await asyncio.gather(*rest, return_exceptions=True)

    before = running(data_dir)
    backend_before = before.pid if before is not None else None
    try:
        qasync.run(main())
    except asyncio.CancelledError:
        pass
    finally:
        if server is not None:
            server.close()
    if not smoke:
        return 0
    return _smoke_finish(data_dir, backend_before, report)


SMOKE_TIMEOUT_S = 60.0


async def _smoke_check(controller: Controller, started: float, report: dict[str, Any]) -> None:
    """Connected: note what a packager wants to know, then quit."""
    info = BackendInfo.read(controller.data_dir)
    report.update(
        window=controller.main.isVisible(),
        connected=controller.link.current == "connected",
        connected_s=round(time.monotonic() - started, 3),  # since run() began
        connected_after_exec_s=_process_age_s(),  # since the process began (imports included)
        protocol=controller.link.server.protocol if controller.link.server else None,
        backend_pid=info.pid if info else None,
        backend_executable=_executable(info.pid) if info else None,
        executable=sys.executable,
        frozen=bool(getattr(sys, "frozen", False)),
    )
    controller.quit()


def _smoke_failed(controller: Controller, message: str, report: dict[str, Any]) -> None:
    if "connected" not in report:
        report["error"] = message
        controller.quit()


def _smoke_finish(data_dir: Path, backend_before: int | None, report: dict[str, Any]) -> int:
    """Prints the report; a backend this run started is stopped (one already running stays)."""
    pid = report.get("backend_pid")
    report["started_backend"] = pid is not None and pid != backend_before
    if report["started_backend"]:
        info = running(data_dir)
        if info is not None and info.pid == pid:
            report["backend_stopped"] = stop_backend(info)
    report["closed"] = True
    print(json.dumps(report), flush=True)
    ok = report.get("window") and report.get("connected") and report.get("backend_stopped", True)
    return 0 if ok else 1


def _process_age_s() -> float | None:
    """Seconds since this process started (Linux's /proc, 10 ms resolution; None elsewhere)."""
    try:
        with open("/proc/self/stat") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return round(uptime - start_ticks / os.sysconf("SC_CLK_TCK"), 3)


def _executable(pid: int) -> str | None:
    """The program a process runs (Linux's /proc; None elsewhere)."""
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return None
