"""The Providers page's form: the provider's name, kind and settings, Default, the problem the
backend found (its field marked), Revert and Save.

Widgets only: what the form is filled with, which controls take a click and what Save sends
are decided in `desktop/state/providers.py`; the page reads the form as a `Form`.
"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from desktop.qt import theme
from desktop.qt.compat import emit
from desktop.state.providers import FORM_FIELDS, NEW_KIND, Controls, Form, Problem, key_name_hint
from desktop.state.settings import LABELS, base_url_hint, placeholder
from shared.config import PROVIDER_KINDS, ProviderKind


class ProviderForm(QWidget):
    """The right side of the Providers page, above the key and the test."""

    kind_changed = Signal()  # the person chose another kind (the base URL's hint follows)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        form = QFormLayout()
        self.name_edit = QLineEdit()
        self.name_edit.setReadOnly(True)  # named by Add…, never typed in here
        form.addRow(LABELS["name"], self.name_edit)
        self.kind_combo = QComboBox()
        for kind, info in PROVIDER_KINDS.items():
            self.kind_combo.addItem(info.label, kind)
        self.kind_combo.currentIndexChanged.connect(self._on_kind_changed)
        form.addRow(LABELS["kind"], self.kind_combo)
        self.fields: dict[str, QLineEdit] = {}
        for key in FORM_FIELDS:
            edit = QLineEdit()
            self.fields[key] = edit
            edit.setPlaceholderText(placeholder(key))
            form.addRow(LABELS[key], edit)
        self.default_check = QCheckBox("Use for new turns (the default provider)")
        form.addRow("", self.default_check)
        lay.addLayout(form)

        self.error_label = QLabel()
        self.error_label.setWordWrap(True)
        self.error_label.setProperty("tone", "danger")
        self.error_label.hide()
        lay.addWidget(self.error_label)

        actions = QHBoxLayout()
        self.save_button = QPushButton("Save")
        self.revert_button = QPushButton("Revert")
        actions.addStretch(1)
        actions.addWidget(self.revert_button)
        actions.addWidget(self.save_button)
        lay.addLayout(actions)

    def kind(self) -> ProviderKind:
        return self.kind_combo.currentData() or NEW_KIND

    def read(self) -> Form:
        """The form as it stands."""
        return Form(self.name_edit.text(), self.kind(),
                    {key: edit.text() for key, edit in self.fields.items()},
                    self.default_check.isChecked())

    def fill(self, form: Form) -> None:
        self.name_edit.setText(form.name)
        self.kind_combo.setCurrentIndex(max(self.kind_combo.findData(form.kind), 0))
        for key, edit in self.fields.items():
            edit.setText(form.text(key))
        self.fields["api_key_secret"].setPlaceholderText(key_name_hint(form.name))
        self.default_check.setChecked(form.default)
        self._on_kind_changed()

    def enable(self, controls: Controls) -> None:
        for w in (self.name_edit, self.kind_combo, *self.fields.values(), self.default_check,
                  self.revert_button):
            w.setEnabled(controls.form)
        self.fields["base_url"].setEnabled(controls.base_url)
        self.save_button.setEnabled(controls.save)

    def _on_kind_changed(self, _index: int = 0) -> None:
        self.fields["base_url"].setPlaceholderText(base_url_hint(self.kind()))
        emit(self.kind_changed)

    # --- the problem the backend found ------------------------------------------------------

    def show_problem(self, problem: Problem) -> None:
        """Says what is wrong (the backend's own words as its tooltip) and marks its field."""
        self.error_label.setText(problem.words)
        self.error_label.setToolTip(f"The service said: {problem.raw}" if problem.raw else "")
        self.error_label.show()
        widget = self._widget_for(problem.key)
        if widget is not None:
            theme.restyle(widget, problem=True)
            widget.setFocus()

    def clear_problem(self) -> None:
        self.error_label.hide()
        self.error_label.setText("")
        for w in (self.name_edit, self.kind_combo, *self.fields.values(), self.default_check):
            theme.restyle(w, problem=False)

    def _widget_for(self, key: str) -> QWidget | None:
        if key in self.fields:
            return self.fields[key]
        return {"name": self.name_edit, "kind": self.kind_combo,
                "default_provider": self.default_check}.get(key)
