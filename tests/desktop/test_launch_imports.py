"""What a launch loads before its first frame: the real app (`python -m desktop.cli`'s `main`)
on a data folder whose saved layout shows a session with code in it, its backend running.

The modules the app has loaded when the saved session's transcript is first painted (the
`transcript_painted` milestone of desktop/startup_trace.py) must not include the heavy ones
the first frame does not need: Pygments (code is coloured right after that frame), python-socks
(our client never uses a proxy), the D-Bus notifications (jeepney, started after the first
frame), and the windows nobody has opened (settings, schedules, the fleet view).  Both Pygments
and jeepney must come in right after, or the test proves nothing: the code was on screen and
the notifications start.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.app_launch import ROOT, app_env, seeded_folder

MESSAGES = 60  # the newest page has answers with fenced code (tests/desktop/seed.py)
TIMEOUT_S = 120
NOT_IN_FIRST_FRAME = ("pygments", "python_socks", "jeepney", "desktop.qt.notify",
                      "desktop.qt.settings", "desktop.qt.schedules", "desktop.qt.fleet")
COME_RIGHT_AFTER = ("pygments.lexers.python", "jeepney")

# Runs the app; prints the modules loaded at the transcript's first frame, then, once the
# code's colours and the notifications have come up, "after".
PROBE = """
import json, sys
from desktop import startup_trace

traced = startup_trace.mark
AFTER = {after!r}

def mark(name):
    traced(name)
    if name == "transcript_painted":
        print(json.dumps(sorted(sys.modules)), flush=True)
        from PySide6.QtCore import QTimer
        timer = QTimer()
        timer.timeout.connect(lambda: all(m in sys.modules for m in AFTER)
                              and print("after", flush=True))
        timer.start(50)
        startup_trace._watches.append(timer)

startup_trace.mark = mark
from desktop.cli import main
sys.exit(main(["--data-dir", {data_dir!r}, "app"]))
"""


@pytest.fixture
def seeded(tmp_path: Path) -> Iterator[Path]:
    """A data folder whose saved layout shows a seeded session beside the sidebar; its backend
    running."""
    backend = seeded_folder(tmp_path / "home", MESSAGES)
    try:
        yield backend.data_dir
    finally:
        backend.close()


def test_the_first_frame_loads_no_heavy_module_it_does_not_show(seeded: Path, tmp_path: Path) -> None:
    env = {**app_env(), "TURNKEY_STARTUP_TRACE": str(tmp_path / "trace.jsonl")}
    probe = PROBE.format(after=COME_RIGHT_AFTER, data_dir=str(seeded))
    app = subprocess.Popen([sys.executable, "-c", probe], cwd=ROOT, env=env, text=True,
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert app.stdout is not None
        first = app.stdout.readline()  # (blocks until the frame; the timeout guards a hang)
        assert first, app.stderr.read() if app.stderr else ""
        loaded = json.loads(first)
        assert "desktop.qt.transcript_view" in loaded
        heavy = sorted(m for m in loaded if m.split(".")[0] in NOT_IN_FIRST_FRAME
                       or m in NOT_IN_FIRST_FRAME)
        assert heavy == []
        assert app.stdout.readline().strip() == "after"
    finally:
        app.send_signal(signal.SIGINT)  # quits as Ctrl+C does
        try:
            app.wait(TIMEOUT_S)
        except subprocess.TimeoutExpired:
            app.kill()
            app.wait()
