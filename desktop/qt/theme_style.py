"""Fusion, with the few pieces a stylesheet cannot draw without image files: check boxes,
radio buttons (with their focus ring) and arrows (submenus, tool button menus), painted
from the palette.

The stylesheet (`desktop.qt.theme_sheet`) styles everything else; Qt asks this style
for a piece only where no stylesheet rule draws it.
"""

from __future__ import annotations

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QPainter, QPainterPath, QPalette, QPen
from PySide6.QtWidgets import QProxyStyle, QStyle, QStyleFactory, QStyleOption, QWidget

PE = QStyle.PrimitiveElement
PM = QStyle.PixelMetric
INDICATOR = 22  # px, check boxes and radio buttons: a 15 px box, a gap and the focus ring
ARROWS = {PE.PE_IndicatorArrowDown: 0, PE.PE_IndicatorArrowRight: 90, PE.PE_IndicatorArrowUp: 180,
          PE.PE_IndicatorArrowLeft: 270}


class ThemeStyle(QProxyStyle):
    """Fusion with flat, rounded indicators in the palette's colours (accent when checked)."""

    def __init__(self) -> None:
        super().__init__(QStyleFactory.create("Fusion"))

    def pixelMetric(self, metric: PM, option: QStyleOption | None = None,
                    widget: QWidget | None = None) -> int:
        if metric in (PM.PM_IndicatorWidth, PM.PM_IndicatorHeight, PM.PM_ExclusiveIndicatorWidth,
                      PM.PM_ExclusiveIndicatorHeight):
            return INDICATOR
        return super().pixelMetric(metric, option, widget)

    def drawPrimitive(self, element: PE, option: QStyleOption, painter: QPainter,
                      widget: QWidget | None = None) -> None:
        if element == PE.PE_IndicatorCheckBox:
            _indicator(option, painter, round_=False)
        elif element == PE.PE_IndicatorRadioButton:
            _indicator(option, painter, round_=True)
        elif element in ARROWS:
            _chevron(option, painter, ARROWS[element])
        else:
            super().drawPrimitive(element, option, painter, widget)


def _indicator(option: QStyleOption, painter: QPainter, round_: bool) -> None:
    """A check box (rounded square) or radio button (circle): outlined when off, filled with
    the accent and marked in white when on; flat grey when disabled."""
    state, pal, role = option.state, option.palette, QPalette.ColorRole
    enabled = bool(state & QStyle.StateFlag.State_Enabled)
    on = bool(state & QStyle.StateFlag.State_On)
    partial = bool(state & QStyle.StateFlag.State_NoChange)
    side = min(option.rect.width(), option.rect.height(), INDICATOR) - 6
    box = QRectF(0, 0, side - 1, side - 1)
    box.moveCenter(QRectF(option.rect).center())
    filled = (on or partial) and enabled
    if not enabled:
        fill, edge, mark = pal.color(role.Button), pal.color(role.Midlight), pal.color(role.Text)
    elif filled:
        fill = edge = pal.color(role.Highlight)
        mark = pal.color(role.HighlightedText)
    else:
        fill, mark = pal.color(role.Base), pal.color(role.Text)
        hover = bool(state & QStyle.StateFlag.State_MouseOver)
        edge = pal.color(role.Highlight) if hover else pal.color(role.Mid)
    painter.save()
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setPen(QPen(edge, 1))
    painter.setBrush(fill)
    if round_:
        painter.drawEllipse(box)
    else:
        painter.drawRoundedRect(box, 4, 4)
    if state & QStyle.StateFlag.State_HasFocus:
        # The focus ring, 2 px in the palette's Accent (the theme's focus colour), outside the box.
        painter.setPen(QPen(pal.color(role.Accent), 2))
        painter.setBrush(Qt.BrushStyle.NoBrush)
        ring = box.adjusted(-2.5, -2.5, 2.5, 2.5)
        if round_:
            painter.drawEllipse(ring)
        else:
            painter.drawRoundedRect(ring, 6.5, 6.5)
    if on or partial:
        if round_:
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(mark)
            painter.drawEllipse(box.center(), side * 0.2, side * 0.2)
        else:
            painter.setPen(QPen(mark, max(1.5, side / 8), Qt.PenStyle.SolidLine, Qt.PenCapStyle.RoundCap,
                                Qt.PenJoinStyle.RoundJoin))
            painter.setBrush(Qt.BrushStyle.NoBrush)
            path = QPainterPath()
            x, y, w = box.left(), box.top(), box.width()
            if partial:
                path.moveTo(x + w * 0.28, y + w * 0.5)
                path.lineTo(x + w * 0.72, y + w * 0.5)
            else:
                path.moveTo(x + w * 0.26, y + w * 0.52)
                path.lineTo(x + w * 0.43, y + w * 0.69)
                path.lineTo(x + w * 0.75, y + w * 0.35)
            painter.drawPath(path)
    painter.restore()


def _chevron(option: QStyleOption, painter: QPainter, degrees: int) -> None:
    """A small open chevron pointing down, turned by `degrees` clockwise (right, up, left)."""
    enabled = bool(option.state & QStyle.StateFlag.State_Enabled)
    group = QPalette.ColorGroup.Active if enabled else QPalette.ColorGroup.Disabled
    color = option.palette.color(group, QPalette.ColorRole.ButtonText)
    rect = QRectF(option.rect)
    half = min(rect.width(), rect.height(), 10.0) / 2 * 0.8
    painter.save()
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.translate(rect.center())
    painter.rotate(degrees)
    painter.setPen(QPen(color, 1.5, Qt.PenStyle.SolidLine, Qt.PenCapStyle.RoundCap,
                        Qt.PenJoinStyle.RoundJoin))
    painter.drawPolyline([QPointF(-half, -half / 2), QPointF(0, half / 2), QPointF(half, -half / 2)])
    painter.restore()
