"""The MCP page's selected server: its name and state badge, what it runs, why it failed,
Enabled and Approval, a row per key it takes from the keyring, Test, and its tools; and what
those controls do: `config.set` (enabled, approval, a tool's settings, removal), `secret.set`
(a key) and `mcp.test`.  What it shows and changes is decided in `desktop/state/mcp.py`."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, Literal, Protocol

import shiboken6
from PySide6.QtCore import QPoint, Qt, Signal
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QMenu,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from desktop.qt import theme
from desktop.qt.aio import describe
from desktop.qt.compat import emit
from desktop.qt.marks import Badge, busy_bar, plain_words, say
from desktop.state import mcp
from shared.client import RpcError
from shared.config import ConfigView
from shared.methods import ConfigSet, McpTest, SecretSet

Go = Callable[[str, Coroutine[Any, Any, None], Callable[[str], None]], None]


class Host(Protocol):
    """What a part of the MCP page needs of the page."""

    link: Any
    servers: mcp.McpServers
    on_config: Callable[[ConfigView], None]

    def go(self, op: str, coro: Coroutine[Any, Any, None], on_error: Callable[[str], None]) -> None:
        """Runs `coro` as the operation `op` ("save", "test", "key": one of each at a time)."""

    def refresh(self) -> None:
        """Shows what `servers` knows now: the list and the selected server."""

    def adding(self) -> bool:
        """Whether the add form shows."""

    def transport(self, name: str) -> Literal["stdio", "http"]:
        """The transport of the server a test was of (a failed test's result names it)."""


class ServerPanel(QWidget):
    """The right side of the page while a server is selected."""

    tested = Signal(object)  # mcp.test's McpTestResult (an RPC failure: ok false, its words)
    saved = Signal(object)  # the ConfigView config.set answered
    failed = Signal(str)  # an error shown, in the words shown

    def __init__(self, host: Host, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.host = host
        self.servers = host.servers
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addLayout(self._head())
        self.what_label = plain_words(selectable=True)
        lay.addWidget(self.what_label)
        self.running_label = QLabel()
        self.running_label.setProperty("muted", True)
        lay.addWidget(self.running_label)
        self.error_label = plain_words(selectable=True)
        self.error_label.setProperty("tone", "danger")
        self.error_label.hide()
        lay.addWidget(self.error_label)
        self.enabled_check = QCheckBox("Enabled: start it and offer its tools to the model")
        lay.addWidget(self.enabled_check)
        lay.addLayout(self._approval_row())
        # The keys it is configured to take from the keyring (header_secrets, env_secrets):
        # one row each, to store or replace the key; built for the server shown.
        self.keys_box = QWidget()
        self.keys_lay = QVBoxLayout(self.keys_box)
        self.keys_lay.setContentsMargins(0, 0, 0, 0)
        self.key_rows: dict[str, tuple[QLineEdit, QPushButton]] = {}  # by secret name
        self._keys_for: tuple[mcp.KeySlot, ...] = ()
        lay.addWidget(self.keys_box)
        self.key_label = plain_words()
        self.key_label.hide()
        lay.addWidget(self.key_label)
        self._test_rows(lay)
        self._tools(lay)

    def _head(self) -> QHBoxLayout:
        head = QHBoxLayout()
        self.title_label = QLabel()
        self.title_label.setTextFormat(Qt.TextFormat.PlainText)
        font = self.title_label.font()
        font.setBold(True)
        font.setPointSizeF(font.pointSizeF() * 1.15)
        self.title_label.setFont(font)
        self.badge = Badge()
        head.addWidget(self.title_label)
        head.addWidget(self.badge)
        head.addStretch(1)
        return head

    def _approval_row(self) -> QHBoxLayout:
        row = QHBoxLayout()
        label = QLabel(f"{mcp.LABELS['approval']}:")
        self.approval_combo = QComboBox()
        self.approval_combo.setAccessibleName(mcp.LABELS["approval"])
        for approval, words in mcp.APPROVALS.items():
            self.approval_combo.addItem(words, approval)
        label.setBuddy(self.approval_combo)
        row.addWidget(label)
        row.addWidget(self.approval_combo)
        row.addStretch(1)
        return row

    def _test_rows(self, lay: QVBoxLayout) -> None:
        row = QHBoxLayout()
        self.test_button = QPushButton("&Test")
        self.test_button.setToolTip("Starts the server again now and lists its tools")
        self.test_progress = busy_bar()
        row.addWidget(self.test_button)
        row.addWidget(self.test_progress, 1)
        row.addStretch(1)
        lay.addLayout(row)
        self.test_label = plain_words(selectable=True)
        self.test_label.hide()
        lay.addWidget(self.test_label)
        self.save_label = plain_words()
        self.save_label.hide()
        lay.addWidget(self.save_label)

    def _tools(self, lay: QVBoxLayout) -> None:
        lay.addSpacing(6)
        title = QLabel("Tools")
        title.setProperty("muted", True)
        lay.addWidget(title)
        tree = self.tools_tree = QTreeWidget()
        tree.setAccessibleName("Tools of the server")
        tree.setAccessibleDescription("Each tool's name, whether a call asks first, and what it does")
        tree.setHeaderLabels(["Tool", "Approval", "What it does"])
        tree.setToolTip("Right-click a tool (or press the menu key) to change how its calls are "
                        "approved, or to hide it from the model")
        tree.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        tree.setRootIsDecorated(False)
        tree.setWordWrap(True)
        tree.header().setAccessibleName("Tool columns")
        tree.header().setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        tree.header().setSectionResizeMode(1, QHeaderView.ResizeMode.ResizeToContents)
        lay.addWidget(tree, 1)
        self.tools_empty = QLabel()
        self.tools_empty.setWordWrap(True)
        self.tools_empty.setProperty("muted", True)
        self.tools_empty.setAlignment(Qt.AlignmentFlag.AlignTop)
        lay.addWidget(self.tools_empty, 1)

    # --- showing a server ----------------------------------------------------------------

    def show_selected(self) -> None:
        """The selected server as `servers` knows it (nothing changes while none is)."""
        details = self.servers.details()
        if details is not None:
            self.show_server(details)

    def show_server(self, details: mcp.Details) -> None:
        self.title_label.setText(details.name)
        self.badge.set_state(details.state)
        self.what_label.setText(details.what)
        self.running_label.setText(details.running)
        self.running_label.setVisible(bool(details.running))
        self.error_label.setText(details.error)
        self.error_label.setVisible(bool(details.error))
        self.enabled_check.setChecked(details.enabled)
        self._show_keys(details.keys)
        index = self.approval_combo.findData(details.approval)
        if index >= 0:
            self.approval_combo.setCurrentIndex(index)
        self._show_tools(details.tools, details.tools_empty)

    def _show_keys(self, wanted: tuple[mcp.KeySlot, ...]) -> None:
        """A row per key the server takes from the keyring (rebuilt when they differ)."""
        if wanted == self._keys_for:
            return
        self._keys_for = wanted
        while self.keys_lay.count():
            child = self.keys_lay.takeAt(0)
            widget = child.widget() if child is not None else None
            if widget is not None:
                widget.deleteLater()
        self.key_rows = {}
        for slot in wanted:
            row, edit, button = self._key_row(slot)
            self.keys_lay.addWidget(row)
            self.key_rows[slot.secret] = (edit, button)
        self.keys_box.setVisible(bool(wanted))

    def _key_row(self, slot: mcp.KeySlot) -> tuple[QWidget, QLineEdit, QPushButton]:
        row = QWidget()
        row_lay = QHBoxLayout(row)
        row_lay.setContentsMargins(0, 0, 0, 0)
        label = QLabel(f"{slot.words}:")
        edit = QLineEdit()
        edit.setEchoMode(QLineEdit.EchoMode.Password)
        edit.setAccessibleName(slot.words)
        edit.setPlaceholderText(f"stored as “{slot.secret}”: paste one to store or replace it")
        label.setBuddy(edit)
        button = QPushButton("Save key")
        button.setAccessibleDescription(f"Store the {slot.kind} {slot.target}'s key as "
                                        f"“{slot.secret}” and test the server with it")
        button.clicked.connect(lambda _=False, s=slot.secret: self.save_key(s))
        edit.returnPressed.connect(lambda s=slot.secret: self.save_key(s))
        row_lay.addWidget(label)
        row_lay.addWidget(edit, 1)
        row_lay.addWidget(button)
        return row, edit, button

    def _show_tools(self, tools: tuple[mcp.ToolRow, ...] | None, empty: str) -> None:
        self.tools_tree.clear()
        muted = QBrush(QColor(theme.colors().muted))
        for tool in tools or ():
            item = QTreeWidgetItem([tool.name, tool.approval, tool.about])
            item.setData(0, Qt.ItemDataRole.UserRole, tool.name)
            item.setToolTip(0, tool.name_tip)
            item.setToolTip(2, tool.description)
            if tool.hidden:
                for column in range(3):
                    item.setForeground(column, muted)
            self.tools_tree.addTopLevelItem(item)
        self.tools_tree.setVisible(bool(tools))
        self.tools_empty.setText(empty)
        self.tools_empty.setVisible(not tools)

    def enable(self, controls: mcp.Controls) -> None:
        self.test_button.setEnabled(controls.test)
        self.enabled_check.setEnabled(controls.enabled)
        self.approval_combo.setEnabled(controls.approval)
        for _edit, button in self.key_rows.values():
            button.setEnabled(controls.save_key)

    def tool_at(self, at: QPoint) -> str | None:
        """The tool under `at` (else the current one): a menu's."""
        item = self.tools_tree.itemAt(at) or self.tools_tree.currentItem()
        return None if item is None else str(item.data(0, Qt.ItemDataRole.UserRole))

    def tool_menu(self, at: QPoint, tool: str, choices: list[mcp.ToolChoice],
                  chosen: Callable[[mcp.ToolChoice], None]) -> None:
        """A tool's menu at `at`: its approvals (the one in force checked), then the rest."""
        menu = QMenu(self.tools_tree)
        menu.setAccessibleName(f"Tool {tool}")
        for choice in choices:
            if choice.checked is None:
                menu.addSeparator()
            action = menu.addAction(choice.words)
            if choice.checked is not None:
                action.setCheckable(True)
                action.setChecked(choice.checked)
            action.triggered.connect(lambda _=False, c=choice: chosen(c))
        menu.exec(self.tools_tree.viewport().mapToGlobal(at))

    def clear_words(self) -> None:
        """What the last test, save and key said goes (another server is selected)."""
        for label in (self.test_label, self.save_label, self.key_label):
            say(label, "")

    # --- config.set ------------------------------------------------------------------

    def change(self, change: mcp.Change) -> None:
        """Saves `change` (`config.set`), then says its words."""
        if "save" in self.servers.busy:
            return
        say(self.save_label, "Saving…")
        self.host.go("save", self._set(change), self.show_save_error)

    async def _set(self, change: mcp.Change) -> None:
        try:
            config = await self.host.link.call(ConfigSet(patch=change.patch))
        except RpcError as exc:
            if self._alive():
                self.show_save_error(mcp.mcp_error_words(exc))
                self.show_selected()  # the checkbox and combo back to what is saved
            return
        if not self._alive():
            return
        self.host.on_config(config)
        say(self.save_label, change.done)
        emit(self.saved, config)

    def show_save_error(self, words: str) -> None:
        say(self.save_label, f"Not saved: {words}", "danger")
        emit(self.failed, words)

    # --- secret.set ------------------------------------------------------------------

    def save_key(self, secret: str) -> None:
        """Save key: `secret.set` under the name the server's config refers to, then Test
        (the server starts again with it)."""
        row = self.key_rows.get(secret)
        name = self.servers.current
        if row is None or name is None or "key" in self.servers.busy:
            return
        value = row[0].text()
        if not value.strip():
            say(self.key_label, "Paste a key first.", "warning")
            return
        say(self.key_label, "Storing the key…")
        self.host.go("key", self._save_key(name, secret, value), self._show_key_error)

    async def _save_key(self, name: str, secret: str, value: str) -> None:
        try:
            result = await self.host.link.call(SecretSet(name=secret, value=value))
        except RpcError as exc:
            if self._alive():
                self._show_key_error(describe(exc))
            return
        if not self._alive():
            return
        row = self.key_rows.get(secret)
        if row is not None:
            row[0].clear()
        say(self.key_label, *mcp.key_stored_words(secret, result))
        if self.servers.current == name and self.servers.may_test(name):
            self.servers.busy.discard("key")
            self.test()

    def _show_key_error(self, words: str) -> None:
        say(self.key_label, f"The key was not stored: {words}", "danger")
        emit(self.failed, words)

    # --- mcp.test --------------------------------------------------------------------

    def test(self) -> None:
        """Test: `mcp.test {name}`, the saved server (re)started, its tools listed."""
        name = self.servers.current
        if name is None or "test" in self.servers.busy or self.host.adding():
            return
        say(self.test_label, f"Testing “{name}”: starting it and listing its tools…")
        self.test_button.setText("Testing…")
        self.test_progress.show()
        self.host.go("test", self._test(name), lambda words: self._test_failed(name, words))

    async def _test(self, name: str) -> None:
        try:
            result = await self.host.link.call(McpTest(name=name), timeout=mcp.TEST_TIMEOUT_S)
        except RpcError as exc:
            self._test_failed(name, mcp.mcp_error_words(exc))
            return
        if self._alive():
            say(self.test_label, *mcp.test_words(result))
            if self.servers.tested(result):
                self.host.refresh()
            emit(self.tested, result)

    def _test_failed(self, name: str, words: str) -> None:
        if not self._alive():
            return
        say(self.test_label, f"Failed: “{name}”: {words}", "danger")
        emit(self.failed, words)
        emit(self.tested, mcp.failed_test(name, words, self.host.transport(name)))

    def test_done(self) -> None:
        self.test_button.setText("&Test")
        self.test_progress.hide()

    def _alive(self) -> bool:
        return shiboken6.isValid(self)
