"""A new session's welcome, centred over its empty transcript (the words are
`desktop/state/conversation.py`'s `welcome`; its links are the label's `linkActivated`)."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtWidgets import QLabel, QWidget


class Welcome(QLabel):
    """Rich text over `viewport`, kept centred in it as it resizes; hidden until shown."""

    def __init__(self, viewport: QWidget) -> None:
        super().__init__(viewport)
        self.viewport = viewport
        self.setObjectName("conversationEmpty")
        self.setWordWrap(True)
        self.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.setTextFormat(Qt.TextFormat.RichText)
        # "Add a provider" is a link the mouse and the keyboard (Tab, Enter) both follow.
        self.setTextInteractionFlags(Qt.TextInteractionFlag.LinksAccessibleByMouse
                                     | Qt.TextInteractionFlag.LinksAccessibleByKeyboard)
        self.hide()
        viewport.installEventFilter(self)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.Resize and watched is self.viewport:
            self.place()
        return False

    def place(self) -> None:
        area = self.viewport.rect()
        width = min(560, area.width() - 40)
        height = self.heightForWidth(width)
        self.setGeometry((area.width() - width) // 2, max(10, (area.height() - height) // 3),
                         width, height)

    def show_text(self, text: str | None) -> None:
        """`text` shown and placed; None hides it."""
        if text is not None:
            self.setText(text)
            self.place()
        self.setVisible(text is not None)
