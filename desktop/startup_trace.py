"""Start-up milestones for benchmarks, opt-in: `TURNKEY_STARTUP_TRACE=PATH` appends one JSON line
per milestone to PATH, `{"mark": NAME, "t": time.monotonic(), "pid": PID}`.

The clock is CLOCK_MONOTONIC (`time.monotonic`), the same in every process on the machine, so
a parent that stamps its own `exec` reads these against it (tests/bench/test_app_start.py).
A paint milestone is written once per process (the first such frame); the others each time
they are reached.  The milestones:

- `entry`: `desktop.cli.main` began (its module imported, the arguments not yet parsed);
- `handed_over`: a later launch had its answer from the running app (it exits next);
- `raised`: the running app did what a later launch asked (main window shown or raised);
- `qapplication`: the QApplication exists (theme applied);
- `window_painted`: the main window's first frame, painted (the event loop free again);
- `transcript_painted`: the first frame of a conversation's transcript showing rows, painted.

Unset (always, outside a benchmark) every call is a dictionary look-up and nothing more.  This
module imports no Qt: `watch_paint` imports it when asked to watch.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from typing import Any

ENV = "TURNKEY_STARTUP_TRACE"
_path = os.environ.get(ENV) or None
_seen: set[str] = set()
_watches: list[Any] = []  # the paint watches alive (a QObject needs an owner in Python)


def mark(name: str) -> None:
    """Appends milestone `name` with the time now."""
    if _path is None:
        return
    line = json.dumps({"mark": name, "t": time.monotonic(), "pid": os.getpid()})
    with open(_path, "a") as f:  # one write per line: two processes may share the file
        f.write(line + "\n")


def watch_paint(widget: Any, name: str, ready: Callable[[], bool] = lambda: True) -> None:
    """Marks `name` once `widget` has painted a frame while `ready()` held: at its first such
    Paint event, once the event loop is free again (the frame is then on screen)."""
    if _path is None or name in _seen:
        return
    _seen.add(name)
    from PySide6.QtCore import QEvent, QObject, QTimer

    class Watch(QObject):
        def eventFilter(self, _obj: QObject, event: QEvent) -> bool:
            if event.type() == QEvent.Type.Paint and ready():
                widget.removeEventFilter(self)
                QTimer.singleShot(0, self.painted)
            return False

        def painted(self) -> None:
            mark(name)
            _watches.remove(self)

    watch = Watch()
    _watches.append(watch)
    widget.installEventFilter(watch)
