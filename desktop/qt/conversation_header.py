"""A conversation's header: its title and where it runs (each line cut with "…" to the room
there is), the "provider · model" box, the connection note and the status chip.  The words are
`desktop/state/conversation.py`'s."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtGui import QFont, QFontMetrics
from PySide6.QtWidgets import QHBoxLayout, QLabel, QWidget

from desktop.qt import theme
from desktop.qt.model_box import ModelBox
from desktop.qt.transcript_view import esc
from desktop.state import conversation as words
from desktop.state.sessions import status_label


class ConversationHeader(QWidget):
    """`bar` is the row a window adds its own buttons to (pop out)."""

    def __init__(self) -> None:
        super().__init__()
        self.setObjectName("conversationHeader")
        top = QHBoxLayout(self)
        top.setContentsMargins(18, 10, 12, 10)
        # The title on one line, the folder, model and rooms on the next, each cut with "…" to
        # the room there is: neither sets the window's minimum width.
        self.title = QLabel()
        self.title.setMinimumWidth(40)
        self.title.setAccessibleName("Session")
        self.title.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.title.installEventFilter(self)
        self._parts = ("", "", "")  # title, where (folder, model, rooms), rooms' tooltip
        self.status_label = QLabel()
        self.status_label.setObjectName("statusChip")
        self.conn_label = QLabel()
        self.conn_label.setProperty("tone", "warning")
        self.model_box = ModelBox()
        top.addWidget(self.title, 1)
        top.addWidget(self.model_box)
        top.addWidget(self.conn_label)
        top.addWidget(self.status_label, 0, Qt.AlignmentFlag.AlignVCenter)
        self.bar = top

    def show_session(self, title: str, where: str, also: str, status: str, link_state: str) -> None:
        """`also`: the chat rooms bound to the session, for the tooltip."""
        self._parts = (title, where, also)
        self._show_title()
        self.conn_label.setText(words.connection_words(link_state))
        self.status_label.setText(status_label(status))
        theme.restyle(self.status_label, tone=words.status_tone(status))

    def _show_title(self) -> None:
        """The two lines for the label's width, each cut with "…" (the whole in its tooltip)."""
        title, where, also = self._parts
        room = max(40, self.title.width() - 4)
        font = QFont(self.title.font())
        font.setPointSizeF(13)
        font.setWeight(QFont.Weight.DemiBold)
        short_title = QFontMetrics(font).elidedText(title, Qt.TextElideMode.ElideRight, room)
        short_where = self.title.fontMetrics().elidedText(where, Qt.TextElideMode.ElideMiddle, room)
        cut = "\n".join(x for x, y in ((title, short_title), (where, short_where)) if x != y)
        tip = "\n".join(x for x in (cut, also) if x)
        self.title.setToolTip(f"<p style='white-space:pre-wrap'>{esc(tip)}</p>" if tip else "")
        muted = theme.colors().muted
        self.title.setText(f"<span style='font-size:13pt; font-weight:600'>{esc(short_title)}"
                           f"</span><br><span style='color:{muted}'>{esc(short_where)}</span>")

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self.title and event.type() == QEvent.Type.Resize:
            self._show_title()
        return False
