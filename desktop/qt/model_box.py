"""A session's model box: every configured provider with its model, as "provider · model",
the session's own choice shown; a person picks one or types a model's name.  While an image
waits in the message box, models that cannot see images say so."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QComboBox

from desktop.qt.compat import emit
from desktop.state.model_choices import Choice, current, entries, marked, typed
from shared import protocol as p

POPUP_PADDING = 40  # px beside the widest entry: the items' margins and a scroll bar


class ModelBox(QComboBox):
    """Shows what `show_session` is given; says what was chosen with `chosen` (a Choice, maybe
    the session's own: the caller asks the backend only for a change) and that the list is
    about to open with `opening` (so its providers can be asked again)."""

    chosen = Signal(object)
    opening = Signal()

    def __init__(self) -> None:
        super().__init__()
        self.setObjectName("modelBox")
        self.setEditable(True)
        self.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
        self.setMinimumContentsLength(16)  # "main · gpt-4o-mini"; 480 px windows still fit
        self.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.setAccessibleName("Provider and model")
        self.setAccessibleDescription(
            "The provider and model this session's next turn asks; choose another, or type a "
            "model's name and press Enter")
        self.session: p.Session | None = None
        self.providers: list[p.ProviderChoice] = []
        self.activated.connect(lambda _i: self._pick(self.currentText()))
        entry = self.lineEdit()
        if entry is not None:
            entry.setAccessibleName("Model name")
            entry.returnPressed.connect(lambda: self._pick(self.currentText()))

    def show_session(self, session: p.Session | None, providers: Sequence[p.ProviderChoice],
                     images: bool = False) -> None:
        """`images`: an image waits to be sent (blind models are marked)."""
        self.session, self.providers = session, list(providers)
        shown = entries(session, providers)
        labels = [marked(c, providers, images) for c in shown]
        if [self.itemText(i) for i in range(self.count())] != labels:
            self.clear()
            for choice, label in zip(shown, labels, strict=True):
                self.addItem(label, choice)
        now = current(session, providers)
        entry = self.lineEdit()
        if now is not None and not (entry is not None and entry.hasFocus()):
            self.setCurrentText(marked(now, providers, images))
            if entry is not None:
                entry.setCursorPosition(0)  # the start of a long label in view: the provider
        self.setToolTip(f"Asked of {now.provider}" if now is not None and now.provider else "")

    def showPopup(self) -> None:
        emit(self.opening)
        # The list is as wide as its longest entry, whatever the box's width: a label cut in
        # the middle hid "(can't see images)" and the model's name with it.
        metrics = self.view().fontMetrics()
        widest = max((metrics.horizontalAdvance(self.itemText(i)) for i in range(self.count())),
                     default=0)
        self.view().setMinimumWidth(widest + POPUP_PADDING)
        super().showPopup()

    def _pick(self, text: str) -> None:
        index = self.findText(text.strip())
        data = self.itemData(index) if index >= 0 else None
        choice = data if isinstance(data, Choice) else typed(text, self.session, self.providers)
        if choice is not None:
            emit(self.chosen, choice)
