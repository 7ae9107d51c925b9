"""The bar under a conversation's transcript: what the latest turn offers (Retry, Try another
provider with its menu, Undo file changes) or a passing note.  What it offers and says is
`desktop/state/turns.py`'s."""

from __future__ import annotations

import time
from collections.abc import Sequence

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QMenu, QPushButton

from desktop.qt.compat import emit
from desktop.state.model_choices import Choice
from desktop.state.turns import TurnActions, offer

NOTE_SECONDS = 8  # a passing note stays this long


class TurnBar(QFrame):
    """Retry a failed or stopped turn; undo the file changes of the latest one."""

    retry = Signal()
    try_another = Signal()
    undo = Signal()
    chosen = Signal(object)  # a Choice of the Try another provider menu

    def __init__(self) -> None:
        super().__init__()
        self.setObjectName("turnBar")
        row = QHBoxLayout(self)
        row.setContentsMargins(2, 0, 2, 0)
        self.label = QLabel()
        self.label.setProperty("muted", True)
        self.retry_button = QPushButton("Retry")
        self.retry_button.setAccessibleDescription(
            "Answer the last message again, in place of the answer that did not finish")
        self.retry_button.clicked.connect(lambda: emit(self.retry))
        # The provider failed the turn: the same prompt on another one, picked from a menu.
        self.other_button = QPushButton("Try another provider")
        self.other_button.setAccessibleDescription(
            "Choose another provider and model for this session and send the last message again")
        self.other_button.clicked.connect(lambda: emit(self.try_another))
        self.provider_menu: QMenu | None = None
        self.undo_button = QPushButton("Undo file changes")
        self.undo_button.setAccessibleDescription(
            "Put back the files the last turn changed, as they were before it")
        self.undo_button.clicked.connect(lambda: emit(self.undo))
        row.addWidget(self.label, 1)
        row.addWidget(self.undo_button)
        row.addWidget(self.other_button)
        row.addWidget(self.retry_button)
        self.hide()
        self._note_until = 0.0  # a note shows until then

    def show_actions(self, actions: TurnActions, other_providers: bool) -> None:
        """What `actions` offers (`other_providers`: another provider is set up); a note
        showing stays its while."""
        if time.monotonic() < self._note_until:
            self.show()
            return
        shown = offer(actions, other_providers)
        if shown is None:
            self.hide()
            return
        self.label.setText(shown.text)
        self.retry_button.setVisible(shown.retry)
        self.other_button.setVisible(shown.other)
        self.undo_button.setVisible(shown.undo)
        self.show()

    def note(self, text: str) -> None:
        """A passing note (not an error), without the buttons."""
        self.label.setText(text)
        self.show()
        self.retry_button.hide()
        self.other_button.hide()
        self.undo_button.hide()
        self._note_until = time.monotonic() + NOTE_SECONDS

    def note_ended(self) -> bool:
        """True once, when a note's time is over (the bar then shows the offers again)."""
        if self._note_until and time.monotonic() >= self._note_until:
            self._note_until = 0.0
            return True
        return False

    def offer_choices(self, choices: Sequence[Choice]) -> None:
        """The Try another provider menu under its button: `chosen` says the one picked."""
        menu = QMenu(self.other_button)
        menu.setAccessibleName("Try another provider")
        for choice in choices:
            action = menu.addAction(choice.label)
            action.triggered.connect(lambda _=False, c=choice: emit(self.chosen, c))
        if menu.isEmpty():
            menu.addAction("No other provider is set up: add one in Settings").setEnabled(False)
        self.provider_menu = menu
        menu.popup(self.other_button.mapToGlobal(self.other_button.rect().bottomLeft()))
