"""Windows always fully on screen: restored layouts from another monitor setup, and new
windows cascading from the last one, are moved (and if need be shrunk) into the available
area of the screen they are on, or the primary one."""

from __future__ import annotations

from PySide6.QtCore import QPoint, QRect, QTimer
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QWidget

CASCADE_PX = 30


def fitted(frame: QRect, area: QRect) -> QRect:
    """`frame` moved, and shrunk only if it is larger, so that it lies inside `area`."""
    width, height = min(frame.width(), area.width()), min(frame.height(), area.height())
    x = min(max(frame.x(), area.x()), area.x() + area.width() - width)
    y = min(max(frame.y(), area.y()), area.y() + area.height() - height)
    return QRect(x, y, width, height)


def cascaded(previous: QRect, size: QRect, area: QRect) -> QPoint:
    """Where a new window goes: below and right of the previous one; back up to the top
    when that would run off the bottom (still moving right, so it does not land exactly on
    an earlier window), and back to the left when it would run off the right edge."""
    x, y = previous.x() + CASCADE_PX, previous.y() + CASCADE_PX
    if y + size.height() > area.y() + area.height():
        y = area.y() + CASCADE_PX
    if x + size.width() > area.x() + area.width():
        x = area.x() + CASCADE_PX
    return QPoint(x, y)


def available(widget: QWidget) -> QRect:
    """The usable area (without panels) of the screen the widget is on, else the primary's."""
    screen = QGuiApplication.screenAt(widget.frameGeometry().center()) \
        or QGuiApplication.primaryScreen()
    return screen.availableGeometry()


def keep_on_screen(widget: QWidget) -> None:
    """Moves (and if need be shrinks) a top-level window so that all of it shows."""
    area = available(widget)
    frame = widget.frameGeometry()
    inside = fitted(frame, area)
    if inside == frame:
        return
    extra_w, extra_h = frame.width() - widget.width(), frame.height() - widget.height()
    widget.resize(inside.width() - extra_w, inside.height() - extra_h)
    widget.move(inside.topLeft())


def show_on_screen(widget: QWidget) -> None:
    """Shows a top-level window fully on screen: checked before it shows, and again once
    it is shown, when the window manager's frame around it is known."""
    keep_on_screen(widget)
    widget.show()
    QTimer.singleShot(0, widget, lambda: keep_on_screen(widget))
