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
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Coroutine
from typing import Any, Literal

import msgspec
import shiboken6
from PySide6.QtCore import QModelIndex, QPoint, QPointF, Qt, Signal
from PySide6.QtGui import QBrush, QColor, QIcon, QKeySequence, QPainter, QPixmap, QShortcut
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QComboBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QMenu,
    QProgressBar,
    QPushButton,
    QStackedWidget,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from desktop.qt import theme
from desktop.qt.aio import describe
from desktop.qt.compat import emit
from desktop.qt.settings_rules import Confirm, Run
from desktop.state.settings import reworded
from shared import protocol as p
from shared.client import STATE, ClientState, Incoming, InvalidParams, RpcError
from shared.config import ConfigView, McpServerConfig, fields
from shared.errors import ErrorCode
from shared.mcp_names import count_words
from shared.methods import ConfigSet, McpList, McpTest, SecretSet

OnConfig = Callable[[ConfigView], None]
Reload = Callable[[], None]
Kind = Literal["stdio", "http"]

TEST_TIMEOUT_S = 150.0  # a start is bounded by the server's startup_timeout_s (30 s by default)
BadgeTone = Literal["success", "accent", "danger", "muted"]
# A server's state as its badge says it: words, colour (a theme token).
STATES: dict[str, tuple[str, BadgeTone]] = {
    "ready": ("Ready", "success"),
    "starting": ("Starting…", "accent"),
    "failed": ("Failed", "danger"),
    "stopped": ("Not running", "muted"),
    "disabled": ("Disabled", "muted"),
    "unknown": ("Not reported", "muted"),
}
APPROVALS: dict[p.McpApproval, str] = {
    "ask": "Ask before each call",
    "trusted": "Trusted: run its tools without asking",
}
KINDS: dict[Kind, str] = {"stdio": "A program (stdio)", "http": "A URL (streamable HTTP)"}
LABELS = {k: f.label for k, f in fields(McpServerConfig).items()}
NO_MCP = ("This Turnkey service cannot report MCP servers (it predates them): the servers "
          "below are as configured; their state shows once it is updated and restarted.")
EMPTY = ("No MCP servers yet. An MCP server gives the model more tools: a program that speaks "
         "MCP on stdin and stdout (for example “uvx mcp-server-time”), or a server's URL. "
         "Add one with “Add…”.")


# --- words and values (no widgets) ------------------------------------------------------


def state_of(status: p.McpServerStatus | None, config: McpServerConfig | None) -> str:
    """The state a badge shows: the backend's, else "disabled" for a server switched off,
    else "unknown" (not reported yet, or a backend without mcp.list)."""
    if status is not None:
        return status.state
    return "disabled" if config is not None and not config.enabled else "unknown"


def tools_words(status: p.McpServerStatus | None) -> str:
    if status is None or status.tools is None:
        return "—"
    return count_words(status.tools)


def what_words(config: McpServerConfig) -> str:
    """What the server is: the program it runs, or where it is."""
    if config.url:
        return f"URL: {config.url}"
    return f"Runs: {shlex.join(config.command)}"


def running_words(status: p.McpServerStatus | None) -> str:
    """The small print: its sandbox, its restarts."""
    if status is None:
        return ""
    parts = []
    if status.transport == "stdio" and status.state in ("ready", "starting"):
        parts.append("Runs in the command sandbox" if status.sandboxed else "Runs without a sandbox")
    if status.restarts:
        parts.append(f"restarted {status.restarts} time{'' if status.restarts == 1 else 's'}")
    return " · ".join(parts)


def test_words(result: p.McpTestResult) -> tuple[str, str]:
    """mcp.test's result as the page shows it: (text, tone)."""
    name = result.server.name
    if result.ok:
        return (f"OK: “{name}” started and listed {tools_words(result.server)} in "
                f"{result.latency_ms} ms."), "success"
    why = result.error or result.server.error or "it failed for an unknown reason"
    return f"Failed: “{name}”: {why}", "danger"


def secret_name(server: str) -> str:
    """Where an added server's key is stored (`secret.set`): `mcp-NAME`."""
    return f"mcp-{server}"


def command_words(line: str) -> list[str] | str:
    """A command line split as a shell would (quotes, backslashes); or what is wrong with it."""
    try:
        argv = shlex.split(line)
    except ValueError as exc:
        return f"Command: {str(exc).rstrip('.')} (check the quotes)."
    return argv or "Command: give the program to run, and its arguments."


def new_server_table(kind: Kind, target: str, key_to: str, has_key: bool, approval: str,
                     secret: str) -> dict[str, Any] | str:
    """The add form as a `[mcp.servers.NAME]` table, or what is wrong with it (in words)."""
    table: dict[str, Any]
    if kind == "http":
        url = target.strip()
        if not url:
            return "URL: give the server's address (https://…)."
        table = {"url": url}
    else:
        argv = command_words(target)
        if isinstance(argv, str):
            return argv
        table = {"command": argv}
    key_to = key_to.strip()
    where = "Header" if kind == "http" else "Variable"
    if has_key and not key_to:
        return f"{where}: name the {where.lower()} the key goes into, or clear the key."
    if key_to and not has_key:
        return f"Key: paste the key for {key_to}, or clear the {where.lower()}."
    if key_to:
        table["header_secrets" if kind == "http" else "env_secrets"] = {key_to: secret}
    if approval != "ask":
        table["approval"] = approval
    return table


def mcp_error_words(exc: RpcError) -> str:
    """A refusal of config.set or mcp.test, in words: the field's label and the server's name."""
    if not isinstance(exc, InvalidParams):
        return describe(exc)
    parts = [x for x in exc.field.split(".") if x and x != "patch"]
    if parts[:2] == ["mcp", "servers"] and len(parts) >= 3:
        rest = parts[3:]
        if not rest:
            return f"Server “{parts[2]}”: {exc.message.rstrip('.')}."
        key = rest[0]
        label = LABELS.get(key, key.replace("_", " ").capitalize())
        text = reworded(key, exc.message).split(": ", 1)[-1]
        return f"{label} of server “{parts[2]}”: {text}"
    if parts[:1] == ["server_config"] and len(parts) >= 2:
        key = parts[1]
        label = LABELS.get(key, key.replace("_", " ").capitalize())
        return f"{label}: {reworded(key, exc.message).split(': ', 1)[-1]}"
    return reworded(".".join(parts), exc.message)


def _dot(color: str) -> QIcon:
    """A filled circle in `color`, the state's mark in the list."""
    icon = QIcon()
    for size in (16, 32):
        pixmap = QPixmap(size, size)
        pixmap.fill(Qt.GlobalColor.transparent)
        painter = QPainter(pixmap)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(QColor(color))
        r = size * 0.28
        painter.drawEllipse(QPointF(size / 2, size / 2), r, r)
        painter.end()
        icon.addPixmap(pixmap, QIcon.Mode.Normal)
        icon.addPixmap(pixmap, QIcon.Mode.Selected)
    return icon


def _color(tone: BadgeTone) -> str:
    c = theme.colors()
    return {"success": c.success, "accent": c.accent, "danger": c.danger, "muted": c.muted}[tone]


def _say(label: QLabel, text: str, tone: str = "") -> None:
    """A status line: its text in its tone (success, danger, ...), hidden when empty."""
    label.setText(text)
    theme.restyle(label, tone=tone)
    label.setVisible(bool(text))


class Badge(QLabel):
    """A server's state: a small rounded label, its text and outline in the state's colour."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("mcpBadge")
        self.state = "unknown"
        self.setTextInteractionFlags(Qt.TextInteractionFlag.NoTextInteraction)
        self.set_state("unknown")
        theme.changed.connect(self._repaint)

    def set_state(self, state: str) -> None:
        self.state = state
        words, _tone = STATES.get(state, (state.capitalize(), "muted"))
        self.setText(f"● {words}")
        self.setAccessibleName(f"State: {words}")
        self._repaint()

    def _repaint(self, _scheme: str = "") -> None:
        if not shiboken6.isValid(self):
            return
        tone = STATES.get(self.state, ("", "muted"))[1]
        t = theme.tokens()
        self.setStyleSheet(
            f"QLabel#mcpBadge {{ color: {_color(tone)}; background: {t.surface}; "
            f"border: 1px solid {_color(tone)}; border-radius: 9px; padding: 1px 8px; "
            "font-weight: 600; }")


# --- the page ---------------------------------------------------------------------------


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
        self._config_asked = False
        self.configs: dict[str, McpServerConfig] = {}
        self.statuses: dict[str, p.McpServerStatus] = {}
        self.current: str | None = None
        self.listing_error = ""
        self.busy: set[str] = set()
        self._build()
        theme.changed.connect(self._recolor)

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

        left = QVBoxLayout()
        self.table = QTreeWidget()
        self.table.setAccessibleName("MCP servers")
        self.table.setAccessibleDescription("Each server's name, state and tools; Delete removes "
                                            "the selected server")
        self.table.setHeaderLabels(["Server", "State", "Tools"])
        self.table.setRootIsDecorated(False)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.header().setAccessibleName("Server columns")
        self.table.header().setStretchLastSection(False)
        self.table.header().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        self.table.header().setSectionResizeMode(1, QHeaderView.ResizeMode.ResizeToContents)
        self.table.header().setSectionResizeMode(2, QHeaderView.ResizeMode.ResizeToContents)
        self.table.currentItemChanged.connect(self._on_select)
        QShortcut(QKeySequence(QKeySequence.StandardKey.Delete), self.table, self.remove_selected,
                  context=Qt.ShortcutContext.WidgetShortcut)
        left.addWidget(self.table, 1)
        buttons = QHBoxLayout()
        self.add_button = QPushButton("&Add…")
        self.add_button.setAccessibleDescription("Add an MCP server: a program or a URL")
        self.add_button.clicked.connect(self.start_add)
        self.remove_button = QPushButton("&Remove…")
        self.remove_button.setAccessibleDescription("Remove the selected server, after asking")
        self.remove_button.clicked.connect(self.remove_selected)
        buttons.addWidget(self.add_button)
        buttons.addWidget(self.remove_button)
        buttons.addStretch(1)
        left.addLayout(buttons)
        row.addLayout(left, 2)

        self.stack = QStackedWidget()
        self.empty_label = QLabel(EMPTY)
        self.empty_label.setWordWrap(True)
        self.empty_label.setProperty("muted", True)
        self.empty_label.setAlignment(Qt.AlignmentFlag.AlignTop)
        self.stack.addWidget(self.empty_label)
        self.details = self._build_details()
        self.stack.addWidget(self.details)
        self.add_form = self._build_add_form()
        self.stack.addWidget(self.add_form)
        row.addWidget(self.stack, 3)
        self._update_buttons()

    def _build_details(self) -> QWidget:
        page = QWidget()
        lay = QVBoxLayout(page)
        lay.setContentsMargins(0, 0, 0, 0)
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
        lay.addLayout(head)
        self.what_label = _words(selectable=True)
        lay.addWidget(self.what_label)
        self.running_label = QLabel()
        self.running_label.setProperty("muted", True)
        lay.addWidget(self.running_label)
        self.error_label = _words(selectable=True)
        self.error_label.setProperty("tone", "danger")
        self.error_label.hide()
        lay.addWidget(self.error_label)

        self.enabled_check = QCheckBox("Enabled: start it and offer its tools to the model")
        self.enabled_check.clicked.connect(self._on_enabled_clicked)  # the person's clicks only
        lay.addWidget(self.enabled_check)
        approval_row = QHBoxLayout()
        approval_label = QLabel(f"{LABELS['approval']}:")
        self.approval_combo = QComboBox()
        self.approval_combo.setAccessibleName(LABELS["approval"])
        for approval, words in APPROVALS.items():
            self.approval_combo.addItem(words, approval)
        self.approval_combo.activated.connect(self._on_approval_chosen)
        approval_label.setBuddy(self.approval_combo)
        approval_row.addWidget(approval_label)
        approval_row.addWidget(self.approval_combo)
        approval_row.addStretch(1)
        lay.addLayout(approval_row)
        # The keys it is configured to take from the keyring (header_secrets, env_secrets):
        # one row each, to store or replace the key; built for the server shown.
        self.keys_box = QWidget()
        self.keys_lay = QVBoxLayout(self.keys_box)
        self.keys_lay.setContentsMargins(0, 0, 0, 0)
        self.key_rows: dict[str, tuple[QLineEdit, QPushButton]] = {}  # by secret name
        self._keys_for: tuple[tuple[str, str, str], ...] = ()
        lay.addWidget(self.keys_box)
        self.key_label = _words()
        self.key_label.hide()
        lay.addWidget(self.key_label)

        test_row = QHBoxLayout()
        self.test_button = QPushButton("&Test")
        self.test_button.setToolTip("Starts the server again now and lists its tools")
        self.test_button.clicked.connect(self.test_selected)
        self.test_progress = _busy_bar()
        test_row.addWidget(self.test_button)
        test_row.addWidget(self.test_progress, 1)
        test_row.addStretch(1)
        lay.addLayout(test_row)
        self.test_label = _words(selectable=True)
        self.test_label.hide()
        lay.addWidget(self.test_label)
        self.save_label = _words()
        self.save_label.hide()
        lay.addWidget(self.save_label)

        lay.addSpacing(6)
        tools_title = QLabel("Tools")
        tools_title.setProperty("muted", True)
        lay.addWidget(tools_title)
        self.tools_tree = QTreeWidget()
        self.tools_tree.setAccessibleName("Tools of the server")
        self.tools_tree.setAccessibleDescription("Each tool's name, whether a call asks first, "
                                                 "and what it does")
        self.tools_tree.setHeaderLabels(["Tool", "Approval", "What it does"])
        self.tools_tree.setToolTip("Right-click a tool (or press the menu key) to change how its "
                                   "calls are approved, or to hide it from the model")
        self.tools_tree.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.tools_tree.customContextMenuRequested.connect(self._tool_menu)
        self.tools_tree.setRootIsDecorated(False)
        self.tools_tree.setWordWrap(True)
        self.tools_tree.header().setAccessibleName("Tool columns")
        self.tools_tree.header().setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        self.tools_tree.header().setSectionResizeMode(1, QHeaderView.ResizeMode.ResizeToContents)
        lay.addWidget(self.tools_tree, 1)
        self.tools_empty = QLabel()
        self.tools_empty.setWordWrap(True)
        self.tools_empty.setProperty("muted", True)
        self.tools_empty.setAlignment(Qt.AlignmentFlag.AlignTop)
        lay.addWidget(self.tools_empty, 1)
        return page

    def _build_add_form(self) -> QWidget:
        box = QGroupBox("Add an MCP server")
        lay = QVBoxLayout(box)
        form = QFormLayout()
        self.form = form
        self.name_edit = QLineEdit()
        self.name_edit.setPlaceholderText("e.g. time (letters, digits and -)")
        self.name_edit.setMaxLength(32)
        self.name_edit.textChanged.connect(lambda _t: self._update_key_hint())
        form.addRow("Name", self.name_edit)
        self.kind_combo = QComboBox()
        for kind, words in KINDS.items():
            self.kind_combo.addItem(words, kind)
        self.kind_combo.currentIndexChanged.connect(lambda _i: self._show_kind())
        form.addRow("Kind", self.kind_combo)
        self.command_edit = QLineEdit()
        self.command_edit.setPlaceholderText("e.g. uvx mcp-server-time --local-timezone UTC")
        self.command_edit.setToolTip("The program and its arguments, quoted as in a shell")
        form.addRow(LABELS["command"], self.command_edit)
        self.url_edit = QLineEdit()
        self.url_edit.setPlaceholderText("https://example.com/mcp")
        form.addRow(LABELS["url"], self.url_edit)
        self.key_to_edit = QLineEdit()
        form.addRow("Header", self.key_to_edit)
        self.key_edit = QLineEdit()
        self.key_edit.setEchoMode(QLineEdit.EchoMode.Password)
        form.addRow("Key", self.key_edit)
        self.new_approval_combo = QComboBox()
        for approval, words in APPROVALS.items():
            self.new_approval_combo.addItem(words, approval)
        form.addRow(LABELS["approval"], self.new_approval_combo)
        lay.addLayout(form)
        self.key_hint = QLabel()
        self.key_hint.setWordWrap(True)
        self.key_hint.setProperty("muted", True)
        lay.addWidget(self.key_hint)
        self.form_error = _words()
        self.form_error.setProperty("tone", "danger")
        self.form_error.hide()
        lay.addWidget(self.form_error)
        self.form_result = _words(selectable=True)
        lay.addWidget(self.form_result)
        lay.addStretch(1)
        actions = QHBoxLayout()
        self.form_test_button = QPushButton("Test")
        self.form_test_button.setAccessibleDescription(
            "Start the server as the form describes it and list its tools; nothing is saved "
            "but a key typed above")
        self.form_test_button.clicked.connect(self.test_form)
        self.form_progress = _busy_bar()
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.clicked.connect(self.cancel_add)
        self.save_button = QPushButton("Add server")
        self.save_button.setProperty("primary", True)
        self.save_button.setDefault(False)
        self.save_button.clicked.connect(self.add_server)
        actions.addWidget(self.form_test_button)
        actions.addWidget(self.form_progress, 1)
        actions.addStretch(1)
        actions.addWidget(self.cancel_button)
        actions.addWidget(self.save_button)
        lay.addLayout(actions)
        for edit in (self.name_edit, self.command_edit, self.url_edit, self.key_to_edit,
                     self.key_edit):
            edit.returnPressed.connect(self.add_server)
        self._show_kind()
        return box

    # --- what the backend says ---------------------------------------------------------

    def reload(self) -> None:
        """Asks where every server is (`mcp.list`): states, errors, tools."""
        if "list" in self.busy:
            return
        self._go("list", self._load(), self._show_list_error)

    async def _load(self) -> None:
        try:
            result = await self.link.call(McpList())
        except RpcError as exc:
            if exc.code != ErrorCode.METHOD_NOT_FOUND:
                raise
            if self._alive():
                self.listing_error = NO_MCP
                self._show_status(NO_MCP, "warning")
            return
        if not self._alive():
            return
        self.listing_error = ""
        self._show_status("", "")
        self.statuses = {s.name: self._merged(s) for s in result.servers}
        self._refresh()
        emit(self.listed, result.servers)

    def set_config(self, config: ConfigView) -> None:
        """The dialog's effective config: which servers there are and how they are set."""
        self.configs = dict(config.mcp.servers)
        self._config_asked = False
        for gone in set(self.statuses) - set(self.configs):
            del self.statuses[gone]
        self._refresh()

    def on_event(self, event: Incoming) -> None:
        """The link's events: `mcp.server` updates its server's row and badge in place; a
        reconnection (perhaps to a new backend process) lists them again."""
        if not self._alive():
            return
        data = event.data
        if isinstance(data, p.McpServerEvent):
            status = self._merged(data.server)
            self.statuses[status.name] = status
            if status.name not in self.configs and not self._config_asked:
                self._config_asked = True  # added elsewhere: its settings come with the config
                self.reload_config()
            self._refresh()
            emit(self.updated, status)
        elif event.type == STATE and isinstance(data, ClientState) and data.state == "connected":
            self.reload()

    def _merged(self, status: p.McpServerStatus) -> p.McpServerStatus:
        """A status without tools keeps the ones last listed (an event may leave them out)."""
        old = self.statuses.get(status.name)
        if status.tools is None and old is not None and old.tools is not None \
                and status.state in ("ready", "starting"):
            return msgspec.structs.replace(status, tools=old.tools)
        return status

    # --- the list ----------------------------------------------------------------------

    def names(self) -> list[str]:
        return sorted(self.configs, key=str.lower)

    def _refresh(self) -> None:
        """The rows (in place when the same servers are listed) and the selected details."""
        names = self.names()
        shown = [self._row(i).data(0, Qt.ItemDataRole.UserRole)
                 for i in range(self.table.topLevelItemCount())]
        if shown != names:
            keep = self.current if self.current in names else (names[0] if names else None)
            self.table.blockSignals(True)
            self.table.clear()
            for name in names:
                item = QTreeWidgetItem([name, "", ""])
                item.setData(0, Qt.ItemDataRole.UserRole, name)
                self.table.addTopLevelItem(item)
            self.table.blockSignals(False)
            self.current = keep
            if keep is not None:
                self.table.blockSignals(True)
                self.table.setCurrentItem(self._row(names.index(keep)))
                self.table.blockSignals(False)
        for i, name in enumerate(names):
            item = self._row(i)
            status = self.statuses.get(name)
            state = state_of(status, self.configs.get(name))
            words, tone = STATES.get(state, (state, "muted"))
            item.setText(1, words)
            item.setIcon(1, _dot(_color(tone)))  # an icon: a selected row keeps its colour
            item.setForeground(1, QBrush(QColor(_color(tone))))
            item.setText(2, tools_words(status))
            error = status.error if status is not None else None
            item.setToolTip(1, error or words)
            item.setToolTip(0, what_words(self.configs[name]))
        if self.stack.currentWidget() is not self.add_form:
            self.stack.setCurrentWidget(self.details if self.current is not None else self.empty_label)
        self._show_details()
        self._update_buttons()

    def _row(self, index: int) -> QTreeWidgetItem:
        item = self.table.topLevelItem(index)
        assert item is not None, index
        return item

    def _recolor(self, _scheme: str = "") -> None:
        if self._alive():
            self._refresh()

    def _on_select(self, item: QTreeWidgetItem | None, _previous: QTreeWidgetItem | None) -> None:
        if item is None:
            return
        name = str(item.data(0, Qt.ItemDataRole.UserRole))
        if name != self.current:
            _say(self.test_label, "")
            _say(self.save_label, "")
            _say(self.key_label, "")
        self.current = name
        if self.adding():  # a server picked while the add form shows: the form goes
            self.key_edit.clear()
        self.stack.setCurrentWidget(self.details)
        self._show_details()
        self._update_buttons()

    def select(self, name: str) -> None:
        """Shows the server `name` (its row selected, its details on the right)."""
        names = self.names()
        if name in names:
            self.cancel_add()
            self.table.setCurrentItem(self._row(names.index(name)))

    def _show_details(self) -> None:
        name = self.current
        config = self.configs.get(name or "")
        if name is None or config is None:
            return
        status = self.statuses.get(name)
        self.title_label.setText(name)
        self.badge.set_state(state_of(status, config))
        self.what_label.setText(what_words(config))
        running = running_words(status)
        self.running_label.setText(running)
        self.running_label.setVisible(bool(running))
        error = status.error if status is not None else None
        self.error_label.setText(error or "")
        self.error_label.setVisible(bool(error))
        self.enabled_check.setChecked(config.enabled)
        self._show_keys(config)
        index = self.approval_combo.findData(config.approval)
        if index >= 0:
            self.approval_combo.setCurrentIndex(index)
        self._show_tools(status, config)

    def _show_keys(self, config: McpServerConfig) -> None:
        """A row per key the server takes from the keyring (rebuilt when they differ)."""
        wanted = tuple(sorted(("header", h, secret) for h, secret in config.header_secrets.items())) \
            + tuple(sorted(("variable", v, secret) for v, secret in config.env_secrets.items()))
        if wanted == self._keys_for:
            return
        self._keys_for = wanted
        while self.keys_lay.count():
            child = self.keys_lay.takeAt(0)
            widget = child.widget() if child is not None else None
            if widget is not None:
                widget.deleteLater()
        self.key_rows = {}
        for kind, target, secret in wanted:
            row = QWidget()
            row_lay = QHBoxLayout(row)
            row_lay.setContentsMargins(0, 0, 0, 0)
            words = f"Key for the {kind} {target}"
            label = QLabel(f"{words}:")
            edit = QLineEdit()
            edit.setEchoMode(QLineEdit.EchoMode.Password)
            edit.setAccessibleName(words)
            edit.setPlaceholderText(f"stored as “{secret}”: paste one to store or replace it")
            label.setBuddy(edit)
            button = QPushButton("Save key")
            button.setAccessibleDescription(f"Store the {kind} {target}'s key as “{secret}” and "
                                            "test the server with it")
            button.clicked.connect(lambda _=False, s=secret: self.save_key(s))
            edit.returnPressed.connect(lambda s=secret: self.save_key(s))
            row_lay.addWidget(label)
            row_lay.addWidget(edit, 1)
            row_lay.addWidget(button)
            self.keys_lay.addWidget(row)
            self.key_rows[secret] = (edit, button)
        self.keys_box.setVisible(bool(wanted))

    def save_key(self, secret: str) -> None:
        """Save key: `secret.set` under the name the server's config refers to, then Test
        (the server starts again with it)."""
        row = self.key_rows.get(secret)
        name = self.current
        if row is None or name is None or "key" in self.busy:
            return
        value = row[0].text()
        if not value.strip():
            _say(self.key_label, "Paste a key first.", "warning")
            return
        _say(self.key_label, "Storing the key…")
        self._go("key", self._save_key(name, secret, value), self._show_key_error)

    async def _save_key(self, name: str, secret: str, value: str) -> None:
        try:
            result = await self.link.call(SecretSet(name=secret, value=value))
        except RpcError as exc:
            if self._alive():
                self._show_key_error(describe(exc))
            return
        if not self._alive():
            return
        row = self.key_rows.get(secret)
        if row is not None:
            row[0].clear()
        where = "the system keyring" if result.stored == "keyring" else "a file"
        text = f"Key stored in {where} as “{secret}”."
        _say(self.key_label, text + (f" Warning: {result.warning}." if result.warning else ""),
             "warning" if result.warning else "")
        if self.current == name and name in self.configs and self.configs[name].enabled:
            self.busy.discard("key")
            self.test_selected()

    def _show_key_error(self, words: str) -> None:
        _say(self.key_label, f"The key was not stored: {words}", "danger")
        emit(self.failed, words)

    def _show_tools(self, status: p.McpServerStatus | None, config: McpServerConfig) -> None:
        self.tools_tree.clear()
        tools = status.tools if status is not None else None
        muted = QBrush(QColor(theme.colors().muted))
        for tool in tools or []:
            approval = ("hidden" if not tool.enabled else
                        "trusted" if tool.approval == "trusted" else "asks")
            own = config.tools.get(tool.name)
            if tool.enabled and own is not None and own.approval is not None:
                approval += " (this tool)"
            about = " ".join(tool.description.split())
            item = QTreeWidgetItem([tool.name, approval, about])
            item.setData(0, Qt.ItemDataRole.UserRole, tool.name)
            item.setToolTip(0, f"The model calls it {tool.model_name}" if tool.enabled else
                            "Hidden: not offered to the model")
            item.setToolTip(2, tool.description)
            if not tool.enabled:
                for column in range(3):
                    item.setForeground(column, muted)
            self.tools_tree.addTopLevelItem(item)
        self.tools_tree.setVisible(bool(tools))
        if tools:
            self.tools_empty.setText("")
        elif tools is not None:
            self.tools_empty.setText("It lists no tools.")
        elif status is not None and status.state == "failed":
            self.tools_empty.setText("None: it did not start. Fix what the error says, then Test.")
        elif not config.enabled:
            self.tools_empty.setText("Disabled: its tools are not offered to the model.")
        elif status is not None and status.state == "starting":
            self.tools_empty.setText("Listed once it has started.")
        else:
            self.tools_empty.setText("Not listed yet: it starts when a turn needs its tools. "
                                     "Test starts it now and lists them.")
        self.tools_empty.setVisible(not tools)

    def _update_buttons(self) -> None:
        adding = self.stack.currentWidget() is self.add_form
        has = self.current is not None and not adding
        self.remove_button.setEnabled(has and "save" not in self.busy)
        self.test_button.setEnabled(has and "test" not in self.busy)
        self.enabled_check.setEnabled(has and "save" not in self.busy)
        self.approval_combo.setEnabled(has and "save" not in self.busy)
        for _edit, button in self.key_rows.values():
            button.setEnabled("key" not in self.busy)
        self.save_button.setEnabled("save" not in self.busy)
        self.form_test_button.setEnabled("test" not in self.busy)

    # --- changing a server -------------------------------------------------------------

    def _on_enabled_clicked(self, on: bool) -> None:
        if self.current is not None:
            self.set_enabled(self.current, on)

    def set_enabled(self, name: str, on: bool) -> None:
        """Enables or disables `name` (config.set); the backend starts or stops it."""
        self._save({"mcp": {"servers": {name: {"enabled": on}}}},
                   f"Enabled “{name}”: its tools are offered from the next turn." if on else
                   f"Disabled “{name}”: stopped; the model no longer sees its tools.")

    def _on_approval_chosen(self, index: int) -> None:
        if self.current is not None:
            self.set_approval(self.current, str(self.approval_combo.itemData(index)))

    def set_approval(self, name: str, approval: str) -> None:
        words = "its calls run without asking" if approval == "trusted" else "each call asks first"
        self._save({"mcp": {"servers": {name: {"approval": approval}}}},
                   f"Saved: {words}.")

    def _tool_menu(self, at: QPoint) -> None:
        item = self.tools_tree.itemAt(at) or self.tools_tree.currentItem()
        if item is None or self.current is None or "save" in self.busy:
            return
        server, tool = self.current, str(item.data(0, Qt.ItemDataRole.UserRole))
        config = self.configs.get(server)
        if config is None:
            return
        own = config.tools.get(tool)
        hidden = own is not None and not own.enabled
        menu = QMenu(self.tools_tree)
        menu.setAccessibleName(f"Tool {tool}")
        choices: list[tuple[str, dict[str, Any] | None, bool]] = [
            ("Ask before each call", {"approval": "ask"},
             own is not None and own.approval == "ask"),
            ("Run without asking (trusted)", {"approval": "trusted"},
             own is not None and own.approval == "trusted"),
            (f"As the server says ({'trusted' if config.approval == 'trusted' else 'ask'})",
             {"approval": None}, own is None or own.approval is None),
        ]
        for words, change, chosen in choices:
            action = menu.addAction(words)
            action.setCheckable(True)
            action.setChecked(chosen)
            action.triggered.connect(lambda _=False, c=change: self.set_tool(server, tool, c))
        menu.addSeparator()
        menu.addAction("Offer it to the model" if hidden else "Hide it from the model").triggered.connect(
            lambda _=False: self.set_tool(server, tool, {"enabled": None if hidden else False}))
        menu.exec(self.tools_tree.viewport().mapToGlobal(at))

    def set_tool(self, server: str, tool: str, change: dict[str, Any] | None) -> None:
        """Changes one tool's settings (`[mcp.servers.SERVER.tools.TOOL]`; None values fall
        back to the server's); trusting one needs the owner, as this app is."""
        if change is None:
            return
        words = {("approval", "ask"): f"“{tool}” asks before each call.",
                 ("approval", "trusted"): f"“{tool}” runs without asking.",
                 ("approval", None): f"“{tool}” follows the server's approval.",
                 ("enabled", False): f"“{tool}” is hidden from the model.",
                 ("enabled", None): f"“{tool}” is offered to the model again."}
        key, value = next(iter(change.items()))
        self._save({"mcp": {"servers": {server: {"tools": {tool: change}}}}},
                   words.get((key, value), "Saved."))

    def remove_selected(self) -> None:
        name = self.current
        if name is None or not self.remove_button.isEnabled():
            return
        if self.confirm(f"Remove the MCP server “{name}”?",
                        "It is stopped and its settings are deleted from config.toml; the model "
                        "no longer sees its tools. A key stored for it stays stored."):
            self.remove(name)

    def remove(self, name: str) -> None:
        """Deletes `[mcp.servers.NAME]` (`mcp.servers.NAME: null`)."""
        self._save({"mcp": {"servers": {name: None}}}, f"Removed “{name}”.")

    def _save(self, patch: dict[str, Any], done: str) -> None:
        if "save" in self.busy:
            return
        _say(self.save_label, "Saving…")
        self._go("save", self._set(patch, done), self._show_save_error)

    async def _set(self, patch: dict[str, Any], done: str) -> None:
        try:
            config = await self.link.call(ConfigSet(patch=patch))
        except RpcError as exc:
            if self._alive():
                self._show_save_error(mcp_error_words(exc))
                self._show_details()  # the checkbox and combo back to what is saved
            return
        if not self._alive():
            return
        self.on_config(config)
        _say(self.save_label, done)
        emit(self.saved, config)

    # --- adding one --------------------------------------------------------------------

    def start_add(self) -> None:
        """Shows the empty add form."""
        for edit in (self.name_edit, self.command_edit, self.url_edit, self.key_to_edit,
                     self.key_edit):
            edit.clear()
        self.kind_combo.setCurrentIndex(0)
        self.new_approval_combo.setCurrentIndex(0)
        self._form_problem("")
        self.form_result.setText("")
        self.stack.setCurrentWidget(self.add_form)
        self.table.blockSignals(True)  # no server is selected while a new one is made
        self.table.setCurrentIndex(QModelIndex())
        self.table.clearSelection()
        self.table.blockSignals(False)
        self._update_buttons()
        self.name_edit.setFocus()

    def cancel_add(self) -> None:
        if self.stack.currentWidget() is self.add_form:
            self.key_edit.clear()
            self.stack.setCurrentWidget(self.details if self.current is not None else self.empty_label)
            names = self.names()
            if self.current in names:
                self.table.blockSignals(True)
                self.table.setCurrentItem(self._row(names.index(self.current)))
                self.table.blockSignals(False)
            self._update_buttons()
            self.table.setFocus()

    def adding(self) -> bool:
        return self.stack.currentWidget() is self.add_form

    def kind(self) -> Kind:
        return "http" if self.kind_combo.currentData() == "http" else "stdio"

    def _show_kind(self) -> None:
        http = self.kind() == "http"
        self.form.setRowVisible(self.command_edit, not http)
        self.form.setRowVisible(self.url_edit, http)
        label = self.form.labelForField(self.key_to_edit)
        if isinstance(label, QLabel):
            label.setText("Header" if http else "Variable")
        self.key_to_edit.setAccessibleName("Header" if http else "Variable")
        self.key_to_edit.setPlaceholderText(
            "optional, e.g. Authorization" if http else "optional, e.g. GITHUB_TOKEN")
        self.key_edit.setPlaceholderText(
            "the header's whole value, e.g. Bearer abc…" if http else "the variable's value")
        self._update_key_hint()

    def _update_key_hint(self) -> None:
        name = self.name_edit.text().strip() or "NAME"
        where = "header" if self.kind() == "http" else "environment variable"
        self.key_hint.setText(f"A key is stored in the system keyring as “{secret_name(name)}” "
                              f"(never in config.toml) and sent as that {where}.")

    def form_table(self) -> tuple[str, dict[str, Any]] | str:
        """(name, table) of the add form, or what is wrong with it."""
        name = self.name_edit.text().strip()
        if not name:
            return "Name: give the server a name."
        if name in self.configs:
            return f"Name: a server called “{name}” already exists."
        kind = self.kind()
        target = self.url_edit.text() if kind == "http" else self.command_edit.text()
        table = new_server_table(kind, target, self.key_to_edit.text(),
                                 bool(self.key_edit.text().strip()),
                                 str(self.new_approval_combo.currentData()), secret_name(name))
        return table if isinstance(table, str) else (name, table)

    def add_server(self) -> None:
        """Add server: stores the key (secret.set), then saves the server (config.set)."""
        if not self.adding() or "save" in self.busy:
            return
        self._update_key_hint()
        made = self.form_table()
        if isinstance(made, str):
            self._form_problem(made)
            return
        self._form_problem("")
        name, table = made
        self.form_result.setText(f"Adding “{name}”…")
        theme.restyle(self.form_result, tone="")
        self._go("save", self._add(name, table, self.key_edit.text()), self._form_problem)

    async def _add(self, name: str, table: dict[str, Any], key: str) -> None:
        if not await self._store_key(name, key):
            return
        try:
            config = await self.link.call(ConfigSet(patch={"mcp": {"servers": {name: table}}}))
        except RpcError as exc:
            if self._alive():
                self.form_result.setText("")
                self._form_problem(mcp_error_words(exc))
            return
        if not self._alive():
            return
        self.key_edit.clear()
        self.current = name
        self.stack.setCurrentWidget(self.details)
        self.on_config(config)
        self.select(name)
        _say(self.save_label, f"Added “{name}”.")
        emit(self.saved, config)
        if name in self.configs and self.configs[name].enabled:
            self.busy.discard("save")
            self.test_selected()  # whether it works, and its tools, at once

    async def _store_key(self, name: str, key: str) -> bool:
        """Stores a typed key under `mcp-NAME` (True when there was none, or it is stored)."""
        if not key.strip():
            return True
        secret = secret_name(name)
        try:
            result = await self.link.call(SecretSet(name=secret, value=key))
        except RpcError as exc:
            if self._alive():
                self.form_result.setText("")
                self._form_problem(f"The key was not stored: {describe(exc)}")
            return False
        if self._alive() and result.warning:
            self.key_hint.setText(f"Key stored as “{secret}”. Warning: {result.warning}.")
        return True

    def _form_problem(self, words: str) -> None:
        self.form_error.setText(words)
        self.form_error.setVisible(bool(words))
        field = words.split(":", 1)[0] if words else ""
        widgets = {"Name": self.name_edit, "Command": self.command_edit, "URL": self.url_edit,
                   "Header": self.key_to_edit, "Variable": self.key_to_edit, "Key": self.key_edit}
        for label, widget in widgets.items():
            theme.restyle(widget, problem=label == field)
        if field in widgets:
            widgets[field].setFocus()
        if words:
            emit(self.failed, words)

    # --- mcp.test ----------------------------------------------------------------------

    def test_selected(self) -> None:
        """Test: `mcp.test {name}`, the saved server (re)started, its tools listed."""
        name = self.current
        if name is None or "test" in self.busy or self.adding():
            return
        _say(self.test_label, f"Testing “{name}”: starting it and listing its tools…")
        self.test_button.setText("Testing…")
        self.test_progress.show()
        self._go("test", self._test(McpTest(name=name), self._show_test, self.test_label),
                 lambda words: self._test_failed(name, words, self.test_label))

    def test_form(self) -> None:
        """Test on the add form: `mcp.test {name, server_config}`; nothing is saved (a typed
        key is stored first, as `mcp-NAME`: keys only travel through secret.set)."""
        if "test" in self.busy:
            return
        made = self.form_table()
        if isinstance(made, str):
            self._form_problem(made)
            return
        self._form_problem("")
        name, table = made
        self.form_result.setText(f"Testing “{name}” as the form describes it (not saved): "
                                 "starting it and listing its tools…")
        theme.restyle(self.form_result, tone="")
        self.form_progress.show()
        key = self.key_edit.text()

        async def test() -> None:
            if await self._store_key(name, key):
                await self._test(McpTest(name=name, server_config=table), self._show_form_test,
                                 self.form_result)

        self._go("test", test(), lambda words: self._test_failed(name, words, self.form_result))

    async def _test(self, request: McpTest, show: Callable[[p.McpTestResult], None],
                    label: QLabel) -> None:
        try:
            result = await self.link.call(request, timeout=TEST_TIMEOUT_S)
        except RpcError as exc:
            self._test_failed(request.name, mcp_error_words(exc), label)
            return
        if self._alive():
            show(result)
            emit(self.tested, result)

    def _show_test(self, result: p.McpTestResult) -> None:
        text, tone = test_words(result)
        _say(self.test_label, text, tone)
        if result.server.name in self.configs:
            self.statuses[result.server.name] = result.server
            self._refresh()

    def _show_form_test(self, result: p.McpTestResult) -> None:
        text, tone = test_words(result)
        tools = ", ".join(t.name for t in result.server.tools or [])
        _say(self.form_result, f"{text}{f' Tools: {tools}.' if tools else ''}", tone)

    def _test_failed(self, name: str, words: str, label: QLabel) -> None:
        if not self._alive():
            return
        _say(label, f"Failed: “{name}”: {words}", "danger")
        emit(self.failed, words)
        config = self.configs.get(name)
        transport = config.transport if config is not None and not self.adding() else self.kind()
        emit(self.tested, p.McpTestResult(
            ok=False, latency_ms=0, error=words,
            server=p.McpServerStatus(name=name, transport=transport, state="failed", error=words)))

    # --- bookkeeping -------------------------------------------------------------------

    def _go(self, op: str, coro: Coroutine[Any, Any, None], on_error: Callable[[str], None]) -> None:
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
            self.test_button.setText("&Test")
            self.test_progress.hide()
            self.form_progress.hide()
        self._update_buttons()

    def _show_status(self, words: str, tone: str) -> None:
        self.status_label.setText(words)
        theme.restyle(self.status_label, tone=tone)
        self.status_label.setVisible(bool(words))

    def _show_list_error(self, words: str) -> None:
        self._show_status(f"Could not list the MCP servers: {words}", "danger")
        emit(self.failed, words)

    def _show_save_error(self, words: str) -> None:
        _say(self.save_label, f"Not saved: {words}", "danger")
        emit(self.failed, words)

    def _alive(self) -> bool:
        return shiboken6.isValid(self)


def _busy_bar() -> QProgressBar:
    """A thin bar that moves while a test runs (hidden until then)."""
    bar = QProgressBar()
    bar.setRange(0, 0)
    bar.setAccessibleName("Testing")
    bar.setMaximumHeight(8)
    bar.setTextVisible(False)
    bar.hide()
    return bar


def _words(selectable: bool = False) -> QLabel:
    """A label for words from the server or the backend: wrapped, never read as markup."""
    label = QLabel()
    label.setWordWrap(True)
    label.setTextFormat(Qt.TextFormat.PlainText)
    if selectable:
        label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    return label
