"""The settings dialog's MCP servers page: the tool servers of `[mcp.servers.NAME]`, each with
its state (a coloured badge, the failure's words), its tools, Enabled and Approval, Test and
Remove, and a form to add one.

A client of the backend only.  What is configured comes with the dialog's config
(`config.get` / `config.set`, `ConfigView.mcp`); where each server is (starting, ready, failed)
and its tools come from `mcp.list`, then live from the session-less `mcp.server` event, which
updates a row and its badge in place.  Changes go through `config.set {patch: {mcp: {servers:
{NAME: ...}}}}` (null removes a server), a key through `secret.set` under `mcp-NAME`, named in
`header_secrets` (an HTTP server) or `env_secrets` (a program), never in config.toml; Test is
`mcp.test`, on the saved server or on the add form as it stands (nothing saved).

The page wires its parts and lists the servers: the list (`settings_mcp_list.ServerList`), the
selected server (`settings_mcp_server.ServerPanel`, which makes its own changes, key and test)
and the add form (`settings_mcp_form.AddServerForm`, which adds and tests as typed); what they
show and what a control changes is decided in `desktop/state/mcp.py` (`McpServers`).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, Literal

import shiboken6
from PySide6.QtCore import QPoint, Qt, Signal
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from desktop.qt import theme
from desktop.qt.compat import emit
from desktop.qt.marks import say
from desktop.qt.settings_mcp_form import AddServerForm
from desktop.qt.settings_mcp_list import ServerList
from desktop.qt.settings_mcp_server import ServerPanel
from desktop.qt.settings_rules import Confirm, Run
from desktop.state import mcp
from shared import protocol as p
from shared.client import STATE, ClientState, Incoming, RpcError
from shared.config import ConfigView
from shared.errors import ErrorCode
from shared.methods import McpList

OnConfig = Callable[[ConfigView], None]
Reload = Callable[[], None]


class McpPage(QWidget):
    """The server list, the selected server's details and tools, and the add form."""

    listed = Signal(object)  # the McpServerStatus list, after every mcp.list
    updated = Signal(object)  # an McpServerStatus, after every mcp.server event shown
    tested = Signal(object)  # mcp.test's McpTestResult (an RPC failure: ok false, its words)
    saved = Signal(object)  # the ConfigView config.set answered (add, remove, enable, approval)
    failed = Signal(str)  # an error shown, in the words shown

    def __init__(self, link: Any, run: Run, confirm: Confirm, on_config: OnConfig,
                 reload_config: Reload, parent: QWidget | None = None) -> None:
        """`run`: the dialog's spawn with busy bookkeeping; `confirm`: its yes/no question;
        `on_config`: a ConfigView config.set answered (the dialog shows it everywhere);
        `reload_config`: asks the dialog to fetch the config again (a server it does not
        know was added meanwhile, by another window or the CLI)."""
        super().__init__(parent)
        self.link = link
        self.run = run
        self.confirm = confirm
        self.on_config = on_config
        self.reload_config = reload_config
        self.servers = mcp.McpServers()
        self._build()
        theme.changed.connect(self._recolor)

    # --- what it knows (desktop.state.mcp.McpServers) -----------------------------------

    @property
    def statuses(self) -> dict[str, p.McpServerStatus]:
        return self.servers.statuses

    @property
    def current(self) -> str | None:
        """The selected server's name."""
        return self.servers.current

    @property
    def busy(self) -> set[str]:
        return self.servers.busy

    @property
    def key_rows(self) -> dict[str, tuple[QLineEdit, QPushButton]]:
        """The selected server's key rows (edit, Save key) by secret name."""
        return self.details.key_rows

    def names(self) -> list[str]:
        return self.servers.names()

    def adding(self) -> bool:
        return self.stack.currentWidget() is self.add_form

    def transport(self, name: str) -> Literal["stdio", "http"]:
        return self.servers.transport(name, self.adding(), self.add_form.kind())

    # --- layout ------------------------------------------------------------------------

    def _build(self) -> None:
        lay = QVBoxLayout(self)
        intro = QLabel("Tool servers (MCP) give the model more tools. Turnkey starts each enabled "
                       "server and offers its tools; a call asks for your approval unless the "
                       "server is trusted.")
        intro.setWordWrap(True)
        lay.addWidget(intro)
        self.status_label = QLabel()
        self.status_label.setWordWrap(True)
        self.status_label.hide()
        lay.addWidget(self.status_label)
        row = QHBoxLayout()
        lay.addLayout(row, 1)
        self.server_list = ServerList()
        row.addWidget(self.server_list, 2)
        self.stack = QStackedWidget()
        self.empty_label = QLabel(mcp.EMPTY)
        self.empty_label.setWordWrap(True)
        self.empty_label.setProperty("muted", True)
        self.empty_label.setAlignment(Qt.AlignmentFlag.AlignTop)
        self.stack.addWidget(self.empty_label)
        self.details = ServerPanel(self)
        self.stack.addWidget(self.details)
        self.add_form = AddServerForm(self)
        self.stack.addWidget(self.add_form)
        row.addWidget(self.stack, 3)
        self._name_parts()
        self._connect()
        self._update_buttons()

    def _name_parts(self) -> None:
        """The parts' controls by the page's names for them (the dialog's tests reach them so)."""
        ls, sv, fm = self.server_list, self.details, self.add_form
        self.table, self.add_button, self.remove_button = ls.table, ls.add_button, ls.remove_button
        self.title_label, self.badge, self.what_label = sv.title_label, sv.badge, sv.what_label
        self.running_label, self.error_label = sv.running_label, sv.error_label
        self.enabled_check, self.approval_combo = sv.enabled_check, sv.approval_combo
        self.keys_box, self.key_label, self.test_button = sv.keys_box, sv.key_label, sv.test_button
        self.test_progress, self.test_label, self.save_label = (
            sv.test_progress, sv.test_label, sv.save_label)
        self.tools_tree, self.tools_empty = sv.tools_tree, sv.tools_empty
        self.form, self.name_edit, self.kind_combo = fm.form, fm.name_edit, fm.kind_combo
        self.command_edit, self.url_edit, self.key_to_edit, self.key_edit = (
            fm.command_edit, fm.url_edit, fm.key_to_edit, fm.key_edit)
        self.new_approval_combo, self.key_hint = fm.new_approval_combo, fm.key_hint
        self.form_error, self.form_result, self.form_progress = (
            fm.form_error, fm.form_result, fm.form_progress)
        self.form_test_button, self.cancel_button, self.save_button = (
            fm.form_test_button, fm.cancel_button, fm.save_button)

    def _connect(self) -> None:
        self.server_list.picked.connect(self._on_select)
        QShortcut(QKeySequence(QKeySequence.StandardKey.Delete), self.table, self.remove_selected,
                  context=Qt.ShortcutContext.WidgetShortcut)
        self.add_button.clicked.connect(self.start_add)
        self.remove_button.clicked.connect(self.remove_selected)
        self.enabled_check.clicked.connect(self._on_enabled_clicked)  # the person's clicks only
        self.approval_combo.activated.connect(self._on_approval_chosen)
        self.test_button.clicked.connect(self.test_selected)
        self.tools_tree.customContextMenuRequested.connect(self._tool_menu)
        self.form_test_button.clicked.connect(self.test_form)
        self.cancel_button.clicked.connect(self.cancel_add)
        self.save_button.clicked.connect(self.add_server)
        for edit in self.add_form.edits():
            edit.returnPressed.connect(self.add_server)
        self.add_form.added.connect(self._added)
        for part in (self.details, self.add_form):
            part.tested.connect(self.tested)
            part.failed.connect(self.failed)
        self.details.saved.connect(self.saved)

    # --- what the backend says ---------------------------------------------------------

    def reload(self) -> None:
        """Asks where every server is (`mcp.list`): states, errors, tools."""
        if "list" in self.busy:
            return
        self.go("list", self._load(), self._show_list_error)

    async def _load(self) -> None:
        try:
            result = await self.link.call(McpList())
        except RpcError as exc:
            if exc.code != ErrorCode.METHOD_NOT_FOUND:
                raise
            if self._alive():
                self.servers.listing_error = mcp.NO_MCP
                self._show_status(mcp.NO_MCP, "warning")
            return
        if not self._alive():
            return
        self._show_status("", "")
        self.servers.listed(result.servers)
        self.refresh()
        emit(self.listed, result.servers)

    def set_config(self, config: ConfigView) -> None:
        """The dialog's effective config: which servers there are and how they are set."""
        self.servers.set_config(config)
        self.refresh()

    def on_event(self, event: Incoming) -> None:
        """The link's events: `mcp.server` updates its server's row and badge in place; a
        reconnection (perhaps to a new backend process) lists them again."""
        if not self._alive():
            return
        data = event.data
        if isinstance(data, p.McpServerEvent):
            status, ask = self.servers.heard(data.server)
            if ask:  # added elsewhere: its settings come with the config
                self.reload_config()
            self.refresh()
            emit(self.updated, status)
        elif event.type == STATE and isinstance(data, ClientState) and data.state == "connected":
            self.reload()

    # --- the list and the selected server ----------------------------------------------

    def refresh(self) -> None:
        """The rows (in place when the same servers are listed) and the selected details."""
        rows = self.servers.rows()
        names = [row.name for row in rows]
        if self.server_list.shown() != names:
            self.servers.current = self.servers.kept()
            self.server_list.rebuild(names, self.current)
        self.server_list.fill(rows)
        if not self.adding():
            self.stack.setCurrentWidget(self.details if self.current is not None else self.empty_label)
        self.details.show_selected()
        self._update_buttons()

    def _recolor(self, _scheme: str = "") -> None:
        if self._alive():
            self.refresh()

    def _on_select(self, name: str) -> None:
        if name != self.current:
            self.details.clear_words()
        self.servers.current = name
        if self.adding():  # a server picked while the add form shows: the form goes
            self.key_edit.clear()
        self.stack.setCurrentWidget(self.details)
        self.details.show_selected()
        self._update_buttons()

    def select(self, name: str) -> None:
        """Shows the server `name` (its row selected, its details on the right)."""
        if name in self.names():
            self.cancel_add()
            self.server_list.pick(name)

    def _update_buttons(self) -> None:
        controls = self.servers.controls(self.adding())
        self.remove_button.setEnabled(controls.remove)
        self.details.enable(controls)
        self.save_button.setEnabled(controls.add)
        self.form_test_button.setEnabled(controls.form_test)

    # --- changing a server (ServerPanel) -----------------------------------------------

    def _on_enabled_clicked(self, on: bool) -> None:
        if self.current is not None:
            self.set_enabled(self.current, on)

    def set_enabled(self, name: str, on: bool) -> None:
        """Enables or disables `name` (config.set); the backend starts or stops it."""
        self.details.change(mcp.enabling(name, on))

    def _on_approval_chosen(self, index: int) -> None:
        if self.current is not None:
            self.set_approval(self.current, str(self.approval_combo.itemData(index)))

    def set_approval(self, name: str, approval: str) -> None:
        self.details.change(mcp.approving(name, approval))

    def _tool_menu(self, at: QPoint) -> None:
        tool = self.details.tool_at(at)
        server = self.current
        if tool is None or server is None or "save" in self.busy:
            return
        config = self.servers.configs.get(server)
        if config is not None:
            self.details.tool_menu(at, tool, mcp.tool_menu(config, tool),
                                   lambda choice: self.set_tool(server, tool, choice.change))

    def set_tool(self, server: str, tool: str, change: dict[str, Any] | None) -> None:
        """Changes one tool's settings (`[mcp.servers.SERVER.tools.TOOL]`; None values fall
        back to the server's); trusting one needs the owner, as this app is."""
        if change is not None:
            self.details.change(mcp.tool_change(server, tool, change))

    def remove_selected(self) -> None:
        name = self.current
        if name is not None and self.remove_button.isEnabled() \
                and self.confirm(*mcp.remove_question(name)):
            self.remove(name)

    def remove(self, name: str) -> None:
        """Deletes `[mcp.servers.NAME]` (`mcp.servers.NAME: null`)."""
        self.details.change(mcp.removal(name))

    def save_key(self, secret: str) -> None:
        """Save key: `secret.set` under the name the server's config refers to, then Test."""
        self.details.save_key(secret)

    def test_selected(self) -> None:
        """Test: `mcp.test {name}`, the saved server (re)started, its tools listed."""
        self.details.test()

    # --- adding one (AddServerForm) ----------------------------------------------------

    def start_add(self) -> None:
        """Shows the empty add form."""
        self.add_form.reset()
        self.stack.setCurrentWidget(self.add_form)
        self.server_list.unmark()  # no server is selected while a new one is made
        self._update_buttons()
        self.name_edit.setFocus()

    def cancel_add(self) -> None:
        if self.adding():
            self.key_edit.clear()
            self.stack.setCurrentWidget(self.details if self.current is not None else self.empty_label)
            if self.current is not None:
                self.server_list.mark(self.current)
            self._update_buttons()
            self.table.setFocus()

    def add_server(self) -> None:
        """Add server: stores the key (secret.set), then saves the server (config.set)."""
        if self.adding() and "save" not in self.busy:
            self.add_form.add()

    def test_form(self) -> None:
        """Test on the add form: `mcp.test {name, server_config}`; nothing is saved."""
        self.add_form.test()

    def _added(self, name: str, config: ConfigView) -> None:
        self.servers.current = name
        self.stack.setCurrentWidget(self.details)
        self.on_config(config)
        self.select(name)
        say(self.save_label, f"Added “{name}”.")
        emit(self.saved, config)
        if self.servers.may_test(name):
            self.busy.discard("save")
            self.test_selected()  # whether it works, and its tools, at once

    # --- bookkeeping -------------------------------------------------------------------

    def go(self, op: str, coro: Coroutine[Any, Any, None], on_error: Callable[[str], None]) -> None:
        """The dialog's run (its busy set holds "mcp-OP"), and this page's own busy state."""
        self.busy.add(op)
        self._update_buttons()

        async def wrapped() -> None:
            try:
                await coro
            finally:
                self._finished(op)

        self.run(f"mcp-{op}", wrapped(), on_error)

    def _finished(self, op: str) -> None:
        self.busy.discard(op)
        if not self._alive():
            return
        if op == "test":
            self.details.test_done()
            self.form_progress.hide()
        self._update_buttons()

    def _show_status(self, words: str, tone: str) -> None:
        self.status_label.setText(words)
        theme.restyle(self.status_label, tone=tone)
        self.status_label.setVisible(bool(words))

    def _show_list_error(self, words: str) -> None:
        self._show_status(f"Could not list the MCP servers: {words}", "danger")
        emit(self.failed, words)

    def _alive(self) -> bool:
        return shiboken6.isValid(self)
