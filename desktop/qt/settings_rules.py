"""The settings dialog's Rules page: the "always allow" rules (`rules.list`), each revocable
(`rules.delete`, after a confirmation), refreshed after every revoke and whenever shown.

Widgets only: what a rule allows, in words, and the question a revoke asks come from
`desktop.state.rules`.  Calls run through the dialog's `run` (its busy bookkeeping), so the
GUI thread never waits.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

import shiboken6
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from desktop.qt.compat import emit
from desktop.state.rules import EMPTY, RuleRow, revoke_question, rows
from shared.client import RpcError
from shared.errors import ErrorCode
from shared.methods import RulesDelete, RulesList

Run = Callable[[str, Coroutine[Any, Any, None], Callable[[str], None]], None]
Confirm = Callable[[str, str], bool]


class RulesPage(QWidget):
    """The rules list, its empty state, and Revoke / Refresh."""

    listed = Signal(object)  # the RuleRows shown, after every rules.list
    revoked = Signal(str)  # the rule_id, once rules.delete answered

    def __init__(self, link: Any, run: Run, confirm: Confirm, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.link = link
        self.run = run
        self.confirm = confirm
        self.shown: list[RuleRow] = []
        self._build()

    def _build(self) -> None:
        lay = QVBoxLayout(self)
        intro = QLabel("Calls you allowed with “Always”: Turnkey runs them without asking, in "
                       "every session. Revoke one to be asked again.")
        intro.setWordWrap(True)
        lay.addWidget(intro)
        self.table = QTreeWidget()
        self.table.setAccessibleName("Always-allowed rules")
        self.table.setAccessibleDescription("Each rule's tool, what it allows, and when it was "
                                            "made; Delete revokes the selected rule")
        self.table.setHeaderLabels(["Tool", "Allows without asking", "Created"])
        self.table.setRootIsDecorated(False)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.header().setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        self.table.header().setAccessibleName("Rule columns")
        self.table.currentItemChanged.connect(lambda *_: self._update_buttons())
        lay.addWidget(self.table, 1)
        QShortcut(QKeySequence(QKeySequence.StandardKey.Delete), self.table, self.revoke_selected,
                  context=Qt.ShortcutContext.WidgetShortcut)
        self.empty_label = QLabel(EMPTY)
        self.empty_label.setWordWrap(True)
        self.empty_label.setProperty("muted", True)
        self.empty_label.hide()
        lay.addWidget(self.empty_label)
        self.status_label = QLabel()
        self.status_label.setWordWrap(True)
        lay.addWidget(self.status_label)
        buttons = QHBoxLayout()
        self.refresh_button = QPushButton("Re&fresh")
        self.refresh_button.setAccessibleDescription("List the rules again")
        self.refresh_button.clicked.connect(self.reload)
        self.revoke_button = QPushButton("&Revoke…")
        self.revoke_button.setAccessibleDescription(
            "Delete the selected rule, after asking: Turnkey asks again before such calls")
        self.revoke_button.clicked.connect(self.revoke_selected)
        buttons.addWidget(self.refresh_button)
        buttons.addStretch(1)
        buttons.addWidget(self.revoke_button)
        lay.addLayout(buttons)
        self._update_buttons()

    # --- listing -------------------------------------------------------------------------

    def reload(self) -> None:
        """Lists the rules again (`rules.list`)."""
        self.refresh_button.setEnabled(False)
        self.run("rules", self._load(), self._failed)

    async def _load(self) -> None:
        try:
            result = await self.link.call(RulesList())
        finally:
            if self._alive():
                self.refresh_button.setEnabled(True)
        if self._alive():
            self.show_rows(rows(result.rules))

    def show_rows(self, shown: list[RuleRow]) -> None:
        keep = self.selected()
        self.shown = shown
        self.table.clear()
        for row in shown:
            item = QTreeWidgetItem([row.tool, row.allows, row.created])
            item.setData(0, Qt.ItemDataRole.UserRole, row.rule_id)
            item.setToolTip(1, row.allows)
            self.table.addTopLevelItem(item)
        ids = [r.rule_id for r in shown]
        current = self.table.topLevelItem(ids.index(keep) if keep in ids else 0)
        if current is not None:
            self.table.setCurrentItem(current)
        self.table.setVisible(bool(shown))
        self.empty_label.setVisible(not shown)
        self._update_buttons()
        emit(self.listed, shown)

    def selected(self) -> str | None:
        item = self.table.currentItem()
        return str(item.data(0, Qt.ItemDataRole.UserRole)) if item is not None else None

    # --- revoking ------------------------------------------------------------------------

    def revoke_selected(self) -> None:
        rule_id = self.selected()
        row = next((r for r in self.shown if r.rule_id == rule_id), None)
        if row is None or not self.revoke_button.isEnabled():
            return
        if self.confirm(*revoke_question(row)):
            self.revoke(row.rule_id)

    def revoke(self, rule_id: str) -> None:
        """Deletes the rule (`rules.delete`), then lists the rules again."""
        self.revoke_button.setEnabled(False)
        self.status_label.setText("Revoking…")
        self.run("revoke", self._revoke(rule_id), self._failed)

    async def _revoke(self, rule_id: str) -> None:
        try:
            await self.link.call(RulesDelete(rule_id=rule_id))
        except RpcError as exc:
            if exc.code != ErrorCode.NOT_FOUND:
                raise
            # Revoked meanwhile (another window, another client): gone is what was asked.
        finally:
            if self._alive():
                self._update_buttons()
        if not self._alive():
            return
        self.status_label.setText("Revoked: Turnkey asks again before such calls.")
        emit(self.revoked, rule_id)
        self.reload()

    # --- state ---------------------------------------------------------------------------

    def _update_buttons(self) -> None:
        self.revoke_button.setEnabled(self.table.currentItem() is not None)

    def _failed(self, words: str) -> None:
        self.status_label.setText(f"Could not update the rules: {words}")
        self.refresh_button.setEnabled(True)
        self._update_buttons()

    def _alive(self) -> bool:
        return shiboken6.isValid(self)
