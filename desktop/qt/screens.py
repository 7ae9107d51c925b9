"""Windows always fully on screen: restored layouts from another monitor setup, and new
windows cascading from the last one, are moved (and if need be shrunk) into the available
area of the screen they are on, or the primary one.  A one-line question (a name, a title)
is wide enough to show its window title, its label and its value in full."""

from __future__ import annotations

from PySide6.QtCore import QPoint, QRect, QTimer
from PySide6.QtGui import QFontMetrics, QGuiApplication
from PySide6.QtWidgets import QInputDialog, QLineEdit, QWidget

CASCADE_PX = 30
QUESTION_MIN_PX = 420  # a one-line question's narrowest: a name or a title shows whole
TITLE_BAR_PX = 160  # beside a window's title: the window manager's icon and buttons


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


def question(parent: QWidget, title: str, label: str, text: str = "") -> QInputDialog:
    """A one-line text question (open it with `open()`: not modal, the loop keeps running),
    wide enough that neither its window title nor its label nor a long value is clipped
    (QInputDialog's own width is its field's, a few words)."""
    dialog = QInputDialog(parent)
    dialog.setWindowTitle(title)
    dialog.setLabelText(label)
    dialog.setTextValue(text)
    bold = dialog.font()
    bold.setBold(True)  # (window managers often write titles in bold)
    wide = max(QUESTION_MIN_PX, QFontMetrics(bold).horizontalAdvance(title) + TITLE_BAR_PX,
               dialog.fontMetrics().horizontalAdvance(label))
    # The field sets the width: the dialog's layout fixes its own minimum to its contents'.
    dialog.sizeHint()  # (QInputDialog lays itself out, its field made, when first measured)
    layout, field = dialog.layout(), dialog.findChild(QLineEdit)
    assert layout is not None
    assert field is not None
    margins = layout.contentsMargins()
    field.setMinimumWidth(wide - margins.left() - margins.right())
    return dialog
