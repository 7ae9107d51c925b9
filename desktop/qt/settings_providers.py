"""The settings dialog's Providers page: the providers configured (Add…, Remove) beside the
form of the one shown (`settings_provider_form.ProviderForm`), its API key
(`settings_provider_key.KeyBox`) and the connection test (`settings_probe.ConnectionTest`).

Save sends `config.set {patch}` with only what the person changed (a cleared field is null:
the backend's default applies), so settings the form does not show (`api_key_env`,
`request_timeout_s`, `max_tokens_field`, `model_path`, `tools`) stay as they are in
config.toml; Remove is `providers.NAME: null` with the references to it that would otherwise
make the backend refuse the patch.  Test sends the form as it stands (`provider_config`, and a
key typed but not saved as `api_key`): what is tested is what Save would keep, without saving
it.  A refusal names its field (`data.field`), which the form marks.  What the form shows,
which controls take a click and what each sends is decided in `desktop/state/providers.py`.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

import shiboken6
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QGroupBox, QHBoxLayout, QListWidget, QListWidgetItem, QPushButton, QVBoxLayout

from desktop.qt.compat import emit
from desktop.qt.screens import question
from desktop.qt.settings_probe import ConnectionTest
from desktop.qt.settings_provider_form import ProviderForm
from desktop.qt.settings_provider_key import KeyBox
from desktop.qt.settings_rules import Confirm, Run
from desktop.state.providers import (
    Change,
    Controls,
    Fill,
    Problem,
    ProviderSettings,
    failed_test,
    refusal,
    remove_question,
)
from desktop.state.settings import error_words
from shared import protocol as p
from shared.client import InvalidParams, RpcError
from shared.config import ConfigView
from shared.methods import ConfigSet, ProviderTest

TEST_TIMEOUT_S = 90.0  # provider.test waits up to 60 s for the provider itself

OnConfig = Callable[[ConfigView, bool], None]  # config.set answered: the dialog shows it (refill?)


class ProvidersPage(QGroupBox):
    """The list of providers on the left, the one shown on the right."""

    saved = Signal(object)  # the ConfigView config.set answered (a provider saved or removed)
    key_saved = Signal(object)  # secret.set's SecretSetResult (never the key)
    tested = Signal(object)  # provider.test's result (an RPC failure as ok false, kind "rpc")
    failed = Signal(str)  # an error shown, in the words shown
    said = Signal(str)  # what a Save or Remove did, for the dialog's status line

    def __init__(self, link: Any, state: ProviderSettings, run: Run, confirm: Confirm,
                 on_config: OnConfig, reload_config: Callable[[], None]) -> None:
        """`state`: what the page knows (its `busy` is the dialog's); `run`: the dialog's spawn
        with busy bookkeeping; `confirm`: its yes/no question; `on_config`: a config
        config.set answered, shown everywhere in the dialog; `reload_config`: fetches it again."""
        super().__init__("Model providers")
        self.link = link
        self.state = state
        self.run = run
        self.confirm = confirm
        self.on_config = on_config
        self.reload_config = reload_config
        row = QHBoxLayout(self)
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
        self.form = ProviderForm()
        right.addWidget(self.form)
        self.key_box = KeyBox(self)
        right.addWidget(self.key_box)
        self.test_box = ConnectionTest()  # provider.test of the form as it stands (saved or not)
        right.addWidget(self.test_box)
        row.addLayout(right, 2)
        self._connect()
        self.update_controls()

    def _connect(self) -> None:
        self.form.kind_changed.connect(self.update_controls)
        self.form.save_button.clicked.connect(self.save_provider)
        self.form.revert_button.clicked.connect(self.show_current)
        self.test_box.button.clicked.connect(self.test_provider)
        self.key_box.saved.connect(self.key_saved)
        self.key_box.failed.connect(self.failed)

    # --- what it shows -------------------------------------------------------------------

    def show_config(self, config: ConfigView, refill: bool) -> None:
        """Shows `config` (the effective one).  `refill` False keeps the form as the person
        left it (unsaved edits, a new provider) and updates only the list and key status."""
        fill = self.state.applied(config, refill)
        self._list()
        if fill is not None:
            self._show(fill)
        else:
            self.key_box.key_status_label.setText(self.state.key_status())
            self.update_controls()

    def _list(self) -> None:
        """The providers, a new one not saved yet last; the one the form shows selected."""
        rows = self.state.rows()
        self.provider_list.blockSignals(True)
        self.provider_list.clear()
        for row in rows:
            item = QListWidgetItem(row.text)
            item.setData(Qt.ItemDataRole.UserRole, row.name)
            self.provider_list.addItem(item)
        selected = self.state.selected()
        names = [row.name for row in rows]
        if selected in names:
            self.provider_list.setCurrentRow(names.index(selected))
        else:
            self.provider_list.clearSelection()
            self.provider_list.setCurrentRow(-1)
        self.provider_list.blockSignals(False)

    def _show(self, fill: Fill) -> None:
        self.clear_problem()
        if fill.clears_test:
            self.test_box.clear()  # it was about another provider, or this one as it was
        if fill.clears_key:
            self.key_box.key_result_label.setText("")
        self.form.fill(fill.form)
        self.key_box.key_status_label.setText(self.state.key_status())
        self.update_controls()

    def show_current(self) -> None:
        """Revert: the saved settings of the provider shown (a new one's form goes)."""
        self._show(self.state.reverted())

    def _on_select(self, item: QListWidgetItem | None, _previous: QListWidgetItem | None) -> None:
        fill = self.state.picked(item.data(Qt.ItemDataRole.UserRole)) if item is not None else None
        if fill is not None:
            self._show(fill)

    def _on_add(self) -> None:
        """Add: asks the new provider's name (not modal: the loop keeps running)."""
        dialog = question(self.window(), "Add a provider", "Name of the new provider:")
        dialog.textValueSelected.connect(self.start_new_provider)
        dialog.open()
        self.add_dialog = dialog

    def start_new_provider(self, name: str) -> bool:
        """Shows an empty form for a provider called `name` (saved with Save)."""
        self.clear_problem()
        fill = self.state.started(name)
        if isinstance(fill, Problem):
            self.show_problem(fill)
            return False
        self._list()
        self._show(fill)
        self.form.fields["model"].setFocus()
        return True

    def _controls(self) -> Controls:
        return self.state.controls(self.form.kind(), self.form.fields["base_url"].text())

    def update_controls(self) -> None:
        controls = self._controls()
        self.form.enable(controls)
        self.key_box.enable(controls)
        self.remove_button.setEnabled(controls.remove)
        self.test_box.button.setEnabled(controls.test)
        self.add_button.setEnabled(controls.add)

    # --- Save and Remove -----------------------------------------------------------------

    def save_provider(self) -> None:
        """Save: applies the form with `config.set {patch}`."""
        if "save" in self.state.busy:
            return
        self.clear_problem()
        outcome = self.state.save(self.form.read())
        if isinstance(outcome, Problem):
            self.show_problem(outcome)
        elif isinstance(outcome, str):
            emit(self.said, outcome)
        else:
            self.go("save", self._save(outcome), self._show_form_error)

    def _on_remove(self) -> None:
        name = self.state.current
        if name is not None and self.confirm(*remove_question(name)):
            self.remove_provider(name)

    def remove_provider(self, name: str) -> None:
        """Deletes `name` (`providers.NAME: null`) and every reference to it in one patch."""
        if "save" in self.state.busy:
            return
        self.clear_problem()
        self.go("save", self._save(self.state.removal(name)), self._show_form_error)

    async def _save(self, change: Change) -> None:
        try:
            config = await self.link.call(ConfigSet(patch=change.patch))
        except RpcError as exc:
            if self._alive():
                self.refused(exc)
            return
        if not self._alive():
            return
        self.state.saved(change)
        self.on_config(config, True)
        emit(self.said, change.done)
        emit(self.saved, config)

    # --- provider.test -------------------------------------------------------------------

    def test_params(self) -> ProviderTest:
        """provider.test for the form as it stands (`ProviderSettings.test_request`)."""
        return self.state.test_request(self.form.read(), self.key_box.key_edit.text())

    def test_provider(self) -> None:
        """Test: `provider.test` on the form's values (saved or not), with a busy state."""
        if not self.state.may_test():
            return
        self.clear_problem()
        form = self.form.read()
        name = form.name.strip()
        request = self.state.test_request(form, self.key_box.key_edit.text())
        self.test_box.begin(self.state.testing_words(form))

        def failed(words: str) -> None:
            self._show_test(name, failed_test(name, words))

        self.go("test", self._test(name, request, failed), failed)

    async def _test(self, name: str, request: ProviderTest, failed: Callable[[str], None]) -> None:
        try:
            result = await self.link.call(request, timeout=TEST_TIMEOUT_S)
        except RpcError as exc:
            if self._alive() and isinstance(exc, InvalidParams):
                self.refused(exc)  # a form value the backend refused: marked there
            failed(error_words(exc))
            return
        self._show_test(name, result)

    def _show_test(self, name: str, result: p.ProviderTestResult) -> None:
        if self._alive():
            if self.state.shows_result(name):
                self.test_box.show_result(result)
            emit(self.tested, result)

    # --- bookkeeping ---------------------------------------------------------------------

    def go(self, op: str, coro: Coroutine[Any, Any, None], on_error: Callable[[str], None]) -> None:
        """The dialog's run ("save", "key", "test"): the controls wait while it is in flight."""
        self.run(op, coro, on_error)
        self.update_controls()

    def finished(self, op: str) -> None:
        """The dialog's operation `op` is over (and no longer busy)."""
        if op == "test":
            self.test_box.end(self._controls().test)
        self.update_controls()

    def refused(self, exc: RpcError) -> None:
        problem = refusal(exc)
        self.state.last_error_field = problem.field
        self.show_problem(problem)

    def show_problem(self, problem: Problem) -> None:
        self.form.show_problem(problem)
        emit(self.failed, problem.words)

    def clear_problem(self) -> None:
        self.form.clear_problem()
        self.state.last_error_field = None

    def _show_form_error(self, words: str) -> None:
        self.show_problem(Problem("", words))

    def _alive(self) -> bool:
        return shiboken6.isValid(self)
