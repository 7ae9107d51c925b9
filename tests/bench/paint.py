"""Paint stamps for the desktop benchmarks: when a widget first painted what a bench waits for.

A module of its own (not a test module) so both benches import it, whether pytest collects
them in this process or test_desktop_paint.py's child run under Xvfb does.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from PySide6.QtCore import QEvent, QObject, QTimer
from PySide6.QtWidgets import QWidget


class PaintWatch(QObject):
    """Stamps the first Paint of `widget` for which `ready()` holds, and the moment after it."""

    def __init__(self, widget: QWidget, ready: Callable[[], bool]) -> None:
        super().__init__()
        self.widget = widget
        self.ready = ready
        self.painted: float | None = None  # the Paint event arrived
        self.done: float | None = None  # the loop was free again: that frame is painted
        widget.installEventFilter(self)

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.Paint and self.painted is None and self.ready():
            self.painted = time.perf_counter()
            QTimer.singleShot(0, self._after)
        return False

    def _after(self) -> None:
        self.done = time.perf_counter()
        self.widget.removeEventFilter(self)
