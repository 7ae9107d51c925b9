"""`turnkey` with no arguments: the desktop app on a qasync loop."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import qasync
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication, QSystemTrayIcon  # PySide6 before qasync: it picks the binding

from desktop import startup_trace
from desktop.qt import instance, theme
from desktop.qt.aio import spawn
from desktop.qt.controller import Controller
from desktop.qt.tray import window_icon
from shared import logs
from shared.client import BackendInfo
from shared.launcher import running, start_backend_sync, stop_backend
from shared.remote import RemoteTarget


def run(data_dir: Path, restore: bool = True, smoke: bool = False, session_id: str = "",
        remote: RemoteTarget | None = None, background: bool = False) -> int:
    """Runs the app until Quit; `session_id` also opens that session's window.

    When the app already runs on `data_dir` (for this user), it is raised instead (and opens
    `session_id`), and this returns 0 at once.  `smoke`: opens the main window, connects (starting
    the backend if none runs), closes, prints what happened as one JSON line, and stops a
    backend it started; exit status 0 when the window showed and the connection was made.
    A smoke run neither hands over nor takes the folder: it checks that this build opens a
    window of its own, and a real launch meanwhile must not be handed to it.  `remote`: use
    that backend (on another computer) instead of the folder's, for this run.  `background`
    (`turnkey --background`, the login entry's): see `run_in_background`."""
    started = time.monotonic()
    display = bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
                   or os.environ.get("QT_QPA_PLATFORM"))
    if background and not smoke:
        return run_in_background(data_dir, display, remote)
    if sys.platform.startswith("linux") and not display:
        # Qt would abort with a misleading message about xcb libraries.
        print("turnkey: no display to open a window on (DISPLAY is not set). Use `turnkey chat` "
              "for the terminal, or run the app from a desktop session.", file=sys.stderr)
        return 2
    lock = None
    if not smoke:
        # Before Qt's application and the windows: a second launch is done in well under a second.
        lock = instance.claim(data_dir)
        if lock is None and remote is not None:
            # The running app keeps its backend; handing the string over would move it silently.
            print(f"turnkey: Turnkey already runs on {data_dir}; connect it to {remote.host} with "
                  "File ▸ Connect to a remote backend…", file=sys.stderr)
            return 1
        if lock is None:
            return hand_over(data_dir, session_id)
    logs.setup(data_dir, logging.INFO, name="desktop")
    return _run_app(_application(), data_dir, lock, restore=restore, smoke=smoke,
                    session_id=session_id, remote=remote, started=started)


def run_in_background(data_dir: Path, display: bool, remote: RemoteTarget | None) -> int:
    """`turnkey --background`: the app with no window, in the system tray, when there is one;
    without a tray (or a display) the backend alone, started when none runs, and 0 at once.
    When the app already runs on `data_dir` nothing changes (a login does not raise it)."""
    lock = instance.claim(data_dir)
    if lock is None:
        return 0
    logs.setup(data_dir, logging.INFO, name="desktop")
    app = _application() if display else None
    if app is None or not QSystemTrayIcon.isSystemTrayAvailable():
        lock.release()  # the next launch is the app, with its window
        if remote is not None:
            return 0  # that backend runs on its own computer
        info = running(data_dir) or start_backend_sync(data_dir)
        logging.getLogger("desktop").info("started in the background without a tray: the "
                                          "backend alone (pid %d)", info.pid)
        return 0
    return _run_app(app, data_dir, lock, remote=remote, hidden=True)


def _application() -> QApplication:
    app = QApplication.instance() or QApplication(sys.argv[:1])
    assert isinstance(app, QApplication)
    app.setApplicationName("Turnkey")
    app.setApplicationDisplayName("Turnkey")
    app.setDesktopFileName("turnkey")
    app.setWindowIcon(window_icon())
    theme.apply(app)
    startup_trace.mark("qapplication")
    return app


def _run_app(app: QApplication, data_dir: Path, lock: instance.FolderLock | None, *,
             restore: bool = True, smoke: bool = False, session_id: str = "",
             remote: RemoteTarget | None = None, started: float | None = None,
             hidden: bool = False) -> int:
    """The app's event loop until Quit (see `run`); `hidden`: no window until asked for."""
    started = time.monotonic() if started is None else started
    server = instance.InstanceServer(lock) if lock is not None else None
    if server is not None:
        server.listen()

    report: dict[str, Any] = {}

    async def main() -> None:
        controller = Controller(data_dir, remote=remote)
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


def hand_over(data_dir: Path, session_id: str) -> int:
    """A later launch: asks the app running on `data_dir` to show itself (and open
    `session_id`); 0 when it answered."""
    request = instance.Request("open", session_id) if session_id else instance.Request()
    reply = instance.hand_over(instance.server_name(data_dir), request)
    if reply is not None and reply.get("ok"):
        startup_trace.mark("handed_over")
        return 0
    why = reply.get("error") if reply else "it did not answer"
    print(f"turnkey: Turnkey already runs on {data_dir} but {why}. If it hangs, end it and start "
          "again.", file=sys.stderr)
    return 1


def serve(controller: Controller, request: instance.Request) -> None:
    """What a later launch asked for: the main window brought forward, or a session's window."""
    if request.action == "open":
        controller.open_target(request.session_id)
    else:
        controller.show_main()
    startup_trace.mark("raised")


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
