"""The MCP page's form to add a server: its name, a program or a URL, an optional key and the
header or variable it goes into, its approval; Test (`mcp.test` on the form as it stands,
nothing saved), Cancel and Add server (the key through `secret.set`, then `config.set`).  What
the fields make is decided in `desktop/state/mcp_form.py`."""

from __future__ import annotations

from typing import Any

import shiboken6
from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QComboBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from desktop.qt import theme
from desktop.qt.aio import describe
from desktop.qt.compat import emit
from desktop.qt.marks import busy_bar, plain_words, say
from desktop.qt.settings_mcp_server import Host
from desktop.state import mcp, mcp_form
from shared.client import RpcError
from shared.methods import ConfigSet, McpTest, SecretSet


class AddServerForm(QGroupBox):
    """The fields and buttons of "Add an MCP server", and what they do."""

    added = Signal(str, object)  # the server's name, the ConfigView config.set answered
    tested = Signal(object)  # mcp.test's McpTestResult (an RPC failure: ok false, its words)
    failed = Signal(str)  # an error shown, in the words shown

    def __init__(self, host: Host, parent: QWidget | None = None) -> None:
        super().__init__("Add an MCP server", parent)
        self.host = host
        lay = QVBoxLayout(self)
        self.form = QFormLayout()
        self._fields()
        lay.addLayout(self.form)
        self.key_hint = QLabel()
        self.key_hint.setWordWrap(True)
        self.key_hint.setProperty("muted", True)
        lay.addWidget(self.key_hint)
        self.form_error = plain_words()
        self.form_error.setProperty("tone", "danger")
        self.form_error.hide()
        lay.addWidget(self.form_error)
        self.form_result = plain_words(selectable=True)
        lay.addWidget(self.form_result)
        lay.addStretch(1)
        lay.addLayout(self._actions())
        self.show_kind()

    def _fields(self) -> None:
        form = self.form
        self.name_edit = QLineEdit()
        self.name_edit.setPlaceholderText("e.g. time (letters, digits and -)")
        self.name_edit.setMaxLength(32)
        self.name_edit.textChanged.connect(lambda _t: self.update_key_hint())
        form.addRow("Name", self.name_edit)
        self.kind_combo = QComboBox()
        for kind, words in mcp.KINDS.items():
            self.kind_combo.addItem(words, kind)
        self.kind_combo.currentIndexChanged.connect(lambda _i: self.show_kind())
        form.addRow("Kind", self.kind_combo)
        self.command_edit = QLineEdit()
        self.command_edit.setPlaceholderText("e.g. uvx mcp-server-time --local-timezone UTC")
        self.command_edit.setToolTip("The program and its arguments, quoted as in a shell")
        form.addRow(mcp.LABELS["command"], self.command_edit)
        self.url_edit = QLineEdit()
        self.url_edit.setPlaceholderText("https://example.com/mcp")
        form.addRow(mcp.LABELS["url"], self.url_edit)
        self.key_to_edit = QLineEdit()
        form.addRow("Header", self.key_to_edit)
        self.key_edit = QLineEdit()
        self.key_edit.setEchoMode(QLineEdit.EchoMode.Password)
        form.addRow("Key", self.key_edit)
        self.new_approval_combo = QComboBox()
        for approval, words in mcp.APPROVALS.items():
            self.new_approval_combo.addItem(words, approval)
        form.addRow(mcp.LABELS["approval"], self.new_approval_combo)

    def _actions(self) -> QHBoxLayout:
        actions = QHBoxLayout()
        self.form_test_button = QPushButton("Test")
        self.form_test_button.setAccessibleDescription(
            "Start the server as the form describes it and list its tools; nothing is saved "
            "but a key typed above")
        self.form_progress = busy_bar()
        self.cancel_button = QPushButton("Cancel")
        self.save_button = QPushButton("Add server")
        self.save_button.setProperty("primary", True)
        self.save_button.setDefault(False)
        actions.addWidget(self.form_test_button)
        actions.addWidget(self.form_progress, 1)
        actions.addStretch(1)
        actions.addWidget(self.cancel_button)
        actions.addWidget(self.save_button)
        return actions

    def edits(self) -> tuple[QLineEdit, ...]:
        return (self.name_edit, self.command_edit, self.url_edit, self.key_to_edit, self.key_edit)

    def reset(self) -> None:
        """Empty, a program, asking before each call."""
        for edit in self.edits():
            edit.clear()
        self.kind_combo.setCurrentIndex(0)
        self.new_approval_combo.setCurrentIndex(0)
        self.show_problem("")
        self.form_result.setText("")

    def kind(self) -> mcp.Kind:
        return "http" if self.kind_combo.currentData() == "http" else "stdio"

    def typed(self) -> mcp_form.NewServer:
        return mcp_form.NewServer(
            name=self.name_edit.text(), kind=self.kind(), command=self.command_edit.text(),
            url=self.url_edit.text(), key_to=self.key_to_edit.text(), key=self.key_edit.text(),
            approval=str(self.new_approval_combo.currentData()))

    def show_kind(self) -> None:
        """The rows of a program or of a URL, and what the key's row is called."""
        http = self.kind() == "http"
        words = mcp_form.kind_words(self.kind())
        self.form.setRowVisible(self.command_edit, not http)
        self.form.setRowVisible(self.url_edit, http)
        label = self.form.labelForField(self.key_to_edit)
        if isinstance(label, QLabel):
            label.setText(words.key_to)
        self.key_to_edit.setAccessibleName(words.key_to)
        self.key_to_edit.setPlaceholderText(words.key_to_example)
        self.key_edit.setPlaceholderText(words.key_example)
        self.update_key_hint()

    def update_key_hint(self) -> None:
        self.key_hint.setText(mcp_form.key_hint(self.name_edit.text(), self.kind()))

    def show_problem(self, words: str) -> None:
        """What is wrong (hidden when nothing is); the field it names marked and focused."""
        self.form_error.setText(words)
        self.form_error.setVisible(bool(words))
        field = mcp_form.problem_field(words)
        widgets = {"Name": self.name_edit, "Command": self.command_edit, "URL": self.url_edit,
                   "Header": self.key_to_edit, "Variable": self.key_to_edit, "Key": self.key_edit}
        for label, widget in widgets.items():
            theme.restyle(widget, problem=label == field)
        if field in widgets:
            widgets[field].setFocus()

    def show_result(self, text: str, tone: str = "") -> None:
        """Under the form: what is being done, or what a test found."""
        say(self.form_result, text, tone)

    def problem(self, words: str) -> None:
        """`show_problem`, and `failed` when there is one."""
        self.show_problem(words)
        if words:
            emit(self.failed, words)

    def _checked(self) -> tuple[str, dict[str, Any]] | None:
        """(name, table) of the form as typed; None once what is wrong with it is said."""
        made = mcp_form.form_table(self.typed(), self.host.servers.configs)
        self.problem(made if isinstance(made, str) else "")
        return None if isinstance(made, str) else made

    # --- Add server --------------------------------------------------------------------

    def add(self) -> None:
        """Add server: stores the key (secret.set), then saves the server (config.set)."""
        self.update_key_hint()
        made = self._checked()
        if made is None:
            return
        name, table = made
        self.show_result(f"Adding “{name}”…")
        self.host.go("save", self._add(name, table, self.key_edit.text()), self.problem)

    async def _add(self, name: str, table: dict[str, Any], key: str) -> None:
        if not await self._store_key(name, key):
            return
        try:
            config = await self.host.link.call(ConfigSet(patch={"mcp": {"servers": {name: table}}}))
        except RpcError as exc:
            if self._alive():
                self.form_result.setText("")
                self.problem(mcp.mcp_error_words(exc))
            return
        if not self._alive():
            return
        self.key_edit.clear()
        emit(self.added, name, config)

    async def _store_key(self, name: str, key: str) -> bool:
        """Stores a typed key under `mcp-NAME` (True when there was none, or it is stored)."""
        if not key.strip():
            return True
        secret = mcp.secret_name(name)
        try:
            result = await self.host.link.call(SecretSet(name=secret, value=key))
        except RpcError as exc:
            if self._alive():
                self.form_result.setText("")
                self.problem(f"The key was not stored: {describe(exc)}")
            return False
        if self._alive() and result.warning:
            self.key_hint.setText(f"Key stored as “{secret}”. Warning: {result.warning}.")
        return True

    # --- Test --------------------------------------------------------------------------

    def test(self) -> None:
        """Test on the add form: `mcp.test {name, server_config}`; nothing is saved (a typed
        key is stored first, as `mcp-NAME`: keys only travel through secret.set)."""
        if "test" in self.host.servers.busy:
            return
        made = self._checked()
        if made is None:
            return
        name, table = made
        self.show_result(f"Testing “{name}” as the form describes it (not saved): starting it "
                         "and listing its tools…")
        self.form_progress.show()
        self.host.go("test", self._test(name, table, self.key_edit.text()),
                     lambda words: self._test_failed(name, words))

    async def _test(self, name: str, table: dict[str, Any], key: str) -> None:
        if not await self._store_key(name, key):
            return
        try:
            result = await self.host.link.call(McpTest(name=name, server_config=table),
                                               timeout=mcp.TEST_TIMEOUT_S)
        except RpcError as exc:
            self._test_failed(name, mcp.mcp_error_words(exc))
            return
        if self._alive():
            self.show_result(*mcp.form_test_words(result))
            emit(self.tested, result)

    def _test_failed(self, name: str, words: str) -> None:
        if not self._alive():
            return
        self.show_result(f"Failed: “{name}”: {words}", "danger")
        emit(self.failed, words)
        emit(self.tested, mcp.failed_test(name, words, self.host.transport(name)))

    def _alive(self) -> bool:
        return shiboken6.isValid(self)
