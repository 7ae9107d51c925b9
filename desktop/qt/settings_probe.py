"""The settings dialog's connection test box: the Test button, a busy bar, the result in the
backend's words, and what the provider's server answered a click away ("Show details").

Widgets only: the dialog decides what to test (the form as it stands) and runs the call;
`desktop.state.settings.probe_words` says how a result reads.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QGroupBox, QHBoxLayout, QLabel, QProgressBar, QPushButton, QVBoxLayout, QWidget

from desktop.qt import theme
from desktop.state.settings import probe_words
from shared import protocol as p


class ConnectionTest(QGroupBox):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Connection test", parent)
        lay = QVBoxLayout(self)
        row = QHBoxLayout()
        self.button = QPushButton("Test")
        self.button.setToolTip("Sends one short request with the settings in the form, and the "
                               "key typed above if any; nothing is saved")
        self.progress = QProgressBar()
        self.progress.setRange(0, 0)  # indeterminate
        self.progress.hide()
        row.addWidget(self.button)
        row.addWidget(self.progress, 1)
        lay.addLayout(row)
        self.result_label = QLabel()
        self.result_label.setWordWrap(True)
        lay.addWidget(self.result_label)
        self.details_button = QPushButton("Show details")
        self.details_button.setAccessibleDescription("What the provider's server answered")
        self.details_button.setCheckable(True)
        self.details_button.toggled.connect(self._toggle_details)
        self.details_button.hide()
        self.detail_label = QLabel()
        self.detail_label.setWordWrap(True)
        self.detail_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.detail_label.setProperty("muted", True)
        self.detail_label.hide()
        details = QHBoxLayout()
        details.addWidget(self.details_button)
        details.addStretch(1)
        lay.addLayout(details)
        lay.addWidget(self.detail_label)

    def begin(self, text: str) -> None:
        """A test is under way: the button waits, the bar moves, `text` says what is tested."""
        self.clear()
        self.button.setEnabled(False)
        self.button.setText("Testing…")
        self.progress.show()
        self.result_label.setText(text)

    def end(self, enabled: bool) -> None:
        self.button.setText("Test")
        self.button.setEnabled(enabled)
        self.progress.hide()

    def show_result(self, result: p.ProviderTestResult) -> None:
        text, detail = probe_words(result)
        theme.restyle(self.result_label, tone="success" if result.ok else "danger")
        self.result_label.setText(text)
        self.result_label.setToolTip(detail)
        self.detail_label.setText(detail)
        self.details_button.setChecked(False)
        self.details_button.setVisible(bool(detail))

    def clear(self) -> None:
        theme.restyle(self.result_label, tone="")
        self.result_label.setText("")
        self.result_label.setToolTip("")
        self.details_button.setChecked(False)
        self.details_button.hide()
        self.detail_label.setText("")

    def _toggle_details(self, on: bool) -> None:
        self.detail_label.setVisible(on)
        self.details_button.setText("Hide details" if on else "Show details")
