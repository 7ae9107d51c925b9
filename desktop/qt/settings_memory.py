"""The settings dialog's Memory page: the agent's two notebooks (`memory.get`), each in a
plain-text editor with its usage, Save (`memory.set`) and Revert, refreshed live by
`memory.changed` without ever replacing the person's unsaved typing.

Widgets only: what to do with a change from elsewhere is decided by `desktop.state.memory`.
Calls run through the dialog's `run` (its busy bookkeeping), so the GUI thread never waits.
"""

from __future__ import annotations

from typing import Any

import shiboken6
from PySide6.QtCore import Signal
from PySide6.QtGui import QFontDatabase
from PySide6.QtWidgets import (
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from desktop.qt import theme
from desktop.qt.aio import describe
from desktop.qt.compat import emit
from desktop.qt.settings_rules import Run
from desktop.state.memory import CHANGED_NOTICE, HINTS, INTRO, TITLES, Notebook, measure, usage_words
from shared import protocol as p
from shared.client import STATE, ClientState, Incoming, InvalidParams, RpcError
from shared.methods import MemoryGet, MemorySet

TARGETS: tuple[p.MemoryTarget, ...] = ("user", "environment")


class NotebookBox(QGroupBox):
    """One notebook: the editor, its usage, a notice for changes kept aside, Save and Revert."""

    def __init__(self, target: p.MemoryTarget, parent: QWidget | None = None) -> None:
        super().__init__(TITLES[target], parent)
        self.state = Notebook(target)
        lay = QVBoxLayout(self)
        hint = QLabel(HINTS[target])
        hint.setWordWrap(True)
        hint.setProperty("muted", True)
        lay.addWidget(hint)
        self.editor = QPlainTextEdit()
        self.editor.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.editor.setAccessibleName(TITLES[target])
        self.editor.setAccessibleDescription(HINTS[target] + " One entry per line.")
        self.editor.setTabChangesFocus(True)
        self.editor.setPlaceholderText("Nothing yet. One entry per line.")
        lay.addWidget(self.editor, 1)
        self.notice = QLabel(CHANGED_NOTICE)
        self.notice.setWordWrap(True)
        self.notice.setProperty("banner", "warning")
        self.notice.hide()
        lay.addWidget(self.notice)
        row = QHBoxLayout()
        self.usage = QLabel()
        self.usage.setAccessibleName(f"{TITLES[target]}: characters used")
        self.status = QLabel()
        self.status.setWordWrap(True)
        self.status.setProperty("muted", True)
        self.revert_button = QPushButton("Revert")
        self.revert_button.setAccessibleDescription("Discard your changes and show the saved notes")
        self.save_button = QPushButton("Save")
        self.save_button.setAccessibleDescription("Replace the saved notes with this text")
        row.addWidget(self.usage)
        row.addWidget(self.status, 1)
        row.addWidget(self.revert_button)
        row.addWidget(self.save_button)
        lay.addLayout(row)
        self.editor.textChanged.connect(self.refresh)
        self.refresh()

    @property
    def draft(self) -> str:
        return self.editor.toPlainText()

    def show_text(self, text: str | None) -> None:
        """Puts the backend's text in the editor (None: leave the person's text alone)."""
        if text is not None and text != self.draft:
            self.editor.setPlainText(text)
        self.refresh()

    def refresh(self) -> None:
        st = self.state
        used = measure(self.draft)
        over = bool(st.limit) and used > st.limit
        self.usage.setText(usage_words(used, st.limit) if st.limit else "")
        theme.restyle(self.usage, tone="warning" if over else "")
        theme.restyle(self.editor, problem=over)
        dirty = st.dirty(self.draft)
        self.save_button.setEnabled(dirty and not st.saving and bool(st.limit))
        self.revert_button.setEnabled((dirty or st.changed_aside) and not st.saving)
        self.notice.setVisible(st.changed_aside)
        if dirty and not st.saving:
            self.status.setText("Not saved")
        elif not dirty and self.status.text() == "Not saved":
            self.status.setText("")


class MemoryPage(QWidget):
    """Both notebooks, loaded when the dialog opens and on reconnection, live on events."""

    loaded = Signal()  # after memory.get's answer is shown
    saved = Signal(str)  # the target, after memory.set answered
    refreshed = Signal(str)  # the target, after a memory.changed event was applied

    def __init__(self, link: Any, run: Run, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.link = link
        self.run = run
        lay = QVBoxLayout(self)
        intro = QLabel(INTRO)
        intro.setWordWrap(True)
        lay.addWidget(intro)
        self.boxes: dict[p.MemoryTarget, NotebookBox] = {}
        for target, stretch in zip(TARGETS, (2, 3), strict=True):
            box = NotebookBox(target)
            box.save_button.clicked.connect(lambda _=False, t=target: self.save(t))
            box.revert_button.clicked.connect(lambda _=False, t=target: self.revert(t))
            self.boxes[target] = box
            lay.addWidget(box, stretch)
        self.error_label = QLabel()
        self.error_label.setWordWrap(True)
        self.error_label.setProperty("tone", "warning")
        self.error_label.hide()
        lay.addWidget(self.error_label)

    # --- loading -------------------------------------------------------------------------

    def reload(self) -> None:
        self.run("memory", self._load(), self._failed)

    async def _load(self) -> None:
        result = await self.link.call(MemoryGet())
        if not self._alive():
            return
        files: dict[p.MemoryTarget, p.MemoryFile] = {"user": result.user,
                                                      "environment": result.environment}
        for target, file in files.items():
            box = self.boxes[target]
            box.show_text(box.state.loaded(file, box.draft))
        self.error_label.hide()
        emit(self.loaded)

    def on_event(self, event: Incoming) -> None:
        """`memory.changed` refreshes its notebook (never over unsaved typing); a
        reconnection (perhaps to a new backend process) loads both again."""
        if not self._alive():
            return
        data = event.data
        if isinstance(data, p.MemoryChanged):
            box = self.boxes[data.target]
            box.state.limit = data.file.limit
            box.show_text(box.state.changed(data.file.text, box.draft))
            emit(self.refreshed, data.target)
        elif event.type == STATE and isinstance(data, ClientState) and data.state == "connected":
            self.reload()

    # --- saving --------------------------------------------------------------------------

    def save(self, target: p.MemoryTarget) -> None:
        box = self.boxes[target]
        sent = box.draft
        box.state.save_started()
        box.status.setText("Saving…")
        box.refresh()
        self.run(f"memory-{target}", self._save(target, sent), lambda words: self._save_failed(target, words))

    async def _save(self, target: p.MemoryTarget, sent: str) -> None:
        try:
            result = await self.link.call(MemorySet(target=target, text=sent))
        except RpcError as exc:
            if self._alive():
                about_text = isinstance(exc, InvalidParams) and exc.field == "text"
                self._save_failed(target, exc.message if about_text else describe(exc))
            return
        if not self._alive():
            return
        box = self.boxes[target]
        file = result.user if target == "user" else result.environment
        box.show_text(box.state.save_done(file, box.draft, sent))
        box.status.setText("Saved; the next turn sees it.")
        self.error_label.hide()
        emit(self.saved, target)

    def _save_failed(self, target: p.MemoryTarget, words: str) -> None:
        box = self.boxes[target]
        box.show_text(box.state.save_done(None, box.draft, box.draft))
        box.status.setText("")
        self.error_label.setText(f"Not saved: {words}")
        self.error_label.show()
        theme.restyle(box.editor, problem=True)

    def revert(self, target: p.MemoryTarget) -> None:
        box = self.boxes[target]
        box.show_text(box.state.reverted())
        box.editor.setPlainText(box.state.saved)
        box.status.setText("")
        self.error_label.hide()
        box.refresh()

    def _failed(self, words: str) -> None:
        self.error_label.setText(f"Could not load the memory: {words}")
        self.error_label.show()

    def _alive(self) -> bool:
        return shiboken6.isValid(self)
