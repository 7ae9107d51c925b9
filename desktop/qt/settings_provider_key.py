"""The Providers page's API key: whether the provider shown has one and under which name it is
kept, a field to paste one (never echoed, cleared once stored), Save key, and where it went.

Save key is `secret.set {name, value}`; a provider whose settings name no key yet is then given
that name as its key name (`config.set`): the backend uses a stored key only for a provider
whose api_key_secret names it.  What is stored and said is decided in
`desktop/state/providers.py`; only the key's name and where it went are ever shown.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, Protocol

import shiboken6
from PySide6.QtCore import Signal
from PySide6.QtWidgets import QGroupBox, QHBoxLayout, QLabel, QLineEdit, QPushButton, QVBoxLayout, QWidget

from desktop.qt.compat import emit
from desktop.qt.settings_provider_form import ProviderForm
from desktop.state.providers import KEY_STORING, Controls, KeySave, ProviderSettings, key_stored_words
from desktop.state.settings import error_words
from shared.client import RpcError
from shared.config import ConfigView
from shared.methods import ConfigSet, SecretSet


class Host(Protocol):
    """What the key box needs of the Providers page."""

    link: Any
    state: ProviderSettings
    form: ProviderForm

    def go(self, op: str, coro: Coroutine[Any, Any, None], on_error: Callable[[str], None]) -> None:
        """Runs `coro` as the dialog's operation `op` (here "key")."""

    def on_config(self, config: ConfigView, refill: bool) -> None:
        """config.set answered `config`: the dialog shows it everywhere."""

    def reload_config(self) -> None:
        """Asks the dialog to fetch the effective config again."""

    def refused(self, exc: RpcError) -> None:
        """Says why the backend refused a call, marking the form's field it named."""


class KeyBox(QGroupBox):
    """The key status, the key field with Save key, and the result."""

    saved = Signal(object)  # secret.set's SecretSetResult (never the key)
    failed = Signal(str)  # an error shown, in the words shown

    def __init__(self, host: Host, parent: QWidget | None = None) -> None:
        super().__init__("API key", parent)
        self.host = host
        lay = QVBoxLayout(self)
        self.key_status_label = QLabel()
        self.key_status_label.setWordWrap(True)
        lay.addWidget(self.key_status_label)
        row = QHBoxLayout()
        self.key_edit = QLineEdit()
        self.key_edit.setEchoMode(QLineEdit.EchoMode.Password)
        self.key_edit.setPlaceholderText("paste the key here")
        self.key_edit.returnPressed.connect(self.save_key)
        self.key_button = QPushButton("Save key")
        self.key_button.clicked.connect(self.save_key)
        row.addWidget(self.key_edit, 1)
        row.addWidget(self.key_button)
        lay.addLayout(row)
        self.key_result_label = QLabel()
        self.key_result_label.setWordWrap(True)
        lay.addWidget(self.key_result_label)

    def enable(self, controls: Controls) -> None:
        self.key_edit.setEnabled(controls.key_edit)
        self.key_button.setEnabled(controls.key_button)

    def save_key(self) -> None:
        """Save key: `secret.set {name, value}`; the field is cleared once stored."""
        value = self.key_edit.text()
        plan = self.host.state.key_save(value)
        if plan is None:
            return
        if isinstance(plan, str):
            self.key_result_label.setText(plan)
            return
        self.key_button.setEnabled(False)
        self.key_result_label.setText(KEY_STORING)
        self.host.go("key", self._save(plan, value), self.show_error)

    async def _save(self, plan: KeySave, value: str) -> None:
        try:
            result = await self.host.link.call(SecretSet(name=plan.secret, value=value))
        except RpcError as exc:
            if self._alive():
                self.show_error(error_words(exc))
            return
        if not self._alive():
            return
        self.key_edit.clear()
        self.key_result_label.setText(key_stored_words(plan.secret, result))
        emit(self.saved, result)
        if plan.links:
            await self._link(plan)
        else:
            self.host.reload_config()  # the key status ("set") comes with the effective config

    async def _link(self, plan: KeySave) -> None:
        try:
            config = await self.host.link.call(ConfigSet(patch=ProviderSettings.key_link(plan)))
        except RpcError as exc:
            if self._alive():
                self.host.refused(exc)
            return
        if self._alive():
            key_name = self.host.form.fields["api_key_secret"]
            if self.host.state.shows_key_name(plan, key_name.text()):
                key_name.setText(plan.secret)  # the form matches the backend
            self.host.on_config(config, False)

    def show_error(self, words: str) -> None:
        self.key_result_label.setText(f"The key was not stored: {words}")
        emit(self.failed, words)

    def _alive(self) -> bool:
        return shiboken6.isValid(self)
