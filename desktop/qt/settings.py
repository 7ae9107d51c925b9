"""The settings dialog: who answers now, and its pages: providers (their API keys and the
provider test), the approval mode, the "always allow" rules, MCP servers, the agent's memory,
its skills, messaging doors; the data folder, and whether the app starts at login
(`desktop/autostart.py`'s entry, which the checkbox reads and writes; this computer's only).

A client of the backend only: everything it shows comes from `config.get` / `config.set` (the
effective config, keys as "set"/"unset", and what turns use now) and the pages' own calls, each
scheduled with `spawn()` on the qasync loop so the GUI thread never waits.  The dialog lays the
pages out, loads the config and shows it on every page (after any page's `config.set` too), and
keeps the operations in flight (`busy`); each page makes its own changes:
`settings_providers.ProvidersPage` (its form, key and test in parts of their own, over
`desktop/state/providers.py`), `settings_approvals.ApprovalsPage`, `settings_rules.RulesPage`,
`settings_mcp.McpPage`, `settings_memory.MemoryPage`, `settings_skills.SkillsPage` (the
project skills of the session the main window shows, `session_of`),
`settings_messaging.MessagingPage`.  The
Providers and Approvals pages' controls and operations keep their names on the dialog.

Errors are the backend's: `config.set` answers INVALID_PARAMS (-32602) with `data.field` (a
dotted path such as `patch.providers.main.context_window`); the page names the field with its
label, rewords msgspec's phrasing, and marks the widget.  An API key is never shown back.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, Protocol, TypeVar

import shiboken6
from PySide6.QtCore import Qt, QUrl, Signal
from PySide6.QtGui import QDesktopServices, QShowEvent
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QHBoxLayout,
    QLabel,
    QMessageBox,
    QPushButton,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from desktop import autostart
from desktop.qt import theme
from desktop.qt.aio import spawn
from desktop.qt.compat import emit
from desktop.qt.settings_approvals import ApprovalsPage
from desktop.qt.settings_mcp import McpPage
from desktop.qt.settings_memory import MemoryPage
from desktop.qt.settings_messaging import MessagingPage
from desktop.qt.settings_providers import ProvidersPage
from desktop.qt.settings_rules import RulesPage
from desktop.qt.settings_skills import SessionOf, SkillsPage
from desktop.state.providers import ProviderSettings
from desktop.state.settings import answering
from shared.config import ConfigView, ProviderView
from shared.methods import ConfigGet, ProviderTest, Request

TABS = ("Providers", "Approvals", "Rules", "MCP servers", "Memory", "Skills", "Messaging")

R = TypeVar("R")


class Rpc(Protocol):
    """What the dialog needs of `desktop.link.Link` (a structural type, so this module does
    not import the link and its process plumbing)."""

    async def call(self, request: Request[R], timeout: float | None = 60.0) -> R: ...


class SettingsDialog(QDialog):
    """Settings for one backend (the one `link` talks to, whose data folder is `data_dir`)."""

    loaded = Signal(object)  # the effective config (ConfigView), after config.get or config.set
    saved = Signal(object)  # the ConfigView config.set returned (provider, removal, mode, MCP)
    key_saved = Signal(object)  # secret.set's SecretSetResult (never the key)
    tested = Signal(object)  # provider.test's result (an RPC failure as ok false, kind "rpc")
    failed = Signal(str)  # any error shown to the person, in the words shown

    def __init__(self, link: Rpc, data_dir: Path, parent: QWidget | None = None,
                 session_of: SessionOf = lambda: None) -> None:
        super().__init__(parent)
        self.link = link
        self.data_dir = data_dir
        self.session_of = session_of  # the session whose folder's project skills are listed
        self.busy: set[str] = set()  # in flight: load, save, key, test, mode, rules, mcp-…, …
        self.state = ProviderSettings(self.busy)  # the config, and the provider the form shows
        self.setWindowTitle("Turnkey settings")
        self._build()
        self.reload()

    # --- what it knows (desktop.state.providers.ProviderSettings) -----------------------------

    @property
    def config(self) -> ConfigView | None:
        """The effective config last shown (None until config.get answers)."""
        return self.state.config

    @property
    def current(self) -> str | None:
        """The saved provider the form shows (None: none, or a new one not saved yet)."""
        return self.state.current

    @property
    def last_error_field(self) -> str | None:
        """The backend's data.field of the last refusal the Providers page shows."""
        return self.state.last_error_field

    def providers(self) -> dict[str, ProviderView]:
        return self.state.providers()

    def default_provider(self) -> str | None:
        """The provider turns use: `default_provider`, or the only one configured."""
        return self.state.default_provider()

    def secret_name(self, name: str) -> str:
        """The name a provider's key is stored under: its api_key_secret, else its own name."""
        return self.state.secret_name(name)

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
        self._pages()
        self.tabs.currentChanged.connect(self._on_tab)
        bottom = QHBoxLayout()
        self.open_folder_button = QPushButton("Open data folder")
        self.open_folder_button.setToolTip(str(self.data_dir))
        self.open_folder_button.clicked.connect(self.open_data_folder)
        self.autostart_check = QCheckBox("Start in the background when I log in")
        self.autostart_check.setToolTip(
            "At login Turnkey starts with no window, in the system tray (without a tray, its "
            "service alone), so scheduled prompts and messaging keep running.")
        self.autostart_check.setChecked(autostart.enabled())
        self.autostart_check.toggled.connect(self.set_autostart)
        self.autostart_check.setVisible(sys.platform.startswith(("linux", "freebsd")))
        self.close_button = QPushButton("Close")
        self.close_button.clicked.connect(self.close)
        bottom.addWidget(self.open_folder_button)
        bottom.addWidget(self.autostart_check)
        bottom.addStretch(1)
        bottom.addWidget(self.close_button)
        root.addLayout(bottom)

    def _pages(self) -> None:
        """The pages, in the order of TABS; those that follow the backend's session-less
        events (`mcp.server`, `memory.changed`; `door.state` in desktop/qt/doors.py) hear them
        through the link."""
        def confirm(question: str, detail: str) -> bool:
            return self._confirm(question, detail)  # looked up now: tests replace _confirm

        self.providers_page = ProvidersPage(self.link, self.state, self._run, confirm,
                                            self._apply, lambda: self.reload(refill=False))
        self.approvals_page = ApprovalsPage(self.link, self.busy, self._run, self._apply)
        self.rules_page = RulesPage(self.link, self._run, confirm)
        self.mcp_page = McpPage(self.link, self._run, confirm, self._mcp_saved,
                                lambda: self.reload(refill=False))
        self.memory_page = MemoryPage(self.link, self._run)
        self.skills_page = SkillsPage(self.link, self._run, confirm,
                                      lambda: self.session_of())  # looked up now: replaceable
        # Its form sets a door up (door.test, door.set) and fills from the config loaded here.
        self.messaging_page = MessagingPage(
            self.link, lambda: self.reload(refill=False))  # type: ignore[arg-type]  # (a Link)
        self.loaded.connect(self.messaging_page.show_config)
        for title, page in zip(TABS, (self.providers_page, self.approvals_page, self.rules_page,
                                      self.mcp_page, self.memory_page, self.skills_page,
                                      self.messaging_page),
                               strict=True):
            self.tabs.addTab(page, title)
        received = getattr(self.link, "received", None)
        if received is not None:
            received.connect(self.mcp_page.on_event)
            received.connect(self.memory_page.on_event)
            received.connect(self.skills_page.on_event)
        for part in (self.providers_page, self.approvals_page):
            part.saved.connect(self.saved)
            part.failed.connect(self.failed)
        self.providers_page.key_saved.connect(self.key_saved)
        self.providers_page.tested.connect(self.tested)
        self.providers_page.said.connect(self.status_label.setText)
        self._name_parts()

    def _name_parts(self) -> None:
        """The pages' controls by the dialog's names for them (its callers and tests reach
        them so)."""
        page, form, key, test = (self.providers_page, self.providers_page.form,
                                 self.providers_page.key_box, self.providers_page.test_box)
        self.provider_list, self.add_button, self.remove_button = (
            page.provider_list, page.add_button, page.remove_button)
        self.name_edit, self.kind_combo, self.fields, self.default_check = (
            form.name_edit, form.kind_combo, form.fields, form.default_check)
        self.error_label, self.save_button, self.revert_button = (
            form.error_label, form.save_button, form.revert_button)
        self.key_status_label, self.key_edit, self.key_button, self.key_result_label = (
            key.key_status_label, key.key_edit, key.key_button, key.key_result_label)
        self.test_box, self.test_button, self.test_progress = test, test.button, test.progress
        self.test_result_label, self.test_details_button, self.test_detail_label = (
            test.result_label, test.details_button, test.detail_label)
        self.approval_combo = self.approvals_page.approval_combo
        self.approval_label = self.approvals_page.approval_label

    # --- loading -----------------------------------------------------------------------

    def reload(self, refill: bool = True) -> None:
        """Fetches the effective config (`config.get`) and shows it, and the rules."""
        self._run("load", self._load(refill), self._show_status_error)
        if refill:
            self.rules_page.reload()
            self.mcp_page.reload()
            self.memory_page.reload()
            self.skills_page.reload()

    def showEvent(self, event: QShowEvent) -> None:
        """Shown again (the app keeps one dialog): what answers and the rules may have changed
        meanwhile; the form keeps what the person left in it."""
        super().showEvent(event)
        self.autostart_check.blockSignals(True)  # the entry may have been removed elsewhere
        self.autostart_check.setChecked(autostart.enabled())
        self.autostart_check.blockSignals(False)
        if self.config is not None and "load" not in self.busy:
            self.reload(refill=False)
            if "rules" not in self.busy:
                self.rules_page.reload()
            self.mcp_page.reload()
            self.memory_page.reload()  # never over unsaved typing (desktop/state/memory.py)
            self.skills_page.reload()  # the session shown may have changed, or the folders

    def show_tab(self, name: str) -> None:
        """Opens a page of the dialog by its title ("Providers", "Approvals", "Rules",
        "MCP servers", "Memory", "Skills", "Messaging")."""
        self.tabs.setCurrentIndex(TABS.index(name))

    def _on_tab(self, index: int) -> None:
        if self.tabs.widget(index) is self.rules_page and "rules" not in self.busy:
            self.rules_page.reload()  # rules made by answers since the dialog opened
        elif self.tabs.widget(index) is self.skills_page and "skills" not in self.busy:
            self.skills_page.reload()  # skills the agent wrote since

    async def _load(self, refill: bool) -> None:
        config = await self.link.call(ConfigGet())
        if self._alive():
            self.status_label.setText(f"Settings of the Turnkey service for {self.data_dir}")
            self._apply(config, refill)

    def _apply(self, config: ConfigView, refill: bool = True) -> None:
        """Shows `config` (the effective one) on every page.  `refill` False keeps the provider
        form as the person left it (unsaved edits, a new provider)."""
        self.providers_page.show_config(config, refill)
        self.approvals_page.show_config(config)
        words, tone = answering(config)
        self.answering_label.setText(words)
        theme.restyle(self.answering_label, tone=tone)
        self.mcp_page.set_config(config)
        emit(self.loaded, config)

    def _mcp_saved(self, config: ConfigView) -> None:
        """The MCP page changed the config (config.set answered `config`)."""
        self._apply(config, refill=False)
        emit(self.saved, config)

    # --- the Providers and Approvals pages' operations, by the dialog's names ----------------

    def start_new_provider(self, name: str) -> bool:
        """Shows an empty form for a provider called `name` (saved with Save)."""
        return self.providers_page.start_new_provider(name)

    def form_values(self) -> dict[str, Any]:
        """The form as config values (`Form.values`)."""
        return self.providers_page.form.read().values()

    def provider_patch(self) -> dict[str, Any] | None:
        """The `config.set` patch for the form: only what changed (None: nothing did)."""
        return self.state.patch(self.providers_page.form.read())

    def save_provider(self) -> None:
        """Save: applies the form with `config.set {patch}`."""
        self.providers_page.save_provider()

    def remove_provider(self, name: str) -> None:
        """Deletes `name` (`providers.NAME: null`) and every reference to it in one patch."""
        self.providers_page.remove_provider(name)

    def save_key(self) -> None:
        """Save key: `secret.set {name, value}`; the field is cleared once stored."""
        self.providers_page.key_box.save_key()

    def test_params(self) -> ProviderTest:
        """provider.test for the form as it stands, a key typed but not saved included."""
        return self.providers_page.test_params()

    def test_provider(self) -> None:
        """Test: `provider.test` on the form's values (saved or not), with a busy state."""
        self.providers_page.test_provider()

    def set_approval_mode(self, mode: str) -> None:
        """Applies `approvals.mode` with config.set (the box follows the result)."""
        self.approvals_page.set_approval_mode(mode)

    def set_autostart(self, on: bool) -> None:
        """Writes or removes the login entry; the box then shows what the file says."""
        try:
            now = autostart.set_enabled(on, self.data_dir)
        except (OSError, ValueError) as exc:
            now = autostart.enabled()
            words = f"Could not {'add' if on else 'remove'} the login entry: {exc}"
            self.status_label.setText(words)
            emit(self.failed, words)
        self.autostart_check.blockSignals(True)
        self.autostart_check.setChecked(now)
        self.autostart_check.blockSignals(False)

    def open_data_folder(self) -> bool:
        """Opens the backend's data folder (config.toml, logs, secrets.json) in the file manager."""
        return bool(QDesktopServices.openUrl(QUrl.fromLocalFile(str(self.data_dir))))

    # --- bookkeeping -------------------------------------------------------------------

    def _run(self, op: str, coro: Coroutine[Any, Any, None], on_error: Callable[[str], None]) -> None:
        """spawn() with busy bookkeeping; `on_error` gets readable words for any failure."""
        self.busy.add(op)

        def error(words: str) -> None:
            if self._alive():
                on_error(words)

        task = spawn(coro, error)
        task.add_done_callback(lambda _t: self._finished(op))

    def _finished(self, op: str) -> None:
        self.busy.discard(op)
        if not self._alive():
            return
        if op in ("save", "key", "test"):
            self.providers_page.finished(op)
        elif op == "mode":
            self.approvals_page.finished()

    def _confirm(self, question: str, detail: str) -> bool:  # a seam: tests replace it
        answer = QMessageBox.question(self, "Turnkey", f"{question}\n\n{detail}")
        return answer == QMessageBox.StandardButton.Yes

    def _alive(self) -> bool:
        return shiboken6.isValid(self)

    def _show_status_error(self, words: str) -> None:
        self.status_label.setText(f"Could not load the settings: {words}")
        emit(self.failed, words)
