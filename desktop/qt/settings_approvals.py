"""The settings dialog's Approvals page: the approval mode (`config.set {approvals: {mode}}`),
what saving it said, and the box back at the backend's mode when it was not saved.

Widgets only: the modes and their labels come from the config schema (`shared.config`), what
the box changes and says from `desktop.state.settings`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import shiboken6
from PySide6.QtCore import Signal
from PySide6.QtWidgets import QComboBox, QFormLayout, QGroupBox, QLabel, QVBoxLayout, QWidget

from desktop.qt.compat import emit
from desktop.qt.settings_rules import Run
from desktop.state.settings import LABELS, MODE_SAVED, MODE_SAVING, error_words, mode_patch
from shared.client import RpcError
from shared.config import APPROVAL_MODES, ConfigView
from shared.methods import ConfigSet


class ApprovalsPage(QWidget):
    """The approval mode's box and its words."""

    saved = Signal(object)  # the ConfigView config.set answered
    failed = Signal(str)  # an error shown, in the words shown

    def __init__(self, link: Any, busy: set[str], run: Run,
                 on_config: Callable[[ConfigView, bool], None]) -> None:
        """`busy`: the dialog's operations in flight (this page's is "mode"); `run`: its spawn
        with busy bookkeeping; `on_config`: a config config.set answered, shown everywhere."""
        super().__init__()
        self.link = link
        self.busy = busy
        self.run = run
        self.on_config = on_config
        self.mode: str | None = None  # the backend's, as last shown
        general = QGroupBox("Approvals")
        form = QFormLayout(general)
        self.approval_combo = QComboBox()
        for mode, label in APPROVAL_MODES.items():
            self.approval_combo.addItem(label, mode)
        self.approval_combo.activated.connect(self._on_chosen)  # the person's choice only
        self.approval_combo.setEnabled(False)
        form.addRow(LABELS["mode"], self.approval_combo)
        self.approval_label = QLabel()
        self.approval_label.setWordWrap(True)
        form.addRow("", self.approval_label)
        lay = QVBoxLayout(self)
        lay.addWidget(general)
        lay.addStretch(1)

    def show_config(self, config: ConfigView) -> None:
        self.mode = config.approvals.mode
        self._choose(self.mode)
        self.approval_combo.setEnabled("mode" not in self.busy)

    def _choose(self, mode: str) -> None:
        index = self.approval_combo.findData(mode)
        if index >= 0:
            self.approval_combo.setCurrentIndex(index)

    def _on_chosen(self, index: int) -> None:
        self.set_approval_mode(str(self.approval_combo.itemData(index)))

    def set_approval_mode(self, mode: str) -> None:
        """Applies `approvals.mode` with config.set (the box follows the result)."""
        self._choose(mode)
        self.approval_combo.setEnabled(False)
        self.approval_label.setText(MODE_SAVING)
        self.run("mode", self._set_mode(mode), self._show_error)

    async def _set_mode(self, mode: str) -> None:
        try:
            config = await self.link.call(ConfigSet(patch=mode_patch(mode)))
        except RpcError as exc:
            if self._alive():
                self._show_error(error_words(exc))
            return
        if not self._alive():
            return
        self.busy.discard("mode")  # (so that the config shown enables the box)
        self.on_config(config, False)
        self.approval_label.setText(MODE_SAVED)
        emit(self.saved, config)

    def finished(self) -> None:
        """The mode's config.set is over: the box takes a choice again once a config shows."""
        self.approval_combo.setEnabled(self.mode is not None)

    def _show_error(self, words: str) -> None:
        self.approval_label.setText(f"Not saved: {words}")
        if self.mode is not None:  # back to what the backend has
            self._choose(self.mode)
        emit(self.failed, words)

    def _alive(self) -> bool:
        return shiboken6.isValid(self)
