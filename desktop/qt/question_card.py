"""A question the model asks, as a card on the conversation's shelf: the question, its choices
as buttons (keys 1–9 while the card has the focus), a text field for the person's own words
when the question takes them, and Send.  What the card sends is `state/questions.py`'s rule;
the call is the shelves'."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QKeyEvent, QResizeEvent
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QLineEdit, QPushButton, QVBoxLayout

from desktop.qt import theme
from desktop.qt.compat import emit
from desktop.qt.shelves import FlowRow, shrinkable
from desktop.state import questions as words
from shared import protocol as p

# answer(question_id, choice, text): exactly one of choice and text is set.
Answer = Callable[[str, int | None, str | None], None]


class QuestionCard(QFrame):
    """One pending question; `busy` while its answer is on the way, `closed` when it was
    answered elsewhere (it goes when `clarify.resolved` arrives)."""

    reflowed = Signal()  # its width changed: the height it needs may have too

    def __init__(self, question: p.Question, answer: Answer) -> None:
        super().__init__()
        self.question = question
        self._answer = answer
        self.setObjectName("approvalCard")  # (the approval card's frame and colours)
        self.setAccessibleName("Question from the model")
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)  # the keys 1–9 work once it is focused
        box = QVBoxLayout(self)
        box.setContentsMargins(12, 8, 12, 10)
        box.setSpacing(6)
        box.addLayout(self._head())
        text = shrinkable(QLabel(question.question))
        text.setTextFormat(Qt.TextFormat.PlainText)  # the model wrote it: never markup or links
        text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        text.setObjectName("questionText")
        box.addWidget(text)
        self.buttons = self._choices(box)
        self.field: QLineEdit | None = None
        self.send: QPushButton | None = None
        if words.takes_words(question):
            box.addLayout(self._words())
        self.note = shrinkable(QLabel())
        self.note.setProperty("muted", True)
        self.note.hide()
        box.addWidget(self.note)

    def _head(self) -> QHBoxLayout:
        head = QHBoxLayout()
        icon = QLabel()
        icon.setPixmap(theme.icon("warning", "accent").pixmap(18, 18))
        title = shrinkable(QLabel("<b>The model asks you</b>"))
        head.addWidget(icon)
        head.addWidget(title, 1)
        return head

    def _choices(self, box: QVBoxLayout) -> list[QPushButton]:
        row = FlowRow()
        buttons: list[QPushButton] = []
        for i, choice in enumerate(self.question.choices):
            key = f"{i + 1}. " if i < words.SHORTCUTS else ""
            b = QPushButton(f"{key}{choice}".replace("&", "&&"))
            b.setAccessibleDescription(f"Answer “{choice}” to: {self.question.question[:200]}")
            b.setAutoDefault(True)  # Enter answers with the focused choice, as Space does
            if i == 0:
                b.setProperty("primary", True)
            b.clicked.connect(lambda _=False, n=i: self.choose(n))
            buttons.append(b)
            row.add(b)
        if buttons:
            box.addLayout(row)
        return buttons

    def _words(self) -> QHBoxLayout:
        line = QHBoxLayout()
        self.field = QLineEdit()
        self.field.setMaxLength(p.MAX_ANSWER)
        self.field.setPlaceholderText("Or answer in your own words…" if self.question.choices
                                      else "Your answer…")
        self.field.setAccessibleName("Your answer")
        self.field.returnPressed.connect(self.send_words)
        self.send = QPushButton("Send")
        self.send.setAccessibleDescription(f"Send your answer to: {self.question.question[:200]}")
        self.send.clicked.connect(self.send_words)
        line.addWidget(self.field, 1)
        line.addWidget(self.send)
        return line

    # --- answering -----------------------------------------------------------------------

    def choose(self, index: int) -> None:
        self._answer(self.question.question_id, index, None)

    def send_words(self) -> None:
        text = words.typed_answer(self.question, self.field.text() if self.field else "")
        if text is not None:
            self._answer(self.question.question_id, None, text)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        """1–9 pick a choice while the focus is on the card or one of its buttons (the text
        field takes digits as words)."""
        text = event.text()
        if len(text) == 1 and text.isdigit():
            index = words.choice_of_key(self.question, int(text))
            if index is not None and self.isEnabled() and self.buttons[index].isEnabled():
                self.choose(index)
                return
        super().keyPressEvent(event)

    def first_control(self) -> QPushButton | QLineEdit | None:
        """Where the focus goes when the card is shown from a notification."""
        return self.buttons[0] if self.buttons else self.field

    def busy(self, on: bool) -> None:
        for b in self.buttons:
            b.setEnabled(not on)
        if self.field is not None and self.send is not None:
            self.field.setEnabled(not on)
            self.send.setEnabled(not on)

    def closed_elsewhere(self) -> None:
        """The backend said -32014: answered from another place, expired or withdrawn."""
        self.busy(True)
        self.note.setText("Answered elsewhere (or no longer waiting).")
        self.note.show()

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        if event.size().width() != event.oldSize().width():
            emit(self.reflowed)
