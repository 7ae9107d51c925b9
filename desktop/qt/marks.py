"""The marks of state the settings pages share: the rounded badge the MCP page shows a server's
state in (the doors' badge is one too), the coloured dot beside a state in a list (MCP servers,
Backends), a status line in its tone, a label for others' words, a busy bar."""

from __future__ import annotations

import shiboken6
from PySide6.QtCore import QPointF, Qt
from PySide6.QtGui import QColor, QIcon, QPainter, QPixmap
from PySide6.QtWidgets import QLabel, QProgressBar, QWidget

from desktop.qt import theme
from desktop.state.badges import STATES, BadgeTone


def dot(color: str) -> QIcon:
    """A filled circle in `color`, the state's mark in a list."""
    icon = QIcon()
    for size in (16, 32):
        pixmap = QPixmap(size, size)
        pixmap.fill(Qt.GlobalColor.transparent)
        painter = QPainter(pixmap)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(QColor(color))
        r = size * 0.28
        painter.drawEllipse(QPointF(size / 2, size / 2), r, r)
        painter.end()
        icon.addPixmap(pixmap, QIcon.Mode.Normal)
        icon.addPixmap(pixmap, QIcon.Mode.Selected)
    return icon


def state_color(tone: BadgeTone) -> str:
    c = theme.colors()
    return {"success": c.success, "accent": c.accent, "danger": c.danger, "muted": c.muted}[tone]


class Badge(QLabel):
    """A server's state: a small rounded label, its text and outline in the state's colour."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("mcpBadge")
        self.state = "unknown"
        self.setTextInteractionFlags(Qt.TextInteractionFlag.NoTextInteraction)
        self.set_state("unknown")
        theme.changed.connect(self._repaint)

    def set_state(self, state: str) -> None:
        self.state = state
        words, _tone = STATES.get(state, (state.capitalize(), "muted"))
        self.setText(f"● {words}")
        self.setAccessibleName(f"State: {words}")
        self._repaint()

    def _repaint(self, _scheme: str = "") -> None:
        if not shiboken6.isValid(self):
            return
        tone = STATES.get(self.state, ("", "muted"))[1]
        t = theme.tokens()
        self.setStyleSheet(
            f"QLabel#mcpBadge {{ color: {state_color(tone)}; background: {t.surface}; "
            f"border: 1px solid {state_color(tone)}; border-radius: 9px; padding: 1px 8px; "
            "font-weight: 600; }")


def say(label: QLabel, text: str, tone: str = "") -> None:
    """A status line: its text in its tone (success, danger, ...), hidden when empty."""
    label.setText(text)
    theme.restyle(label, tone=tone)
    label.setVisible(bool(text))


def plain_words(selectable: bool = False) -> QLabel:
    """A label for words from a server or the backend: wrapped, never read as markup."""
    label = QLabel()
    label.setWordWrap(True)
    label.setTextFormat(Qt.TextFormat.PlainText)
    if selectable:
        label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    return label


def busy_bar() -> QProgressBar:
    """A thin bar that moves while a test runs (hidden until then)."""
    bar = QProgressBar()
    bar.setRange(0, 0)
    bar.setAccessibleName("Testing")
    bar.setMaximumHeight(8)
    bar.setTextVisible(False)
    bar.hide()
    return bar
