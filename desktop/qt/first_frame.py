"""Work that waits for a window's first frame: what the first frame does not show (the
notifications' D-Bus connection, say) runs once that frame is on screen, not before it."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QEvent, QObject, QTimer
from PySide6.QtWidgets import QWidget

_waiting: list[QObject] = []  # the watches alive (a QObject needs an owner in Python)


class _Watch(QObject):
    def __init__(self, widget: QWidget, then: Callable[[], None]) -> None:
        super().__init__()
        self.widget = widget
        self.then = then

    def eventFilter(self, _obj: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.Paint:
            self.widget.removeEventFilter(self)
            QTimer.singleShot(0, self._painted)  # the frame is on screen once the loop is free
        return False

    def _painted(self) -> None:
        _waiting.remove(self)
        self.then()


def after_paint(widget: QWidget, then: Callable[[], None]) -> None:
    """Calls `then` once `widget` has painted its next frame and the event loop is free again."""
    watch = _Watch(widget, then)
    _waiting.append(watch)
    widget.installEventFilter(watch)
