"""The settings dialog's Skills page: the skills `skill.list` finds (the person's, and those of
the folder of the session the main window shows), the chosen one's instructions and files
(`skill.get`, read-only), its switch (`skill.set_enabled`) and, for a person's own skill,
Delete (`skill.delete`, after a confirmation).  Listed again whenever the dialog is shown.

Widgets only: the rows, what applies to a skill and the words come from
`desktop.state.skills`.  Calls run through the dialog's `run` (its busy bookkeeping), so the
GUI thread never waits.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import shiboken6
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFontDatabase, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QListWidget,
    QPlainTextEdit,
    QPushButton,
    QSplitter,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from desktop.qt.compat import emit
from desktop.qt.settings_rules import Confirm, Run
from desktop.state import skills as words
from desktop.state.skills import SkillRow, rows
from shared import protocol as p
from shared.client import STATE, ClientState, Incoming, RpcError
from shared.errors import ErrorCode
from shared.methods import SkillDelete, SkillGet, SkillList, SkillSetEnabled

SessionOf = Callable[[], str | None]  # the session whose folder's project skills to list


class SkillsPage(QWidget):
    """The skills list, the chosen skill's view, and Refresh / Turn off / Delete."""

    listed = Signal(object)  # the SkillRows shown, after every skill.list
    viewed = Signal(object)  # the SkillDetail shown, after skill.get
    toggled = Signal(object)  # the SkillDetail skill.set_enabled answered
    deleted = Signal(str)  # the name, once skill.delete answered

    def __init__(self, link: Any, run: Run, confirm: Confirm, session_of: SessionOf,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.link = link
        self.run = run
        self.confirm = confirm
        self.session_of = session_of
        self.session_id: str | None = None  # the session the listing was made for
        self.shown: list[SkillRow] = []
        self.detail: p.SkillDetail | None = None
        self._build()

    def _build(self) -> None:
        lay = QVBoxLayout(self)
        intro = QLabel(words.INTRO)
        intro.setWordWrap(True)
        lay.addWidget(intro)
        self.project_label = QLabel()
        self.project_label.setWordWrap(True)
        self.project_label.setProperty("muted", True)
        self.project_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        lay.addWidget(self.project_label)
        split = QSplitter(Qt.Orientation.Vertical)
        split.setChildrenCollapsible(False)
        self.table = QTreeWidget()
        self.table.setAccessibleName("Skills")
        self.table.setAccessibleDescription("Each skill's name, whose it is, whether it is on, and "
                                            "its description or problem; Delete removes your own")
        self.table.setHeaderLabels(["Skill", "Where", "State", "Description"])
        self.table.setRootIsDecorated(False)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        # Names and places are short and must be read whole; the description takes the rest.
        for column in (0, 1, 2):
            self.table.header().setSectionResizeMode(column, QHeaderView.ResizeMode.ResizeToContents)
        self.table.header().setSectionResizeMode(3, QHeaderView.ResizeMode.Stretch)
        self.table.header().setAccessibleName("Skill columns")
        self.table.currentItemChanged.connect(lambda *_: self._chosen())
        QShortcut(QKeySequence(QKeySequence.StandardKey.Delete), self.table, self.delete_selected,
                  context=Qt.ShortcutContext.WidgetShortcut)
        split.addWidget(self.table)
        split.addWidget(self._viewer())
        split.setStretchFactor(0, 2)
        split.setStretchFactor(1, 3)
        lay.addWidget(split, 1)
        self.split = split
        self.empty_label = QLabel(words.EMPTY)
        self.empty_label.setWordWrap(True)
        self.empty_label.setProperty("muted", True)
        self.empty_label.hide()
        lay.addWidget(self.empty_label)
        self.delete_note = QLabel()
        self.delete_note.setWordWrap(True)
        self.delete_note.setProperty("muted", True)
        self.delete_note.hide()
        lay.addWidget(self.delete_note)
        self.status_label = QLabel()
        self.status_label.setWordWrap(True)
        lay.addWidget(self.status_label)
        buttons = QHBoxLayout()
        self.refresh_button = QPushButton("Re&fresh")
        self.refresh_button.setAccessibleDescription("List the skills again")
        self.refresh_button.clicked.connect(self.reload)
        self.toggle_button = QPushButton(words.toggle_words(None))
        self.toggle_button.setAccessibleName("Turn the skill on or off")
        self.toggle_button.setAccessibleDescription(
            "A skill turned off leaves the agent's list of skills from the next turn on")
        self.toggle_button.clicked.connect(self.toggle_selected)
        self.delete_button = QPushButton("&Delete…")
        self.delete_button.setAccessibleDescription(
            "Remove your selected skill's folder, after asking (a project's skills stay)")
        self.delete_button.clicked.connect(self.delete_selected)
        buttons.addWidget(self.refresh_button)
        buttons.addStretch(1)
        buttons.addWidget(self.toggle_button)
        buttons.addWidget(self.delete_button)
        lay.addLayout(buttons)
        self._update_controls()

    def _viewer(self) -> QWidget:
        box = QWidget()
        lay = QVBoxLayout(box)
        lay.setContentsMargins(0, 0, 0, 0)
        self.heading = QLabel(words.NOT_CHOSEN)
        self.heading.setWordWrap(True)
        self.heading.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        lay.addWidget(self.heading)
        self.problem_label = QLabel()
        self.problem_label.setWordWrap(True)
        self.problem_label.setProperty("tone", "warning")
        self.problem_label.hide()
        lay.addWidget(self.problem_label)
        self.body = QPlainTextEdit()
        self.body.setReadOnly(True)
        self.body.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.body.setAccessibleName("The skill's instructions (SKILL.md)")
        self.body.setAccessibleDescription("Read-only: the text after SKILL.md's front matter")
        self.body.setTabChangesFocus(True)
        lay.addWidget(self.body, 3)
        files_title = QLabel("Files beside SKILL.md:")
        lay.addWidget(files_title)
        self.files = QListWidget()
        self.files.setAccessibleName("Files beside SKILL.md")
        self.files.setAccessibleDescription("The skill's other files, as paths in its folder")
        self.files.setMaximumHeight(110)
        files_title.setBuddy(self.files)
        lay.addWidget(self.files, 1)
        return box

    # --- listing -------------------------------------------------------------------------

    def reload(self) -> None:
        """Lists the skills again (`skill.list`, with the shown session's project's)."""
        self.refresh_button.setEnabled(False)
        self.session_id = self.session_of()
        self.run("skills", self._load(self.session_id), self._failed)

    async def _load(self, session_id: str | None) -> None:
        try:
            result = await self.link.call(SkillList(session_id=session_id))
        except RpcError as exc:
            if exc.code != ErrorCode.NOT_FOUND or session_id is None:
                raise
            # The session went meanwhile: list the person's own.
            result = await self.link.call(SkillList())
            if self._alive():
                self.session_id = None
        finally:
            if self._alive():
                self.refresh_button.setEnabled(True)
        if self._alive():
            self.project_label.setText(words.project_note(result))
            self.show_rows(rows(result))

    def on_event(self, event: Incoming) -> None:
        """`skills.changed` (the agent wrote one, another window turned one off) or a
        reconnection lists the skills again, unless a listing is already under way."""
        if not self._alive():
            return
        data = event.data
        changed = isinstance(data, p.SkillsChanged)
        connected = event.type == STATE and isinstance(data, ClientState) and data.state == "connected"
        if (changed or connected) and self.refresh_button.isEnabled():
            self.reload()

    def show_rows(self, shown: list[SkillRow]) -> None:
        keep = self.selected()
        self.shown = shown
        self.table.blockSignals(True)
        self.table.clear()
        for row in shown:
            item = QTreeWidgetItem([row.label, row.where, row.state, row.about])
            item.setToolTip(3, row.about)
            self.table.addTopLevelItem(item)
        keys = [r.key for r in shown]
        at = keys.index(keep.key) if keep is not None and keep.key in keys else 0
        current = self.table.topLevelItem(at)
        if current is not None:
            self.table.setCurrentItem(current)
        self.table.blockSignals(False)
        self.table.setVisible(bool(shown))
        self.empty_label.setVisible(not shown)
        emit(self.listed, shown)
        self._chosen()

    def selected(self) -> SkillRow | None:
        item = self.table.currentItem()
        at = self.table.indexOfTopLevelItem(item) if item is not None else -1
        return self.shown[at] if 0 <= at < len(self.shown) else None

    def select(self, name: str, scope: p.SkillScope = "user") -> None:
        keys = [r.key for r in self.shown]
        item = self.table.topLevelItem(keys.index((scope, name))) if (scope, name) in keys else None
        if item is not None:
            self.table.setCurrentItem(item)

    # --- viewing -------------------------------------------------------------------------

    def _chosen(self) -> None:
        """Shows the chosen skill: its heading and problem now, its body once skill.get answers."""
        row = self.selected()
        self.detail = None
        self.body.setPlainText("")
        self.files.clear()
        self.heading.setText(words.heading(row) if row is not None else words.NOT_CHOSEN)
        self.problem_label.setText(words.problem_words(row) if row is not None else "")
        self.problem_label.setVisible(row is not None and row.problem is not None)
        self._update_controls()
        if row is not None and row.readable:
            self.run("skill-view", self._view(row), self._failed)

    async def _view(self, row: SkillRow) -> None:
        detail = await self.link.call(SkillGet(name=row.name, scope=row.scope,
                                               session_id=self._session(row)))
        if self._alive() and self.selected() == row:
            self._show_detail(detail)
            emit(self.viewed, detail)

    def _show_detail(self, detail: p.SkillDetail) -> None:
        self.detail = detail
        self.body.setPlainText(detail.body)
        self.files.clear()
        self.files.addItems(words.files_words(detail))

    # --- the switch ----------------------------------------------------------------------

    def toggle_selected(self) -> None:
        row = self.selected()
        if row is not None and self.toggle_button.isEnabled():
            self.set_enabled(row, not row.enabled)

    def set_enabled(self, row: SkillRow, enabled: bool) -> None:
        """Turns the skill on or off (`skill.set_enabled`), then lists the skills again."""
        self.toggle_button.setEnabled(False)
        self.status_label.setText("Turning it on…" if enabled else "Turning it off…")
        self.run("skill-toggle", self._set_enabled(row, enabled), self._failed)

    async def _set_enabled(self, row: SkillRow, enabled: bool) -> None:
        detail = await self.link.call(SkillSetEnabled(name=row.name, scope=row.scope,
                                                      enabled=enabled,
                                                      session_id=self._session(row)))
        if not self._alive():
            return
        self.status_label.setText(words.toggled_words(detail))
        emit(self.toggled, detail)
        self.reload()

    # --- deleting ------------------------------------------------------------------------

    def delete_selected(self) -> None:
        row = self.selected()
        if row is None or not words.can_delete(row) or not self.delete_button.isEnabled():
            return
        if self.confirm(*words.delete_question(row)):
            self.delete(row)

    def delete(self, row: SkillRow) -> None:
        """Removes a person's own skill (`skill.delete`), then shows the listing it answers."""
        self.delete_button.setEnabled(False)
        self.status_label.setText("Deleting…")
        self.run("skill-delete", self._delete(row), self._failed)

    async def _delete(self, row: SkillRow) -> None:
        try:
            await self.link.call(SkillDelete(name=row.name, scope="user"))
        except RpcError as exc:
            if exc.code != ErrorCode.NOT_FOUND:
                raise
            # Removed meanwhile (the agent, another client): gone is what was asked.
        if not self._alive():
            return
        self.status_label.setText(f"Deleted “{row.name}”.")
        emit(self.deleted, row.name)
        self.reload()  # skill.delete answers the person's listing only: the project's too

    # --- state ---------------------------------------------------------------------------

    def _session(self, row: SkillRow) -> str | None:
        return self.session_id if row.scope == "project" else None

    def _update_controls(self) -> None:
        row = self.selected()
        self.toggle_button.setText(words.toggle_words(row))
        self.toggle_button.setEnabled(words.can_toggle(row))
        self.delete_button.setEnabled(words.can_delete(row))
        note = words.delete_note(row)
        self.delete_note.setText(note)
        self.delete_note.setVisible(bool(note))

    def _failed(self, said: str) -> None:
        self.status_label.setText(f"Could not update the skills: {said}")
        self.refresh_button.setEnabled(True)
        self._update_controls()

    def _alive(self) -> bool:
        return shiboken6.isValid(self)
