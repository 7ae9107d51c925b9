"""How the sessions sidebar paints its rows: a group's header, a muted note, a backend's name
over its connection, and a session's title and cost over its status and age (or, when
searching, the words that matched).  What the rows say is `desktop/state/sidebar.py`'s."""

from __future__ import annotations

from PySide6.QtCore import QPointF, QRect, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QFont, QFontMetrics, QPainter, QPainterPath, QPalette, QPolygonF
from PySide6.QtWidgets import QStyle, QStyledItemDelegate, QStyleOptionViewItem

from desktop.qt import theme
from desktop.qt.sidebar_model import DOORS, GROUPING, KIND, MATCH, SESSION, STATE, Index
from desktop.state import sidebar as words
from desktop.state.sessions import cost, status_label
from shared import protocol as p

LEFT = Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter
RIGHT = Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter
DOT = 7  # a status dot's diameter


def _smaller(font: QFont, factor: float, bold: bool = False) -> QFont:
    small = QFont(font)
    small.setPointSizeF(font.pointSizeF() * factor)
    if bold:
        small.setBold(True)
    return small


class SessionDelegate(QStyledItemDelegate):
    """A header is a small muted label; a session is its title with cost, and beneath it its
    status and age (or, when searching, the words that matched)."""

    PAD = 10

    def sizeHint(self, option: QStyleOptionViewItem, index: Index) -> QSize:
        fm = QFontMetrics(option.font)
        kind = index.data(KIND)
        if kind in ("header", "note"):
            return QSize(200, fm.height() + 16)
        if kind == "backend":
            return QSize(200, fm.height() * 2 + 26)
        return QSize(200, fm.height() * 2 + 18)

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: Index) -> None:
        c = theme.colors()
        rect: QRect = option.rect
        font: QFont = option.font
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        kind = index.data(KIND)
        if kind == "backend":
            self._backend(painter, rect, font, index, c)
        elif kind == "note":  # where a session's title would be, smaller
            painter.setFont(_smaller(font, 0.9))
            painter.setPen(QColor(c.muted))
            painter.drawText(rect.adjusted(self.PAD + 4, 0, -self.PAD, 0), LEFT,
                             str(index.data(Qt.ItemDataRole.DisplayRole)))
        elif kind == "header":
            painter.setFont(_smaller(font, 0.85, bold=True))
            painter.setPen(QColor(c.muted))
            painter.drawText(rect.adjusted(self.PAD, 8, -self.PAD, 0), LEFT,
                             str(index.data(Qt.ItemDataRole.DisplayRole)))
        else:
            self._session(painter, option, index, c)
        painter.restore()

    def _session(self, painter: QPainter, option: QStyleOptionViewItem, index: Index,
                 c: theme.Colors) -> None:
        """Title and cost; beneath, the status (a dot and words), then the snippet that
        matched or the age, and a chat mark when a room is bound to it."""
        session: p.Session = index.data(SESSION)
        match: p.SearchMatch | None = index.data(MATCH)
        font: QFont = option.font
        box = option.rect.adjusted(4, 1, -4, -1)
        selected = self._backdrop(painter, option, box, c)
        fm = QFontMetrics(font)
        inner = box.adjusted(self.PAD, 6, -self.PAD, -6)
        line1 = QRect(inner.left(), inner.top(), inner.width(), fm.height())
        line2 = QRect(inner.left(), inner.top() + fm.height() + 2, inner.width(), fm.height())
        small = _smaller(font, 0.9)
        self._title_line(painter, line1, font, small, selected, session,
                         str(index.data(Qt.ItemDataRole.DisplayRole)), c)
        painter.setFont(small)
        x = self._status(painter, line2, small, session, c)
        right = line2.right()
        if index.data(DOORS):
            right = self._chat_mark(painter, line2, c) - 6
        rest = QRect(x, line2.top(), max(0, right - x), line2.height())
        if match is not None and match.snippet:
            self._snippet(painter, rest, small, match, c)
        else:
            painter.setPen(QColor(c.muted))
            when = words.age_words(session, str(index.data(GROUPING)))
            painter.drawText(rest, LEFT, QFontMetrics(small).elidedText(
                when, Qt.TextElideMode.ElideRight, rest.width()))

    @staticmethod
    def _backdrop(painter: QPainter, option: QStyleOptionViewItem, box: QRect,
                  c: theme.Colors) -> bool:
        """The row's fill when selected or under the mouse, and its focus ring; whether it
        is selected."""
        state = option.state
        palette: QPalette = option.palette
        selected = bool(state & QStyle.StateFlag.State_Selected)
        if selected or state & QStyle.StateFlag.State_MouseOver:
            fill = QColor(palette.color(QPalette.ColorRole.Highlight) if selected else QColor(c.text))
            fill.setAlpha(46 if selected else 16)
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(fill)
            painter.drawRoundedRect(box, 8, 8)
        if state & QStyle.StateFlag.State_HasFocus and state & QStyle.StateFlag.State_Active \
                and option.widget is not None and option.widget.hasFocus():
            pen = painter.pen()
            pen.setColor(QColor(c.accent))
            pen.setWidthF(2)
            painter.setPen(pen)
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.drawRoundedRect(box.adjusted(1, 1, -1, -1), 8, 8)
        return selected

    @staticmethod
    def _title_line(painter: QPainter, line: QRect, font: QFont, small: QFont, selected: bool,
                    session: p.Session, title: str, c: theme.Colors) -> None:
        """The cost at the right in small muted text; the title elided before it."""
        price = cost(session)
        price_w = QFontMetrics(small).horizontalAdvance(price)
        painter.setFont(small)
        painter.setPen(QColor(c.muted))
        painter.drawText(line, RIGHT, price)
        title_font = QFont(font)
        title_font.setWeight(QFont.Weight.DemiBold if selected else QFont.Weight.Normal)
        painter.setFont(title_font)
        painter.setPen(QColor(c.text))
        shown = QFontMetrics(title_font).elidedText(title, Qt.TextElideMode.ElideRight,
                                                    line.width() - price_w - 8)
        painter.drawText(line, LEFT, shown)

    @staticmethod
    def _status(painter: QPainter, line: QRect, small: QFont, session: p.Session,
                c: theme.Colors) -> int:
        """A busy session's status, a dot and words in its tone; returns where the rest of
        the line starts."""
        x = line.left()
        tone = words.TONES.get(session.status)
        if tone is None:
            return x
        color = QColor(getattr(c, tone))
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(color)
        painter.drawEllipse(x, line.center().y() - DOT // 2 + 1, DOT, DOT)
        x += DOT + 6
        painter.setPen(color)
        said = status_label(session.status)
        painter.drawText(QRect(x, line.top(), line.right() - x, line.height()), LEFT, said)
        return x + QFontMetrics(small).horizontalAdvance(said) + 8

    def _backend(self, painter: QPainter, rect: QRect, font: QFont, index: Index,
                 c: theme.Colors) -> None:
        """A backend's name in bold over a coloured dot and its connection state; a hairline
        above every one but the first."""
        if index.row() > 0:
            painter.setPen(QColor(c.border))
            painter.drawLine(rect.left() + self.PAD, rect.top() + 4, rect.right() - self.PAD,
                             rect.top() + 4)
        bold = QFont(font)
        bold.setWeight(QFont.Weight.DemiBold)
        fm = QFontMetrics(bold)
        inner = rect.adjusted(self.PAD, 12, -self.PAD, -4)
        line1 = QRect(inner.left(), inner.top(), inner.width(), fm.height())
        painter.setFont(bold)
        painter.setPen(QColor(c.text))
        painter.drawText(line1, LEFT, fm.elidedText(str(index.data(Qt.ItemDataRole.DisplayRole)),
                                                    Qt.TextElideMode.ElideRight, line1.width()))
        said, tone = index.data(STATE)
        small = _smaller(font, 0.9)
        sfm = QFontMetrics(small)
        line2 = QRect(inner.left(), line1.bottom() + 3, inner.width(), sfm.height())
        color = QColor(getattr(c, tone))
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(color)
        painter.drawEllipse(line2.left(), line2.center().y() - DOT // 2 + 1, DOT, DOT)
        painter.setFont(small)
        painter.setPen(color)
        text_rect = line2.adjusted(DOT + 6, 0, 0, 0)
        painter.drawText(text_rect, LEFT,
                         sfm.elidedText(said, Qt.TextElideMode.ElideRight, text_rect.width()))

    @staticmethod
    def _chat_mark(painter: QPainter, line: QRect, c: theme.Colors) -> int:
        """A small speech bubble in the accent colour at the right of a session's second line:
        the session is also reached from a chat room (its tooltip names the room).  Returns
        the mark's left edge."""
        h = max(11, line.height() - 2)
        w = h + 4
        left = line.right() - w
        top = line.center().y() - h // 2
        accent = QColor(c.accent)
        fill = QColor(accent)
        fill.setAlpha(40)
        pen = painter.pen()
        pen.setColor(accent)
        pen.setWidthF(1.5)
        painter.setPen(pen)
        painter.setBrush(fill)
        body = QRectF(left + 0.75, top + 0.75, w - 1.5, h - 5.5)
        tail = QPolygonF([QPointF(left + 4, body.bottom() - 0.5), QPointF(left + 3.5, top + h),
                          QPointF(left + 9, body.bottom() - 0.5)])
        path = QPainterPath()
        path.addRoundedRect(body, 4, 4)
        path.addPolygon(tail)
        painter.drawPath(path.simplified())
        return left

    @staticmethod
    def _snippet(painter: QPainter, rect: QRect, font: QFont, match: p.SearchMatch,
                 c: theme.Colors) -> None:
        """The snippet in muted text with its matched words in the accent colour, elided; when
        the words before the first match would take more than a third of the line, they give
        way to an ellipsis from the left, so the match shows."""
        bold = QFont(font)
        bold.setBold(True)
        spans = words.snippet_spans(match)
        lead = QFontMetrics(font)
        if len(spans) > 1 and lead.horizontalAdvance(spans[0][0]) > rect.width() // 3:
            spans[0] = (lead.elidedText(spans[0][0], Qt.TextElideMode.ElideLeft, rect.width() // 3), False)
        x = rect.left()
        for part, hit in spans:
            if not part:
                continue
            f = bold if hit else font
            fm = QFontMetrics(f)
            room = rect.right() - x
            if room <= 0:
                break
            shown = fm.elidedText(part, Qt.TextElideMode.ElideRight, room)
            painter.setFont(f)
            painter.setPen(QColor(c.accent if hit else c.muted))
            painter.drawText(QRect(x, rect.top(), room, rect.height()), LEFT, shown)
            if shown != part:
                break
            x += fm.horizontalAdvance(part)
