"""The Schedules window: prompts Turnkey sends later, each with when it runs next in words, an
On switch, Edit, Delete (after a confirmation), and its last run's session a click away.

Opened from the sidebar's Schedules button (beside Settings, under the sessions a schedule
makes) and from File ▸ Scheduled prompts.  A client of the backend only: `schedule.list` and
`session.list` fill it, `schedule.create|update|delete` change it, and the session-less
`schedule.changed` event keeps it live (a firing updates "Last run" while it is open).
Words, presets and the form's values live in `desktop.state.schedules`.
"""

from __future__ import annotations

import html
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import shiboken6
from PySide6.QtCore import QDateTime, Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QComboBox,
    QDateTimeEdit,
    QDialog,
    QFormLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QMessageBox,
    QPlainTextEdit,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from desktop.qt import theme
from desktop.qt.aio import spawn
from desktop.qt.compat import emit
from desktop.state import schedules as words
from shared import protocol as p
from shared.client import STATE, ClientState, Incoming, InvalidParams, RpcError
from shared.methods import ScheduleCreate, ScheduleDelete, ScheduleList, ScheduleUpdate, SessionList
from shared.zones import local_zone_name, valid_zone

COLUMNS = ("On", "Prompt", "Repeats", "Next run", "Last run", "Runs in")
REFRESH_MS = 30_000  # "today at 14:00" becomes "running now": the words are redrawn this often
EMPTY = "No scheduled prompts yet. New… sends a prompt later, once or on a repeat."


class SchedulesDialog(QDialog):
    """The schedule list, its form, and the calls behind them."""

    listed = Signal(object)  # the Schedules shown, after every schedule.list
    saved = Signal(object)  # the Schedule schedule.create / schedule.update answered
    deleted = Signal(str)  # the schedule_id, once schedule.delete answered
    failed = Signal(str)  # an error shown, in the words shown
    open_requested = Signal(str)  # a session id: "open last run"

    def __init__(self, link: Any, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.link = link
        self.rows = words.ScheduleRows()
        self.titles: dict[str, str] = {}
        self.editing: str | None = None  # the schedule the form edits; None: a new one
        self.setWindowTitle("Scheduled prompts")
        self.resize(980, 560)
        self._build()
        received = getattr(link, "received", None)
        if received is not None:
            received.connect(self.on_event)
        self._timer = QTimer(self, interval=REFRESH_MS)
        self._timer.timeout.connect(self._refresh)
        self._timer.start()
        self.reload()

    # --- layout ------------------------------------------------------------------------

    def _build(self) -> None:
        lay = QVBoxLayout(self)
        intro = QLabel("Prompts Turnkey sends for you later, once or on a repeat, in a session "
                       "or in a new one each time. They run while Turnkey runs in the background.")
        intro.setWordWrap(True)
        lay.addWidget(intro)
        self.table = QTreeWidget()
        self.table.setAccessibleName("Scheduled prompts")
        self.table.setHeaderLabels(list(COLUMNS))
        self.table.setRootIsDecorated(False)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        header = self.table.header()
        for column in range(len(COLUMNS)):
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        header.setStretchLastSection(False)
        self.table.currentItemChanged.connect(lambda *_: self._update_buttons())
        self.table.itemChanged.connect(self._on_item_changed)
        self.table.itemDoubleClicked.connect(lambda *_: self.edit_selected())
        lay.addWidget(self.table, 1)
        self.empty_label = QLabel(EMPTY)
        self.empty_label.setWordWrap(True)
        self.empty_label.setProperty("muted", True)
        self.empty_label.hide()
        lay.addWidget(self.empty_label)
        self.status_label = QLabel()
        self.status_label.setWordWrap(True)
        self.status_label.setTextFormat(Qt.TextFormat.PlainText)  # it quotes the backend's words
        lay.addWidget(self.status_label)
        lay.addLayout(self._buttons())
        self.form = self._form()
        self.form.hide()
        lay.addWidget(self.form)
        self._update_buttons()

    def _buttons(self) -> QHBoxLayout:
        row = QHBoxLayout()
        self.new_button = QPushButton("&New…")
        self.new_button.clicked.connect(self.start_new)
        self.edit_button = QPushButton("&Edit…")
        self.edit_button.clicked.connect(self.edit_selected)
        self.delete_button = QPushButton("&Delete…")
        self.delete_button.clicked.connect(self.delete_selected)
        self.open_button = QPushButton("&Open last run")
        self.open_button.setAccessibleDescription("Open the session the selected schedule last ran in")
        self.open_button.clicked.connect(self.open_last_run)
        self.close_button = QPushButton("Close")
        self.close_button.clicked.connect(self.close)
        for b in (self.new_button, self.edit_button, self.delete_button, self.open_button):
            row.addWidget(b)
        row.addStretch(1)
        row.addWidget(self.close_button)
        return row

    def _form(self) -> QDialog:
        """The create/edit form: a window of its own over the list, which stays readable."""
        box = QDialog(self)
        box.setWindowTitle("New schedule")
        box.setModal(True)
        box.setMinimumWidth(620)
        form = QFormLayout(box)
        self.text_edit = QPlainTextEdit()
        self.text_edit.setPlaceholderText("The prompt, e.g. “Summarize yesterday's commits here”")
        self.text_edit.setFixedHeight(70)
        form.addRow("&Prompt", self.text_edit)
        self.where_combo = QComboBox()
        self.where_combo.currentIndexChanged.connect(lambda _i: self._show_form_parts())
        form.addRow("&Runs in", self.where_combo)
        self.folder_edit = QLineEdit(str(Path.home()))
        self.folder_label = QLabel("&Folder")
        self.folder_label.setBuddy(self.folder_edit)
        form.addRow(self.folder_label, self.folder_edit)
        self.repeat_combo = QComboBox()
        for preset in words.PRESETS:
            self.repeat_combo.addItem(preset.label)
        self.repeat_combo.currentIndexChanged.connect(lambda _i: self._show_form_parts())
        form.addRow("R&epeat", self.repeat_combo)
        self.at_edit = QDateTimeEdit()
        self.at_edit.setCalendarPopup(True)
        self.at_edit.setDisplayFormat("yyyy-MM-dd HH:mm")
        self.at_label = QLabel("&At")
        self.at_label.setBuddy(self.at_edit)
        form.addRow(self.at_label, self.at_edit)
        self.cron_edit = QLineEdit()
        self.cron_edit.setPlaceholderText("minute hour day month weekday, e.g. 30 8 * * 1-5")
        self.cron_label = QLabel("&Cron")
        self.cron_label.setBuddy(self.cron_edit)
        form.addRow(self.cron_label, self.cron_edit)
        self.zone_combo = QComboBox()
        self.zone_combo.setEditable(True)
        self.zone_combo.addItems(words.zone_names())
        form.addRow("&Time zone", self.zone_combo)
        self.missed_check = QCheckBox("If Turnkey was not running then, run it once when it starts")
        self.missed_check.setChecked(True)
        form.addRow("", self.missed_check)
        self.form_error = QLabel()
        self.form_error.setWordWrap(True)
        self.form_error.setProperty("tone", "danger")
        self.form_error.setTextFormat(Qt.TextFormat.PlainText)  # errors quote what was typed
        form.addRow("", self.form_error)
        actions = QHBoxLayout()
        self.save_button = QPushButton("&Save")
        self.save_button.setDefault(True)
        self.save_button.setProperty("primary", True)
        self.save_button.clicked.connect(self.save)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.clicked.connect(self.cancel_form)
        actions.addStretch(1)
        actions.addWidget(self.cancel_button)
        actions.addWidget(self.save_button)
        form.addRow(actions)
        return box

    # --- listing -------------------------------------------------------------------------

    def reload(self) -> None:
        """Lists the schedules (and the sessions, for their titles) again."""
        spawn(self._load(), self._failed)

    async def _load(self) -> None:
        listing = await self.link.call(ScheduleList())
        sessions = await self.link.call(SessionList(limit=500))
        if not self._alive():
            return
        self.titles = {s.session_id: s.title for s in sessions.sessions}
        self.rows.load(listing.schedules)
        self._refresh()
        emit(self.listed, list(self.rows.rows))

    def on_event(self, event: Incoming) -> None:
        if not self._alive():
            return
        data = event.data
        if isinstance(data, p.ScheduleChanged):
            if self.rows.apply(data):
                self._refresh()
        elif isinstance(data, (p.SessionCreated, p.SessionUpdated)):
            self.titles[data.session.session_id] = data.session.title
        elif event.type == STATE and isinstance(data, ClientState) and data.state == "connected":
            self.reload()

    def _refresh(self) -> None:
        if not self._alive():
            return
        keep = self.selected()
        now = datetime.now(UTC)
        self.table.blockSignals(True)
        self.table.clear()
        for s in self.rows.rows:
            self.table.addTopLevelItem(self._item(s, now))
        self.table.blockSignals(False)
        ids = [s.schedule_id for s in self.rows.rows]
        current = self.table.topLevelItem(ids.index(keep) if keep in ids else 0)
        if current is not None:
            self.table.setCurrentItem(current)
        self.table.setVisible(bool(ids))
        self.empty_label.setVisible(not ids)
        self._update_buttons()

    def _item(self, s: p.Schedule, now: datetime) -> QTreeWidgetItem:
        text = " ".join(s.text.split())
        text = text if len(text) <= 70 else text[:69] + "…"
        last = words.when_words(s.last_fired_at, now) if s.last_fired_at else "never"
        item = QTreeWidgetItem(["", text, words.repeat_words(s), words.next_words(s, now), last,
                                words.target_words(s, self.titles)])
        item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
        item.setCheckState(0, Qt.CheckState.Checked if s.enabled else Qt.CheckState.Unchecked)
        item.setData(0, Qt.ItemDataRole.UserRole, s.schedule_id)
        item.setToolTip(1, _tip(s.text))
        item.setToolTip(2, _tip(f"{s.cron or s.at} ({s.timezone})"))
        if s.disabled_reason:
            item.setToolTip(3, _tip(s.disabled_reason))
        return item

    def selected(self) -> str | None:
        item = self.table.currentItem()
        return str(item.data(0, Qt.ItemDataRole.UserRole)) if item is not None else None

    # --- on / off, delete, open -----------------------------------------------------------------

    def _on_item_changed(self, item: QTreeWidgetItem, column: int) -> None:
        if column == 0:
            on = item.checkState(0) == Qt.CheckState.Checked
            self.set_enabled(str(item.data(0, Qt.ItemDataRole.UserRole)), on)

    def set_enabled(self, schedule_id: str, on: bool) -> None:
        self._call(ScheduleUpdate(schedule_id=schedule_id, enabled=on),
                   "Turned on." if on else "Turned off: it will not run until turned on.")

    def delete_selected(self) -> None:
        s = self.rows.get(self.selected() or "")
        if s is not None and self.confirm(*words.delete_question(s)):
            self.delete(s.schedule_id)

    def confirm(self, question: str, detail: str) -> bool:  # a seam: tests replace it
        answer = QMessageBox.question(self, "Turnkey", f"{question}\n\n{detail}")
        return answer == QMessageBox.StandardButton.Yes

    def delete(self, schedule_id: str) -> None:
        spawn(self._delete(schedule_id), self._failed)

    async def _delete(self, schedule_id: str) -> None:
        await self.link.call(ScheduleDelete(schedule_id=schedule_id))
        if self._alive():
            self.rows.apply(p.ScheduleChanged(schedule_id=schedule_id, deleted=True))
            self._refresh()
            self.status_label.setText("Deleted.")
            emit(self.deleted, schedule_id)

    def open_last_run(self) -> None:
        s = self.rows.get(self.selected() or "")
        if s is not None and s.last_session_id:
            emit(self.open_requested, s.last_session_id)

    # --- the form --------------------------------------------------------------------------------

    def start_new(self) -> None:
        self.editing = None
        self.form.setWindowTitle("New schedule")
        self.text_edit.setPlainText("")
        self._fill_where(None)
        self.folder_edit.setText(str(Path.home()))
        self.repeat_combo.setCurrentIndex(1)  # every weekday at 9:00: the common case
        self.cron_edit.setText("")
        self._set_at(words.default_at(datetime.now(UTC)), local_zone_name())
        self.zone_combo.setCurrentText(local_zone_name())
        self.missed_check.setChecked(True)
        self._open_form()

    def edit_selected(self) -> None:
        s = self.rows.get(self.selected() or "")
        if s is None:
            return
        self.editing = s.schedule_id
        self.form.setWindowTitle("Edit schedule")
        self.text_edit.setPlainText(s.text)
        self._fill_where(s.session_id)
        self.folder_edit.setText((s.new_session.cwd if s.new_session else None) or str(Path.home()))
        self.repeat_combo.setCurrentIndex(words.preset_for(s.cron))
        self.cron_edit.setText(s.cron or "")
        self._set_at(words.parse_time(s.at) or words.default_at(datetime.now(UTC)), s.timezone)
        self.zone_combo.setCurrentText(s.timezone)
        self.missed_check.setChecked(s.missed == "run_once")
        self._open_form()

    def _open_form(self) -> None:
        self._mark_problem(None)
        self.where_combo.setEnabled(self.editing is None)  # where it runs is chosen once
        self.folder_edit.setEnabled(self.editing is None)
        self._show_form_parts()
        self.form.open()
        self.text_edit.setFocus()

    def cancel_form(self) -> None:
        self.form.hide()
        self.editing = None

    def _fill_where(self, session_id: str | None) -> None:
        self.where_combo.clear()
        self.where_combo.addItem("A new session each time", None)
        for sid, title in self.titles.items():
            self.where_combo.addItem(title, sid)
        if session_id is not None and session_id not in self.titles:
            self.where_combo.addItem(session_id, session_id)
        index = self.where_combo.findData(session_id) if session_id else 0
        self.where_combo.setCurrentIndex(max(0, index))

    def _set_at(self, when: datetime, zone: str) -> None:
        local = when.astimezone(ZoneInfo(zone) if valid_zone(zone) else None)
        self.at_edit.setDateTime(QDateTime(local.year, local.month, local.day, local.hour, local.minute, 0))

    def _show_form_parts(self) -> None:
        new = self.where_combo.currentData() is None
        preset = words.PRESETS[max(0, self.repeat_combo.currentIndex())]
        for widget, shown in ((self.folder_edit, new), (self.folder_label, new),
                              (self.at_edit, preset.cron is None), (self.at_label, preset.cron is None),
                              (self.cron_edit, preset.cron == ""), (self.cron_label, preset.cron == "")):
            widget.setVisible(shown)

    def form_values(self) -> words.Form:
        at = self.at_edit.dateTime()
        d, t = at.date(), at.time()
        return words.Form(
            text=self.text_edit.toPlainText(), session_id=self.where_combo.currentData(),
            cwd=self.folder_edit.text(), preset=self.repeat_combo.currentIndex(),
            cron=self.cron_edit.text(), at_local=datetime(d.year(), d.month(), d.day(), t.hour(), t.minute()),
            timezone=self.zone_combo.currentText().strip(), run_missed=self.missed_check.isChecked())

    def save(self) -> None:
        values = self.form_values()
        request = values.create() if self.editing is None else values.update(self.editing)
        self.save_button.setEnabled(False)
        spawn(self._save(request), self._form_failed)

    async def _save(self, request: ScheduleCreate | ScheduleUpdate) -> None:
        try:
            result = await self.link.call(request)
        except RpcError as exc:
            if self._alive():
                self.save_button.setEnabled(True)
                self._mark_problem(exc.field if isinstance(exc, InvalidParams) else "")
                self._form_failed(exc.message)
            return
        if not self._alive():
            return
        self.save_button.setEnabled(True)
        self.rows.apply(p.ScheduleChanged(schedule_id=result.schedule.schedule_id,
                                          schedule=result.schedule))
        self.form.hide()
        self.editing = None
        self._refresh()
        nxt = words.next_words(result.schedule, datetime.now(UTC))
        self.status_label.setText(f"Saved. Next run: {nxt}.")
        emit(self.saved, result.schedule)

    # --- state ---------------------------------------------------------------------------------

    def _call(self, request: ScheduleUpdate, done: str) -> None:
        async def run() -> None:
            result = await self.link.call(request)
            if self._alive():
                self.rows.apply(p.ScheduleChanged(schedule_id=result.schedule.schedule_id,
                                                  schedule=result.schedule))
                self._refresh()
                self.status_label.setText(done)
                emit(self.saved, result.schedule)

        spawn(run(), self._failed)

    def _mark_problem(self, field: str | None) -> None:
        """Marks the widget of the field the backend named (data.field); None clears all."""
        widgets = {"text": self.text_edit, "session_id": self.where_combo, "cron": self.cron_edit,
                   "at": self.at_edit, "timezone": self.zone_combo, "cwd": self.folder_edit}
        if field == "cron" and not self.cron_edit.isVisible():
            field = "repeat"
        widgets["repeat"] = self.repeat_combo
        for name, widget in widgets.items():
            theme.restyle(widget, problem=name == field)
        if field is None:
            self.form_error.setText("")

    def _update_buttons(self) -> None:
        s = self.rows.get(self.selected() or "")
        self.edit_button.setEnabled(s is not None)
        self.delete_button.setEnabled(s is not None)
        self.open_button.setEnabled(s is not None and bool(s.last_session_id))

    def _form_failed(self, message: str) -> None:
        if self._alive():
            message = message[:1].upper() + message[1:]
            self.form_error.setText(message)
            self.save_button.setEnabled(True)
            emit(self.failed, message)

    def _failed(self, message: str) -> None:
        if self._alive():
            self.status_label.setText(f"Could not update the schedules: {message}")
            emit(self.failed, message)
            self._refresh()  # an On switch that did not take goes back

    def _alive(self) -> bool:
        return shiboken6.isValid(self)


def _tip(text: str) -> str:
    """A tooltip that shows `text` as typed: Qt would render a tooltip that looks like HTML."""
    return f"<p style='white-space:pre-wrap'>{html.escape(text)}</p>"
