"""The settings dialog: who answers now, providers, API keys, the provider test, the approval
mode, the "always allow" rules, MCP servers, the agent's memory, messaging doors, the data
folder.

A client of the backend only: everything it shows comes from `config.get` /
`config.set` (the effective config, keys as "set"/"unset", and what turns use now) and
`rules.list`, and every change goes through `config.set {patch}`, `secret.set`,
`provider.test` or `rules.delete`, each scheduled with `spawn()` on the qasync loop so the
GUI thread never waits.  Test sends the form as it stands (`provider_config`, and a key typed
but not saved as `api_key`): what is tested is what Save would keep, without saving it.

Patches carry only what the person changed: a cleared field sends `null`,
which `config.set` treats as "delete the key" (the backend's default then
applies), so settings the form does not show (`api_key_env`,
`request_timeout_s`, `max_tokens_field`, `model_path`, `tools`) are left as
they are in config.toml.  Removing a provider is the same mechanism
(`providers.NAME: null`), together with the references to it
(`default_provider`, `auxiliary_provider`, `fallback_providers`) that would
otherwise make the backend refuse the patch.

Errors are the backend's: `config.set` answers INVALID_PARAMS (-32602) with `data.field` (a
dotted path such as `patch.providers.main.context_window`); the dialog names
the field with its label, rewords msgspec's phrasing, and marks the widget.
An API key is never shown back: the field is a password field, it is
cleared once the key is stored, and only the name and where it went are shown.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, Protocol, TypeVar

import shiboken6
from PySide6.QtCore import Qt, QUrl, Signal
from PySide6.QtGui import QDesktopServices, QShowEvent
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMessageBox,
    QPushButton,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from desktop.qt import theme
from desktop.qt.aio import describe, spawn
from desktop.qt.compat import emit
from desktop.qt.screens import question
from desktop.qt.settings_mcp import McpPage
from desktop.qt.settings_memory import MemoryPage
from desktop.qt.settings_messaging import MessagingPage
from desktop.qt.settings_probe import ConnectionTest
from desktop.qt.settings_rules import RulesPage
from desktop.state.settings import (
    INT_FIELDS,
    LABELS,
    PRICE_FIELDS,
    TEXT_FIELDS,
    answering,
    base_url_hint,
    number,
    placeholder,
    reworded,
    same,
    shown,
)
from shared import protocol as p
from shared.client import InvalidParams, RpcError
from shared.config import APPROVAL_MODES, PROVIDER_KINDS, ConfigView, ProviderKind, ProviderView
from shared.methods import ConfigGet, ConfigSet, ProviderTest, Request, SecretSet

TEST_TIMEOUT_S = 90.0  # provider.test waits up to 60 s for the provider itself
TABS = ("Providers", "Approvals", "Rules", "MCP servers", "Memory", "Messaging")

R = TypeVar("R")


class Rpc(Protocol):
    """What the dialog needs of `desktop.link.Link` (a structural type, so this module does
    not import the link and its process plumbing)."""

    async def call(self, request: Request[R], timeout: float | None = 60.0) -> R: ...


class SettingsDialog(QDialog):
    """Settings for one backend (the one `link` talks to, whose data folder is `data_dir`)."""

    loaded = Signal(object)  # the effective config (ConfigView), after config.get or config.set
    saved = Signal(object)  # the ConfigView config.set returned (provider, removal, mode)
    key_saved = Signal(object)  # secret.set's SecretSetResult (never the key)
    tested = Signal(object)  # provider.test's result (an RPC failure as ok false, kind "rpc")
    failed = Signal(str)  # any error shown to the person, in the words shown

    def __init__(self, link: Rpc, data_dir: Path, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.link = link
        self.data_dir = data_dir
        self.config: ConfigView | None = None
        self.current: str | None = None  # the provider shown in the form; None: a new one
        self.busy: set[str] = set()  # in flight: load, save, key, test, mode, rules, revoke
        self.last_error_field: str | None = None  # the backend's data.field of the last error
        self.setWindowTitle("Turnkey settings")
        self._build()
        self.reload()

    # --- layout ------------------------------------------------------------------------

    def _build(self) -> None:
        root = QVBoxLayout(self)

        self.status_label = QLabel("Loading settings…")
        self.status_label.setWordWrap(True)
        root.addWidget(self.status_label)
        self.answering_label = QLabel()  # who answers new turns now (the offline model?)
        self.answering_label.setWordWrap(True)
        self.answering_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        root.addWidget(self.answering_label)
        self.tabs = QTabWidget()
        self.tabs.setAccessibleName("Settings pages")
        root.addWidget(self.tabs, 1)

        # Providers: a list on the left, the selected one's form on the right.
        providers = QGroupBox("Model providers")
        row = QHBoxLayout(providers)
        left = QVBoxLayout()
        self.provider_list = QListWidget()
        self.provider_list.currentItemChanged.connect(self._on_select)
        left.addWidget(self.provider_list)
        buttons = QHBoxLayout()
        self.add_button = QPushButton("Add…")
        self.add_button.clicked.connect(self._on_add)
        self.remove_button = QPushButton("Remove")
        self.remove_button.clicked.connect(self._on_remove)
        buttons.addWidget(self.add_button)
        buttons.addWidget(self.remove_button)
        left.addLayout(buttons)
        row.addLayout(left, 1)

        right = QVBoxLayout()
        form = QFormLayout()
        self.name_edit = QLineEdit()
        self.name_edit.setReadOnly(True)
        form.addRow(LABELS["name"], self.name_edit)
        self.kind_combo = QComboBox()
        for kind, info in PROVIDER_KINDS.items():
            self.kind_combo.addItem(info.label, kind)
        self.kind_combo.currentIndexChanged.connect(self._on_kind_changed)
        form.addRow(LABELS["kind"], self.kind_combo)
        self.fields: dict[str, QLineEdit] = {}
        for key in ("base_url", "model", *INT_FIELDS, *PRICE_FIELDS, "api_key_secret"):
            edit = QLineEdit()
            self.fields[key] = edit
            edit.setPlaceholderText(placeholder(key))
            form.addRow(LABELS[key], edit)
        self.default_check = QCheckBox("Use for new turns (the default provider)")
        form.addRow("", self.default_check)
        right.addLayout(form)

        self.error_label = QLabel()
        self.error_label.setWordWrap(True)
        self.error_label.setProperty("tone", "danger")
        self.error_label.hide()
        right.addWidget(self.error_label)

        actions = QHBoxLayout()
        self.save_button = QPushButton("Save")
        self.save_button.clicked.connect(self.save_provider)
        self.revert_button = QPushButton("Revert")
        self.revert_button.clicked.connect(self._show_current)
        actions.addStretch(1)
        actions.addWidget(self.revert_button)
        actions.addWidget(self.save_button)
        right.addLayout(actions)

        # API key of the selected provider.
        keybox = QGroupBox("API key")
        keylay = QVBoxLayout(keybox)
        self.key_status_label = QLabel()
        self.key_status_label.setWordWrap(True)
        keylay.addWidget(self.key_status_label)
        keyrow = QHBoxLayout()
        self.key_edit = QLineEdit()
        self.key_edit.setEchoMode(QLineEdit.EchoMode.Password)
        self.key_edit.setPlaceholderText("paste the key here")
        self.key_edit.returnPressed.connect(self.save_key)
        self.key_button = QPushButton("Save key")
        self.key_button.clicked.connect(self.save_key)
        keyrow.addWidget(self.key_edit, 1)
        keyrow.addWidget(self.key_button)
        keylay.addLayout(keyrow)
        self.key_result_label = QLabel()
        self.key_result_label.setWordWrap(True)
        keylay.addWidget(self.key_result_label)
        right.addWidget(keybox)

        # provider.test of the form as it stands (saved or not).
        self.test_box = ConnectionTest()
        self.test_button = self.test_box.button
        self.test_button.clicked.connect(self.test_provider)
        self.test_progress = self.test_box.progress
        self.test_result_label = self.test_box.result_label
        self.test_details_button = self.test_box.details_button
        self.test_detail_label = self.test_box.detail_label
        right.addWidget(self.test_box)

        row.addLayout(right, 2)
        self.tabs.addTab(providers, TABS[0])

        # General settings.
        general = QGroupBox("Approvals")
        genlay = QFormLayout(general)
        self.approval_combo = QComboBox()
        for mode, label in APPROVAL_MODES.items():
            self.approval_combo.addItem(label, mode)
        self.approval_combo.activated.connect(self._on_approval_chosen)  # the person's choice only
        genlay.addRow(LABELS["mode"], self.approval_combo)
        self.approval_label = QLabel()
        self.approval_label.setWordWrap(True)
        genlay.addRow("", self.approval_label)
        approvals_page = QWidget()
        approvals_lay = QVBoxLayout(approvals_page)
        approvals_lay.addWidget(general)
        approvals_lay.addStretch(1)
        self.tabs.addTab(approvals_page, TABS[1])

        self.rules_page = RulesPage(self.link, self._run, lambda q, d: self._confirm(q, d))
        self.tabs.addTab(self.rules_page, TABS[2])
        self.mcp_page = McpPage(self.link, self._run, lambda q, d: self._confirm(q, d),
                                self._mcp_saved, lambda: self.reload(refill=False))
        self.tabs.addTab(self.mcp_page, TABS[3])
        # The servers' states live: `mcp.server` events (session-less) through the link.
        received = getattr(self.link, "received", None)
        if received is not None:
            received.connect(self.mcp_page.on_event)
        # The agent's notebooks, live on `memory.changed` (session-less) too.
        self.memory_page = MemoryPage(self.link, self._run)
        self.tabs.addTab(self.memory_page, TABS[4])
        if received is not None:
            received.connect(self.memory_page.on_event)
        # The backend's messaging doors (Matrix), live on `door.state` (desktop/qt/doors.py).
        # Its form sets a door up (door.test, door.set) and fills from the config loaded here.
        self.messaging_page = MessagingPage(
            self.link, lambda: self.reload(refill=False))  # type: ignore[arg-type]  # (a Link)
        self.tabs.addTab(self.messaging_page, TABS[5])
        self.loaded.connect(self.messaging_page.show_config)
        self.tabs.currentChanged.connect(self._on_tab)

        bottom = QHBoxLayout()
        self.open_folder_button = QPushButton("Open data folder")
        self.open_folder_button.setToolTip(str(self.data_dir))
        self.open_folder_button.clicked.connect(self.open_data_folder)
        self.close_button = QPushButton("Close")
        self.close_button.clicked.connect(self.close)
        bottom.addWidget(self.open_folder_button)
        bottom.addStretch(1)
        bottom.addWidget(self.close_button)
        root.addLayout(bottom)

        self._set_form_enabled(False)
        self.add_button.setEnabled(False)
        self.approval_combo.setEnabled(False)

    # --- loading -----------------------------------------------------------------------

    def reload(self, refill: bool = True) -> None:
        """Fetches the effective config (`config.get`) and shows it, and the rules."""
        self._run("load", self._load(refill), self._show_status_error)
        if refill:
            self.rules_page.reload()
            self.mcp_page.reload()
            self.memory_page.reload()

    def showEvent(self, event: QShowEvent) -> None:
        """Shown again (the app keeps one dialog): what answers and the rules may have changed
        meanwhile; the form keeps what the person left in it."""
        super().showEvent(event)
        if self.config is not None and "load" not in self.busy:
            self.reload(refill=False)
            if "rules" not in self.busy:
                self.rules_page.reload()
            self.mcp_page.reload()
            self.memory_page.reload()  # never over unsaved typing (desktop/state/memory.py)

    def show_tab(self, name: str) -> None:
        """Opens a page of the dialog by its title ("Providers", "Approvals", "Rules",
        "MCP servers", "Memory", "Messaging")."""
        self.tabs.setCurrentIndex(TABS.index(name))

    def _on_tab(self, index: int) -> None:
        if self.tabs.widget(index) is self.rules_page and "rules" not in self.busy:
            self.rules_page.reload()  # rules made by answers since the dialog opened

    async def _load(self, refill: bool) -> None:
        config = await self.link.call(ConfigGet())
        if self._alive():
            self.status_label.setText(f"Settings of the Turnkey service for {self.data_dir}")
            self._apply(config, refill)

    def _apply(self, config: ConfigView, refill: bool = True) -> None:
        """Shows `config` (the effective one).  `refill` False keeps the form as the person
        left it (unsaved edits, a new provider) and updates only the list and key status."""
        self.config = config
        providers = self.providers()
        names = sorted(providers)
        default = self.default_provider()
        if refill or (self.current is not None and self.current not in names):
            keep = self.current
            self.current = keep if keep in names else (
                default if default in names else (names[0] if names else None))
            refill = True
        self.provider_list.blockSignals(True)
        self.provider_list.clear()
        for name in names:
            item = QListWidgetItem(self._item_text(name, default))
            item.setData(Qt.ItemDataRole.UserRole, name)
            self.provider_list.addItem(item)
        if self.current in names:
            self.provider_list.setCurrentRow(names.index(self.current))
        self.provider_list.blockSignals(False)
        if refill:
            self._show_current()
        elif self.current is not None:
            self._show_key_status(self.current, providers[self.current])
        index = self.approval_combo.findData(config.approvals.mode)
        if index >= 0:
            self.approval_combo.setCurrentIndex(index)
        self.approval_combo.setEnabled("mode" not in self.busy)
        self.add_button.setEnabled(True)
        words, tone = answering(config)
        self.answering_label.setText(words)
        theme.restyle(self.answering_label, tone=tone)
        self.mcp_page.set_config(config)
        emit(self.loaded, config)

    def _mcp_saved(self, config: ConfigView) -> None:
        """The MCP page changed the config (config.set answered `config`)."""
        self._apply(config, refill=False)
        emit(self.saved, config)

    def providers(self) -> dict[str, ProviderView]:
        return dict(self.config.providers) if self.config is not None else {}

    def default_provider(self) -> str | None:
        """The provider turns use: `default_provider`, or the only one configured."""
        chosen = self.config.provider() if self.config is not None else None
        return chosen[0] if chosen is not None else None

    @staticmethod
    def _item_text(name: str, default: str | None) -> str:
        return f"{name} (default)" if name == default else name

    # --- the form ----------------------------------------------------------------------

    def _on_select(self, item: QListWidgetItem | None, _previous: QListWidgetItem | None) -> None:
        if item is None:
            return
        self.current = item.data(Qt.ItemDataRole.UserRole)
        self._show_current()
        self.test_box.clear()
        self.key_result_label.setText("")

    def _show_current(self) -> None:
        """Fills the form with the saved settings of the selected provider (or clears it)."""
        self._clear_problem()
        prov = self.providers().get(self.current or "")
        if prov is None:
            self.current = None
            self._fill_form("", None)
            self._set_form_enabled(False)
            self.key_status_label.setText("")
            return
        assert self.current is not None
        self._fill_form(self.current, prov)
        self._set_form_enabled(True)
        self.name_edit.setReadOnly(True)
        self._show_key_status(self.current, prov)

    def _fill_form(self, name: str, prov: ProviderView | None) -> None:
        if name != self.name_edit.text().strip():
            self.test_box.clear()  # another provider's form: the last result was not about it
        self.name_edit.setText(name)
        index = self.kind_combo.findData(prov.kind if prov is not None else "openai")
        self.kind_combo.setCurrentIndex(max(index, 0))
        for key, edit in self.fields.items():
            edit.setText(shown(getattr(prov, key)) if prov is not None else "")
        self.fields["api_key_secret"].setPlaceholderText(name or "the provider's name")
        self.default_check.setChecked(bool(name) and name == self.default_provider())
        self._on_kind_changed()

    def _on_kind_changed(self, _index: int = 0) -> None:
        kind: ProviderKind = self.kind_combo.currentData() or "openai"
        url = self.fields["base_url"]
        url.setPlaceholderText(base_url_hint(kind))
        if PROVIDER_KINDS[kind].base_url is None:
            url.setEnabled(bool(url.text()))  # a stale URL stays visible so it can be cleared
        else:
            url.setEnabled(self.name_edit.isEnabled())

    def _set_form_enabled(self, on: bool) -> None:
        for w in (self.name_edit, self.kind_combo, *self.fields.values(), self.default_check,
                  self.save_button, self.revert_button):
            w.setEnabled(on)
        saved = on and self.current is not None
        self.remove_button.setEnabled(saved)
        self.key_edit.setEnabled(on)  # a new provider's key can be tested before it is saved
        self.key_button.setEnabled(saved and "key" not in self.busy)
        self.test_button.setEnabled(on and "test" not in self.busy)
        if on:
            self._on_kind_changed()

    def _show_key_status(self, name: str, prov: ProviderView) -> None:
        secret = prov.api_key_secret or name
        words = "a key is set" if prov.api_key == "set" else "no key is set"
        text = f"Key status: {words}. This provider's key is kept under the name “{secret}”."
        if prov.api_key_env:
            text += f" The environment variable {prov.api_key_env}, when set, is used instead."
        if not prov.api_key_secret:
            text += " Saving a key also sets this provider's key name to its own name."
        self.key_status_label.setText(text)

    def _on_add(self) -> None:
        """Add: asks the new provider's name (not modal: the loop keeps running)."""
        dialog = question(self, "Add a provider", "Name of the new provider:")
        dialog.textValueSelected.connect(self.start_new_provider)
        dialog.open()
        self.add_dialog = dialog

    def start_new_provider(self, name: str) -> bool:
        """Shows an empty form for a provider called `name` (saved with Save)."""
        name = name.strip()
        self._clear_problem()
        if not name:
            self._show_problem("name", "Name: give the provider a name.")
            return False
        if name in self.providers():
            self._show_problem("name", f"Name: a provider called “{name}” already exists.")
            return False
        self.provider_list.blockSignals(True)
        self.provider_list.clearSelection()
        self.provider_list.setCurrentRow(-1)
        self.provider_list.blockSignals(False)
        self.current = None
        self._fill_form(name, None)
        self.test_box.clear()
        self.key_result_label.setText("")
        self._set_form_enabled(True)
        self.default_check.setChecked(not self.providers())
        self.key_status_label.setText("Save the provider first, then its key.")
        self.fields["model"].setFocus()
        return True

    def form_values(self) -> dict[str, Any]:
        """The form as config values: "" is None (the backend's default); numbers parsed
        where they parse, otherwise left as text so the backend names the field."""
        values: dict[str, Any] = {"kind": self.kind_combo.currentData()}
        for key in TEXT_FIELDS:
            values[key] = self.fields[key].text().strip() or None
        for key in INT_FIELDS:
            values[key] = number(self.fields[key].text(), integer=True)
        for key in PRICE_FIELDS:
            values[key] = number(self.fields[key].text(), integer=False)
        return values

    def provider_patch(self) -> dict[str, Any] | None:
        """The `config.set` patch for the form: only what changed (None: nothing did)."""
        name = self.name_edit.text().strip()
        old = self.providers().get(name) if self.current is not None else None
        values = self.form_values()
        table: dict[str, Any]
        if old is None:  # a new provider: everything filled in
            table = {k: v for k, v in values.items() if v is not None}
        else:
            table = {k: v for k, v in values.items() if not same(v, getattr(old, k))}
        patch: dict[str, Any] = {"providers": {name: table}} if table or old is None else {}
        was_default = self.config is not None and self.config.default_provider == name
        if self.default_check.isChecked() and not was_default:
            patch["default_provider"] = name
        elif not self.default_check.isChecked() and was_default:
            patch["default_provider"] = None
        return patch or None

    def save_provider(self) -> None:
        """Save: applies the form with `config.set {patch}`."""
        if "save" in self.busy:
            return
        self._clear_problem()
        name = self.name_edit.text().strip()
        if not name:
            self._show_problem("name", "Name: give the provider a name.")
            return
        patch = self.provider_patch()
        if patch is None:
            self.status_label.setText(f"Nothing changed for “{name}”.")
            return
        self._run("save", self._save(patch, name, f"Saved “{name}”."), self._show_form_error)

    async def _save(self, patch: dict[str, Any], select: str | None, done: str) -> None:
        try:
            config = await self.link.call(ConfigSet(patch=patch))
        except RpcError as exc:
            if self._alive():
                self._show_rpc_error(exc)
            return
        if not self._alive():
            return
        self.current = select
        self._apply(config)
        self.status_label.setText(done)
        emit(self.saved, config)

    def _on_remove(self) -> None:
        name = self.current
        if name is None:
            return
        if self._confirm(f"Remove the provider “{name}”?",
                         "Its settings are deleted from config.toml. A key stored for it stays "
                         "stored (under its key name) until replaced."):
            self.remove_provider(name)

    def _confirm(self, question: str, detail: str) -> bool:  # a seam: tests replace it
        answer = QMessageBox.question(self, "Turnkey", f"{question}\n\n{detail}")
        return answer == QMessageBox.StandardButton.Yes

    def remove_provider(self, name: str) -> None:
        """Deletes `name` (`providers.NAME: null`) and every reference to it in one patch."""
        if "save" in self.busy:
            return
        self._clear_problem()
        patch: dict[str, Any] = {"providers": {name: None}}
        cfg = self.config
        if cfg is not None and cfg.default_provider == name:
            patch["default_provider"] = None
        if cfg is not None and cfg.auxiliary_provider == name:
            patch["auxiliary_provider"] = None
        fallbacks = list(cfg.fallback_providers) if cfg is not None else []
        if name in fallbacks:
            patch["fallback_providers"] = [f for f in fallbacks if f != name]
        self._run("save", self._save(patch, None, f"Removed “{name}”."), self._show_form_error)

    # --- API key -----------------------------------------------------------------------

    def secret_name(self, name: str) -> str:
        """The name a provider's key is stored under: its api_key_secret, else its own name."""
        prov = self.providers().get(name)
        return (prov.api_key_secret if prov is not None else None) or name

    def save_key(self) -> None:
        """Save key: `secret.set {name, value}`; the field is cleared once stored."""
        name = self.current
        if name is None:
            self.key_result_label.setText("Save the provider first, then its key (Test already "
                                          "uses the key as typed).")
            return
        if "key" in self.busy:
            return
        value = self.key_edit.text()
        if not value.strip():
            self.key_result_label.setText("Paste a key first.")
            return
        prov = self.providers().get(name)
        link_name = prov is None or not prov.api_key_secret
        self.key_button.setEnabled(False)
        self.key_result_label.setText("Storing the key…")
        self._run("key", self._save_key(name, self.secret_name(name), value, link_name),
                  self._show_key_error)

    async def _save_key(self, provider: str, secret: str, value: str, link_name: bool) -> None:
        try:
            result = await self.link.call(SecretSet(name=secret, value=value))
        except RpcError as exc:
            if self._alive():
                self._show_key_error(self._rpc_words(exc))
            return
        if not self._alive():
            return
        self.key_edit.clear()
        where = "the system keyring" if result.stored == "keyring" else "a file"
        text = f"Key stored in {where} under the name “{secret}”."
        if result.warning:
            text += f" Warning: {result.warning}."
        self.key_result_label.setText(text)
        emit(self.key_saved, result)
        # The backend uses a stored key only for providers whose api_key_secret names it.
        if link_name:
            patch = {"providers": {provider: {"api_key_secret": secret}}}
            try:
                config = await self.link.call(ConfigSet(patch=patch))
            except RpcError as exc:
                if self._alive():
                    self._show_rpc_error(exc)
                return
            if self._alive():
                if self.current == provider and not self.fields["api_key_secret"].text().strip():
                    self.fields["api_key_secret"].setText(secret)  # the form matches the backend
                self._apply(config, refill=False)
        else:
            self.reload(refill=False)  # the key status ("set") comes with the effective config

    # --- provider.test -----------------------------------------------------------------

    def test_params(self) -> ProviderTest:
        """provider.test for the form as it stands: its values as `provider_config` (merged
        over the saved provider, as Save would), and a key typed but not saved as `api_key`
        (used for this request only; the backend never keeps it)."""
        name = self.name_edit.text().strip()
        key = self.key_edit.text().strip()
        return ProviderTest(provider=name, provider_config=self.form_values(), api_key=key or None)

    def test_provider(self) -> None:
        """Test: `provider.test` on the form's values (saved or not), with a busy state."""
        name = self.name_edit.text().strip()
        if not name or not self.test_button.isEnabled() or "test" in self.busy:
            return
        self._clear_problem()
        request = self.test_params()
        unsaved = self.current is None or self.provider_patch() is not None
        self.test_box.begin(
            f"Testing “{name}”{' as the form shows it (not saved)' if unsaved else ''}: one "
            "short request (up to a minute)…")

        def failed(words: str) -> None:
            self._show_test(name, p.ProviderTestResult(
                ok=False, provider=name, model="", latency_ms=0,
                error=p.ProviderFailure(kind="rpc", message=words)))

        self._run("test", self._test(name, request, failed), failed)

    async def _test(self, name: str, request: ProviderTest, failed: Callable[[str], None]) -> None:
        try:
            result = await self.link.call(request, timeout=TEST_TIMEOUT_S)
        except RpcError as exc:
            if self._alive() and isinstance(exc, InvalidParams):
                self._show_rpc_error(exc)  # a form value the backend refused: marked there
            failed(self._rpc_words(exc))
            return
        self._show_test(name, result)

    def _show_test(self, name: str, result: p.ProviderTestResult) -> None:
        """Shows the result of testing `name` if the form still shows that provider (a person
        who switched to another meanwhile would read it as the other's)."""
        if self._alive():
            if self.name_edit.text().strip() == name:
                self.test_box.show_result(result)
            emit(self.tested, result)

    # --- approval mode -----------------------------------------------------------------

    def _on_approval_chosen(self, index: int) -> None:
        self.set_approval_mode(str(self.approval_combo.itemData(index)))

    def set_approval_mode(self, mode: str) -> None:
        """Applies `approvals.mode` with config.set (the combo follows the result)."""
        index = self.approval_combo.findData(mode)
        if index >= 0:
            self.approval_combo.setCurrentIndex(index)
        self.approval_combo.setEnabled(False)
        self.approval_label.setText("Saving…")
        self._run("mode", self._set_mode(mode), self._show_mode_error)

    async def _set_mode(self, mode: str) -> None:
        try:
            config = await self.link.call(ConfigSet(patch={"approvals": {"mode": mode}}))
        except RpcError as exc:
            if self._alive():
                self._show_mode_error(self._rpc_words(exc))
            return
        if not self._alive():
            return
        self.busy.discard("mode")
        self._apply(config, refill=False)
        self.approval_label.setText("Saved. Running turns use it from their next tool call.")
        emit(self.saved, config)

    # --- data folder -------------------------------------------------------------------

    def open_data_folder(self) -> bool:
        """Opens the backend's data folder (config.toml, logs, secrets.json) in the file manager."""
        return bool(QDesktopServices.openUrl(QUrl.fromLocalFile(str(self.data_dir))))

    # --- errors ------------------------------------------------------------------------

    def _run(self, op: str, coro: Coroutine[Any, Any, None], on_error: Callable[[str], None]) -> None:
        """spawn() with busy bookkeeping; `on_error` gets readable words for any failure."""
        self.busy.add(op)
        if op == "save":
            self.save_button.setEnabled(False)

        def error(words: str) -> None:
            if self._alive():
                on_error(words)

        task = spawn(coro, error)
        task.add_done_callback(lambda _t: self._finished(op))

    def _finished(self, op: str) -> None:
        self.busy.discard(op)
        if not self._alive():
            return
        if op == "save":
            self.save_button.setEnabled(self.name_edit.isEnabled())
        elif op == "key":
            self.key_button.setEnabled(self.current is not None)
        elif op == "test":
            self.test_box.end(self.name_edit.isEnabled())
        elif op == "mode":
            self.approval_combo.setEnabled(self.config is not None)

    def _alive(self) -> bool:
        return shiboken6.isValid(self)

    def _rpc_words(self, exc: RpcError) -> str:
        return reworded(exc.field, exc.message) if isinstance(exc, InvalidParams) else describe(exc)

    def _show_rpc_error(self, exc: RpcError) -> None:
        field = exc.field if isinstance(exc, InvalidParams) else ""
        self.last_error_field = field or None
        key = field.rsplit(".", 1)[-1] if field else ""
        self._show_problem(key, self._rpc_words(exc), exc.message)

    def _show_problem(self, key: str, words: str, raw: str = "") -> None:
        self.error_label.setText(words)
        self.error_label.setToolTip(f"The service said: {raw}" if raw else "")
        self.error_label.show()
        widget = self._widget_for(key)
        if widget is not None:
            theme.restyle(widget, problem=True)
            widget.setFocus()
        emit(self.failed, words)

    def _clear_problem(self) -> None:
        self.error_label.hide()
        self.error_label.setText("")
        self.last_error_field = None
        for w in (self.name_edit, self.kind_combo, *self.fields.values(), self.default_check):
            theme.restyle(w, problem=False)

    def _widget_for(self, key: str) -> QWidget | None:
        if key in self.fields:
            return self.fields[key]
        return {"name": self.name_edit, "kind": self.kind_combo,
                "default_provider": self.default_check}.get(key)

    def _show_form_error(self, words: str) -> None:
        self._show_problem("", words)

    def _show_status_error(self, words: str) -> None:
        self.status_label.setText(f"Could not load the settings: {words}")
        emit(self.failed, words)

    def _show_key_error(self, words: str) -> None:
        self.key_result_label.setText(f"The key was not stored: {words}")
        emit(self.failed, words)

    def _show_mode_error(self, words: str) -> None:
        self.approval_label.setText(f"Not saved: {words}")
        if self.config is not None:  # back to what the backend has
            index = self.approval_combo.findData(self.config.approvals.mode)
            if index >= 0:
                self.approval_combo.setCurrentIndex(index)
        emit(self.failed, words)
