"""`turnkey` with no arguments: the desktop app, decided before Qt loads.

A later launch on a folder whose app already runs hands its request over and exits without
importing Qt (desktop/instance.py); a first launch with no backend running starts one at
once, so the backend's start-up overlaps the app's imports; then the Qt application runs
(desktop/qt/application.py).  What a later launch asks the running app for is `serve`.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from desktop import instance, startup_trace
from shared.launcher import running, spawn, start_backend_sync

if TYPE_CHECKING:
    from desktop.qt.controller import Controller
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
    spawned: subprocess.Popen[bytes] | None = None
    if not smoke:
        # Before Qt loads: a second launch is done in a tenth of a second.
        lock = instance.claim(data_dir)
        if lock is None and remote is not None:
            # The running app keeps its backend; handing the string over would move it silently.
            print(f"turnkey: Turnkey already runs on {data_dir}; connect it to {remote.host} with "
                  "File ▸ Connect to a remote backend…", file=sys.stderr)
            return 1
        if lock is None:
            return hand_over(data_dir, session_id)
        if remote is None and running(data_dir) is None:
            spawned = spawn(data_dir)  # it starts while Qt and the windows load (2 cores)
    from shared import logs  # (not before a later launch has handed over: it loads asyncio)

    logs.setup(data_dir, logging.INFO, name="desktop")
    from desktop.qt.application import application, run_app

    return run_app(application(), data_dir, lock, restore=restore, smoke=smoke,
                   session_id=session_id, remote=remote, started=started, spawned=spawned)


def run_in_background(data_dir: Path, display: bool, remote: RemoteTarget | None) -> int:
    """`turnkey --background`: the app with no window, in the system tray, when there is one;
    without a tray (or a display) the backend alone, started when none runs, and 0 at once.
    When the app already runs on `data_dir` nothing changes (a login does not raise it)."""
    lock = instance.claim(data_dir)
    if lock is None:
        return 0
    from shared import logs

    logs.setup(data_dir, logging.INFO, name="desktop")
    if display:
        from desktop.qt.application import run_in_tray

        done = run_in_tray(data_dir, lock, remote)
        if done is not None:
            return done
    lock.release()  # no tray: the next launch is the app, with its window
    if remote is not None:
        return 0  # that backend runs on its own computer
    info = running(data_dir) or start_backend_sync(data_dir)
    logging.getLogger("desktop").info("started in the background without a tray: the backend "
                                      "alone (pid %d)", info.pid)
    return 0


def hand_over(data_dir: Path, session_id: str) -> int:
    """A later launch: asks the app running on `data_dir` to show itself (and open
    `session_id`); 0 when it answered."""
    request = instance.Request("open", session_id) if session_id else instance.Request()
    endpoint = instance.endpoint_of(data_dir)
    reply = instance.hand_over(endpoint, request)
    if reply is not None and reply.get("ok"):
        startup_trace.mark("handed_over")
        return 0
    why = reply.get("error") if reply else instance.not_ours(endpoint) or "it did not answer"
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


