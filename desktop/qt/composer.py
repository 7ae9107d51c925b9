"""The message box under a conversation: the files waiting to go (chips, `attachments.py`), the
editor, its long-message warning, the usage line, the attach button and Stop, Steer and Send
(Queue while a turn runs).  What a key does and what the buttons say is
`desktop/state/composer.py`'s."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QMimeData, QObject, Qt, Signal
from PySide6.QtGui import QDragEnterEvent, QDragMoveEvent, QDropEvent, QKeyEvent, QTextCursor
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
)

from desktop.qt import theme
from desktop.qt.attachments import ChipRow, carries_files, given_files
from desktop.qt.compat import emit, set_placeholder
from desktop.qt.shelves import shrinkable
from desktop.state import composer as words
from desktop.state.composer import IDLE_HINT, RUNNING_HINT  # noqa: F401  (tests import them from here)


class Composer(QPlainTextEdit):
    """Enter sends, Shift+Enter is a newline (Esc, which stops the turn, is the window's: see
    `Window.stop_action`).  Two lines high when empty, it grows with what is typed up to
    MAX_LINES, then scrolls."""

    MIN_LINES = 2
    MAX_LINES = 10

    send = Signal()
    steer = Signal()
    files_given = Signal(object)  # list[Given]: files (or an image) pasted into the box

    def __init__(self) -> None:
        super().__init__()
        self.setObjectName("composer")
        self.setPlaceholderText(IDLE_HINT)
        self.setTabChangesFocus(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.document().documentLayout().documentSizeChanged.connect(lambda _size: self._fit())
        self._fit()

    def lines(self) -> int:
        """The lines the text takes as shown (wrapped lines counted), at least one."""
        return max(1, int(self.document().documentLayout().documentSize().height()))

    def _fit(self) -> None:
        shown = max(self.MIN_LINES, min(self.MAX_LINES, self.lines()))
        margins = self.contentsMargins()
        height = (shown * self.fontMetrics().lineSpacing() + 2 * int(self.document().documentMargin())
                  + margins.top() + margins.bottom())
        if height != self.height():
            self.setFixedHeight(height)

    def keyPressEvent(self, e: QKeyEvent) -> None:
        modifiers = e.modifiers()
        action = words.key_action(
            enter=e.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter),
            shift=bool(modifiers & Qt.KeyboardModifier.ShiftModifier),
            alt=bool(modifiers & Qt.KeyboardModifier.AltModifier))
        if action is not None:
            emit(self.steer if action == "steer" else self.send)
            return
        super().keyPressEvent(e)

    # A paste of files or of an image attaches them; text pastes as text.
    def canInsertFromMimeData(self, source: QMimeData) -> bool:
        return carries_files(source) or super().canInsertFromMimeData(source)

    def insertFromMimeData(self, source: QMimeData) -> None:
        if carries_files(source):
            emit(self.files_given, given_files(source))
            return
        super().insertFromMimeData(source)

    # Files dragged over the box are left to the conversation, which takes them anywhere in
    # it and shows where they will go (a drag of text still drops here as text).
    def dragEnterEvent(self, e: QDragEnterEvent) -> None:
        if carries_files(e.mimeData()):
            e.ignore()
            return
        super().dragEnterEvent(e)

    def dragMoveEvent(self, e: QDragMoveEvent) -> None:
        if carries_files(e.mimeData()):
            e.ignore()
            return
        super().dragMoveEvent(e)

    def dropEvent(self, e: QDropEvent) -> None:
        if carries_files(e.mimeData()):
            e.ignore()
            return
        super().dropEvent(e)


class ComposerPanel(QFrame):
    """The framed message box (its frame shows its focus) with the usage line and the buttons
    under it; `send`, `steer` and `stop` are the person's, by key or by click."""

    send = Signal()
    steer = Signal()
    stop = Signal()
    attach = Signal()  # the attach button: pick files

    def __init__(self) -> None:
        super().__init__()
        self.setObjectName("composerFrame")
        self.composer = Composer()
        self.composer.setAccessibleName("Message")
        self.composer.setAccessibleDescription(
            "Your message to Turnkey: Enter sends, Shift+Enter starts a new line, Esc stops the turn")
        self.composer.send.connect(lambda: emit(self.send))
        self.composer.steer.connect(lambda: emit(self.steer))
        self.composer.installEventFilter(self)
        self._build_buttons()
        self.usage_label = shrinkable(QLabel())
        self.usage_label.setProperty("muted", True)
        self.long_note = QLabel()  # a long message's cost, under the box (see _measure)
        self.long_note.setObjectName("longMessageNote")
        self.long_note.setProperty("muted", True)
        self.long_note.setWordWrap(True)
        self.long_note.hide()
        self.composer.textChanged.connect(self._measure)
        self.chips = ChipRow()  # the files waiting to go with the message
        # About those files: one refused, Send waiting for uploads, a model that cannot see.
        self.attach_note = QLabel()
        self.attach_note.setObjectName("attachNote")
        self.attach_note.setWordWrap(True)
        self.attach_note.hide()
        inner = QVBoxLayout(self)
        inner.setContentsMargins(10, 6, 8, 8)
        inner.setSpacing(4)
        inner.addWidget(self.attach_note)
        inner.addWidget(self.chips)
        inner.addWidget(self.composer)
        inner.addWidget(self.long_note)
        under = QHBoxLayout()
        under.addWidget(self.attach_button)
        under.addWidget(self.usage_label, 1)
        under.addWidget(self.stop_button)
        under.addWidget(self.steer_button)
        under.addWidget(self.send_button)
        inner.addLayout(under)
        self.restyle()

    def _build_buttons(self) -> None:
        self.attach_button = QToolButton()
        self.attach_button.setObjectName("attachButton")
        self.attach_button.setAutoRaise(True)
        self.attach_button.setToolTip("Attach images, PDFs or text files (Ctrl+U); you can also "
                                      "paste an image or drop files here")
        self.attach_button.setAccessibleName("Attach files")
        self.attach_button.clicked.connect(lambda: emit(self.attach))
        # Send (Enter) is the primary action, whether it sends now or queues after the running
        # turn; Steer (Alt+Enter) is secondary.
        self.send_button = QPushButton("Send")
        self.send_button.setProperty("primary", True)
        self.send_button.setDefault(True)
        self.send_button.setAccessibleDescription("Send the message (Enter)")
        self.send_button.clicked.connect(lambda: emit(self.send))
        # While a turn runs: Steer adds the message to it (read at its next step), and Send
        # becomes Queue (the message runs after it).
        self.steer_button = QPushButton("Steer")
        self.steer_button.setAccessibleDescription(
            "Add the message to the running turn; the agent reads it at its next step (Alt+Enter)")
        self.steer_button.setToolTip("Add this to the running turn: the agent reads it at its "
                                     "next step, without stopping (Alt+Enter)")
        self.steer_button.clicked.connect(lambda: emit(self.steer))
        self.steer_button.hide()
        self._mode = words.mode("idle")  # the buttons show Steer and Queue while a turn runs
        self._needed: str | None = None  # what must be set up before a message can go
        self.stop_button = QPushButton("Stop")
        self.stop_button.setAccessibleDescription("Interrupt the running turn (Esc)")
        self.stop_button.setToolTip("Interrupt the running turn (Esc)")
        self.stop_button.clicked.connect(lambda: emit(self.stop))

    def restyle(self) -> None:
        """The buttons' icons, for the theme now."""
        self.send_button.setIcon(theme.icon(self._mode.send_icon))
        self.attach_button.setIcon(theme.icon("paperclip"))
        self.steer_button.setIcon(theme.icon("send"))
        self.stop_button.setIcon(theme.icon("stop"))

    def show_session(self, status: str, busy: bool, usage: str) -> None:
        """The usage line and the buttons for the session's status."""
        self.usage_label.setText(usage)
        self.stop_button.setEnabled(words.stop_enabled(busy))
        mode = words.mode(status)
        if mode.steering != self._mode.steering:
            self._mode = mode
            self.steer_button.setVisible(mode.steering)
            self.send_button.setIcon(theme.icon(mode.send_icon))
            self.send_button.setText(mode.send_text)
            self.send_button.setToolTip(mode.send_tip)
            set_placeholder(self.composer, self._needed or mode.placeholder)

    def show_needed(self, words_needed: str | None) -> None:
        """What must happen before a message can be answered (a provider set up), said in the
        message box, which takes nothing meanwhile; None: it works as usual."""
        if words_needed == self._needed:
            return
        self._needed = words_needed
        self.composer.setEnabled(words_needed is None)
        self.send_button.setEnabled(words_needed is None)
        self.attach_button.setEnabled(words_needed is None)
        set_placeholder(self.composer, words_needed or self._mode.placeholder)

    def note(self, text: str | None, tone: str = "warning") -> None:
        """The line over the files (None: hidden)."""
        self.attach_note.setText(text or "")
        theme.restyle(self.attach_note, tone=tone if tone != "muted" else "",
                      muted=tone == "muted")
        self.attach_note.setVisible(bool(text))

    def quote(self, text: str) -> None:
        """Quote in reply: `text` as "> " lines at the end of the message box, which takes focus."""
        insert = words.quote_after(self.composer.toPlainText(), text)
        self.composer.moveCursor(QTextCursor.MoveOperation.End)
        self.composer.insertPlainText(insert)
        self.composer.setFocus(Qt.FocusReason.OtherFocusReason)

    def _measure(self) -> None:
        """Warns (without stopping anything) when the message box holds a long text."""
        note = words.long_note(self.composer.document().characterCount())
        if note is not None:
            self.long_note.setText(note)
        self.long_note.setVisible(note is not None)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        """The frame shows the focus of the editor inside (which has no border)."""
        kind = event.type()
        if watched is self.composer and kind in (QEvent.Type.FocusIn, QEvent.Type.FocusOut):
            theme.restyle(self, focused=kind == QEvent.Type.FocusIn)
        return False
