"""The changes panel: every file the session's turns changed, by turn, with the diff of the one
chosen, its Undo and Open in editor; a dock of the session window, toggled from View.

What it shows is `desktop.state.changes.ChangesModel`; this module lays it out, asks the
backend (`session.changes`, `session.undo` with `paths`) and asks again when an event of the
session makes the listing stale (a call's change landed, files were put back, a turn ended),
only while the panel is shown.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from PySide6.QtCore import QMimeDatabase, QProcess, Qt, QTimer, QUrl, Signal
from PySide6.QtGui import QBrush, QColor, QDesktopServices, QFont, QKeyEvent, QKeySequence, QShowEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDockWidget,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QSplitter,
    QTextBrowser,
    QToolButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from desktop.qt import theme
from desktop.qt.aio import spawn
from desktop.qt.compat import emit
from desktop.qt.transcript_view import diff_html, esc, tone
from desktop.state.changes import (
    ChangesModel,
    Row,
    counts,
    default_open_refusal,
    editor_command,
    file_marks,
    file_words,
    is_stale,
    turn_words,
)
from shared import protocol as p
from shared.client import RESYNC, Incoming
from shared.methods import SessionChanges, SessionUndo

if TYPE_CHECKING:
    from desktop.link import Link
    from desktop.qt.conversation import Conversation

SHORTCUT = "Ctrl+Shift+D"
KEY = Qt.ItemDataRole.UserRole  # a row's (turn_id, path)


class FileTree(QTreeWidget):
    """Turns and their files; Enter on a file opens it in the editor."""

    open_requested = Signal()

    def keyPressEvent(self, e: QKeyEvent) -> None:
        if e.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            emit(self.open_requested)
            return
        super().keyPressEvent(e)


class ChangesPanel(QWidget):
    """The panel's content, following the conversation its window shows (`follow`)."""

    opened = Signal(str)  # a file handed to the editor (its path)

    def __init__(self) -> None:
        super().__init__()
        self.setObjectName("changesPanel")
        self.model = ChangesModel()
        self.link: Link | None = None
        self.conversation: Conversation | None = None
        self._fetching = False
        self._again = False  # stale while a fetch was out: fetch once more after it
        self._stale = True
        self._diff_key: tuple[str, str] | None = None  # the row whose diff is shown
        self._fetch_timer = QTimer(self, singleShot=True, interval=150)
        self._fetch_timer.timeout.connect(self._fetch)
        self._build()
        theme.changed.connect(self._restyle)

    def _build(self) -> None:
        box = QVBoxLayout(self)
        box.setContentsMargins(10, 8, 10, 10)
        box.setSpacing(6)
        self.heading = QLabel()
        self.heading.setProperty("muted", True)
        self.heading.setWordWrap(True)
        self.tree = FileTree()
        self.tree.setObjectName("changesTree")
        self.tree.setAccessibleName("Changed files")
        self.tree.setAccessibleDescription(
            "The files each turn changed, newest turn first; arrows move, Enter opens the file "
            "in your editor")
        self.tree.setColumnCount(2)
        self.tree.setHeaderHidden(True)
        self.tree.setRootIsDecorated(False)
        self.tree.setItemsExpandable(False)  # every turn's files stay listed
        self.tree.setIndentation(14)
        self.tree.setUniformRowHeights(True)
        self.tree.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.tree.setProperty("flat", True)
        header = self.tree.header()
        header.setStretchLastSection(False)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.ResizeToContents)
        self.tree.currentItemChanged.connect(lambda item, _old: self._chose(item))
        self.tree.open_requested.connect(self.open_in_editor)
        self.tree.itemDoubleClicked.connect(lambda _item, _col: self.open_in_editor())
        self.diff = QTextBrowser()
        self.diff.setObjectName("changesDiff")
        self.diff.setAccessibleName("Diff")
        self.diff.setOpenLinks(False)
        self.diff.setLineWrapMode(QTextBrowser.LineWrapMode.NoWrap)
        self.diff.setProperty("flat", True)
        split = QSplitter(Qt.Orientation.Vertical)
        split.setChildrenCollapsible(False)
        split.addWidget(self.tree)
        split.addWidget(self.diff)
        split.setStretchFactor(0, 1)
        split.setStretchFactor(1, 3)  # the diff is what is read
        self.undo_button = QPushButton("&Undo this file")
        self.undo_button.setAccessibleDescription(
            "Put this file back as it was before the turn; the turn's other files stay")
        self.undo_button.clicked.connect(self.undo_file)
        self.open_button = QPushButton("Open in &editor")
        self.open_button.setIcon(theme.icon("pop-out"))
        self.open_button.setAccessibleDescription(
            "Open the file in your editor ($VISUAL when set, else the system's default)")
        self.open_button.clicked.connect(self.open_in_editor)
        row = QHBoxLayout()
        row.addWidget(self.undo_button)
        row.addStretch(1)
        row.addWidget(self.open_button)
        self.note = QLabel()  # what the last action did, or why it failed
        self.note.setWordWrap(True)
        self.note.setProperty("muted", True)
        self.note.hide()
        box.addWidget(self.heading)
        box.addWidget(split, 1)
        box.addLayout(row)
        box.addWidget(self.note)
        self.setFocusProxy(self.tree)
        self._show()

    # --- what it follows -----------------------------------------------------------

    def follow(self, conversation: Conversation | None) -> None:
        """The conversation the window shows now (None: none): its session's changes."""
        link = conversation.link if conversation is not None else None
        if link is not self.link:
            if self.link is not None:
                try:
                    self.link.received.disconnect(self._on_event)
                except (RuntimeError, TypeError):
                    pass
            if link is not None:
                link.received.connect(self._on_event)
            self.link = link
        self.conversation = conversation
        self.model.follow(conversation.session_id if conversation is not None else "")
        if not self.model.loaded:
            self._stale = True
            self._show()
        self._buttons()
        self._due()

    def _on_event(self, event: Incoming) -> None:
        if event.session_id != self.model.session_id:
            return
        if event.type == RESYNC or is_stale(event.data):
            self._stale = True
            self._due()

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        self._due()

    def _due(self) -> None:
        """Asks again soon, if the listing is stale and anyone sees it."""
        if self._stale and self.isVisible() and self.model.session_id and self.link is not None:
            self._fetch_timer.start()

    def _fetch(self) -> None:
        if self._fetching:
            self._again = True
            return
        link, sid = self.link, self.model.session_id
        if link is None or not sid:
            return
        self._fetching, self._again, self._stale = True, False, False

        async def go() -> None:
            try:
                result = await link.call(SessionChanges(session_id=sid))
            finally:
                self._fetching = False
                if self._again:
                    self._stale = True
                    self._due()
            if sid == self.model.session_id:
                self.model.load(result)
                self._show()

        spawn(go(), self._failed)

    def refresh(self) -> None:
        """Asks the backend again now (the window's conversation changed state)."""
        self._stale = True
        self._due()

    # --- showing -------------------------------------------------------------------

    def _show(self) -> None:
        m = self.model
        self.heading.setText(m.summary() if m.session_id else "No session shown.")
        self.tree.blockSignals(True)
        try:
            self.tree.clear()
            chosen: QTreeWidgetItem | None = None
            turn_item: QTreeWidgetItem | None = None
            for row in m.rows():
                item = self._item(row)
                if row.file is None or turn_item is None:
                    self.tree.addTopLevelItem(item)
                    item.setFirstColumnSpanned(True)
                    turn_item = item
                else:
                    turn_item.addChild(item)
                if row.key == m.chosen:
                    chosen = item
            self.tree.expandAll()
            if chosen is not None:
                self.tree.setCurrentItem(chosen)
        finally:
            self.tree.blockSignals(False)
        self._show_diff()

    def _item(self, row: Row) -> QTreeWidgetItem:
        c = theme.colors()
        item = QTreeWidgetItem()
        item.setData(0, KEY, row.key)
        if row.file is None:
            words = turn_words(row.turn)
            item.setText(0, words)
            item.setToolTip(0, row.turn.prompt)
            font = QFont(item.font(0))
            font.setBold(True)
            item.setFont(0, font)
            item.setData(0, Qt.ItemDataRole.AccessibleTextRole, f"Turn: {words}")
            return item
        f = row.file
        adds, dels = counts(f.diff)
        marks = file_marks(f)
        item.setText(0, f.label)
        item.setToolTip(0, f.path)
        item.setText(1, " ".join([f"+{adds} −{dels}", *marks]))
        item.setForeground(1, QBrush(QColor(c.muted)))
        if f.restored:
            font = QFont(item.font(0))
            font.setStrikeOut(True)
            item.setFont(0, font)
            item.setForeground(0, QBrush(QColor(c.muted)))
        item.setData(0, Qt.ItemDataRole.AccessibleTextRole, file_words(f))
        return item

    def _show_diff(self) -> None:
        row = self.model.current()
        dark = theme.current() == "dark"
        current = self.tree.currentItem()
        key = current.data(0, KEY) if current is not None else None
        turn = next((t for t in self.model.turns if key is not None and t.turn_id == key[0]), None)
        if row is not None and key == row.key and row.file is not None:
            html = self._diff_html(row.file, dark)
        elif turn is not None and key is not None and not key[1]:
            html = "".join(self._diff_html(f, dark) for f in turn.files)
        else:
            html = ""
        # The same file again (a reload as the turn writes): the reader keeps their place.
        bars = (self.diff.verticalScrollBar(), self.diff.horizontalScrollBar())
        kept = [bar.value() for bar in bars] if key == self._diff_key else [0, 0]
        self.diff.setHtml(html)
        for bar, value in zip(bars, kept, strict=True):
            bar.setValue(value)
        self._diff_key = key
        self._buttons()

    def _selected(self) -> Row | None:
        """The file row the tree's cursor is on (None on a turn's heading)."""
        row = self.model.current()
        current = self.tree.currentItem()
        return row if row is not None and current is not None and current.data(0, KEY) == row.key \
            else None

    def _buttons(self) -> None:
        """Undo and Open for the file chosen: Undo not while a turn runs, Open only here."""
        on_file = self._selected() is not None
        busy = self.conversation is not None and self.conversation.state.busy
        remote = self.link.where if self.link is not None else ""
        self.undo_button.setEnabled(on_file and self.model.can_undo(busy))
        self.undo_button.setToolTip("Possible once the running turn ends" if busy else "")
        self.open_button.setEnabled(on_file and self.model.can_open(bool(remote)))
        self.open_button.setToolTip(f"The file is on {remote}" if remote else "")

    def _diff_html(self, f: p.FileChange, dark: bool) -> str:
        muted = tone("muted")
        marks = ", ".join(file_marks(f))
        said = f' <span style="color:{muted}">({esc(marks)})</span>' if marks else ""
        head = f'<p style="margin:6px 0 2px 0"><b>{esc(f.label)}</b>{said}</p>'
        if not f.diff:
            return head + f'<p style="color:{muted}">No difference left.</p>'
        if f.diff.startswith("("):
            return head + f'<p style="color:{muted}">{esc(f.diff)}</p>'
        return head + diff_html(f.diff, dark)

    def choose(self, turn_id: str, path: str) -> None:
        """Shows that file of that turn (when listed)."""
        self.model.choose((turn_id, path))
        self._show()

    def _chose(self, item: QTreeWidgetItem | None) -> None:
        if item is not None:
            turn_id, path = item.data(0, KEY)
            self.model.choose((turn_id, path))
        self._show_diff()

    def _restyle(self, _scheme: str = "") -> None:
        self.open_button.setIcon(theme.icon("pop-out"))
        self._show()

    def _say(self, text: str, tone_name: str = "") -> None:
        self.note.setText(text)
        theme.restyle(self.note, muted=not tone_name, tone=tone_name)
        self.note.show()

    def _failed(self, words: str) -> None:
        self._say(words, "danger")

    # --- actions -------------------------------------------------------------------

    def undo_file(self) -> None:
        """Puts the chosen file back as it was before its turn (that file only)."""
        row = self._selected()
        link, busy = self.link, self.conversation is not None and self.conversation.state.busy
        if row is None or row.file is None or link is None or not self.model.can_undo(busy):
            return
        turn_id, f, sid = row.turn.turn_id, row.file, self.model.session_id
        self.undo_button.setEnabled(False)

        async def go() -> None:
            result = await link.call(SessionUndo(session_id=sid, turn_id=turn_id, paths=[f.path]))
            self._say(f"Put back {f.label}." if result.restored else
                      f"{f.label} was not put back (see the log).")
            self.refresh()  # (files.restored says so too)

        spawn(go(), self._failed)

    def open_in_editor(self) -> bool:
        """Opens the chosen file: `$VISUAL` with its path, as a process of its own, else the
        system's default application for it."""
        row = self._selected()
        remote = self.link is not None and bool(self.link.where)
        if row is None or row.file is None or not self.model.can_open(remote):
            return False
        path = row.file.path
        command = editor_command(path, os.environ)
        if command is not None:
            started, _pid = QProcess.startDetached(command[0], command[1:], os.path.dirname(path))
        else:
            refusal = self._runnable(path, row.file.label)
            if refusal is not None:
                self._say(refusal, "warning")
                return False
            started = QDesktopServices.openUrl(QUrl.fromLocalFile(path))
        if started:
            emit(self.opened, path)
        else:
            self._say(f"Could not open {row.file.label}: "
                      + (f"{command[0]} did not start." if command else "no application opens it."),
                      "danger")
        return bool(started)


    @staticmethod
    def _runnable(path: str, label: str) -> str | None:
        """Why the desktop's opener must not get this file (see default_open_refusal)."""
        try:
            executable = bool(os.stat(path).st_mode & 0o111)
        except OSError:
            return None  # (gone: the opener says so)
        mime = QMimeDatabase().mimeTypeForFile(path)
        return default_open_refusal(label, mime.name(), mime.allAncestors(), executable)


class ChangesDock(QDockWidget):
    """The panel as a dock of a session window (right by default; closed, it takes no room)."""

    def __init__(self, parent: QWidget) -> None:
        super().__init__("Changes", parent)
        self.setObjectName("changesDock")  # (the saved window state names it)
        self._panel: ChangesPanel | None = None  # built when first shown or asked for
        self._following: Conversation | None = None
        self.visibilityChanged.connect(self._shown)
        self.setAllowedAreas(Qt.DockWidgetArea.LeftDockWidgetArea | Qt.DockWidgetArea.RightDockWidgetArea)
        self.setFeatures(QDockWidget.DockWidgetFeature.DockWidgetClosable
                         | QDockWidget.DockWidgetFeature.DockWidgetMovable)
        self.setMinimumWidth(300)
        action = self.toggleViewAction()
        action.setText("Show &changes panel")
        action.setShortcut(QKeySequence(SHORTCUT))
        action.setToolTip("The files this session changed, by turn, with their diffs")
        action.triggered.connect(self._toggled)
        self.setTitleBarWidget(self._title_bar())

    @property
    def panel(self) -> ChangesPanel:
        """The panel, built the first time it shows or is asked for: a window opening with the
        dock closed (every start, nearly) does not wait for its widgets."""
        if self._panel is None:
            self._panel = ChangesPanel()
            self.setWidget(self._panel)
            self._panel.follow(self._following)
        return self._panel

    def _shown(self, visible: bool) -> None:
        if visible and self._panel is None:
            self.panel.follow(self._following)  # (built, and so following it)

    def follow(self, conversation: Conversation | None) -> None:
        """The conversation the window shows now: the panel's, once it is built."""
        self._following = conversation
        if self._panel is not None:
            self._panel.follow(conversation)

    def _title_bar(self) -> QWidget:
        """"Changes" and a close button drawn with the theme's own icon (the style's small
        default "×" all but vanished in the dark theme)."""
        bar = QWidget()
        row = QHBoxLayout(bar)
        row.setContentsMargins(10, 6, 6, 0)
        title = QLabel("Changes")
        title.setStyleSheet("font-weight: 600")
        self.close_button = QToolButton()
        self.close_button.setAutoRaise(True)
        self.close_button.setAccessibleName("Close the changes panel")
        self.close_button.setToolTip(f"Close the changes panel ({SHORTCUT})")
        self.close_button.clicked.connect(self.close)
        self._restyle()
        theme.changed.connect(self._restyle)
        row.addWidget(title, 1)
        row.addWidget(self.close_button)
        return bar

    def _restyle(self) -> None:
        self.close_button.setIcon(theme.icon("deny", "muted"))

    def _toggled(self, shown: bool) -> None:
        """Opened from the menu, the shortcut or the palette: the keyboard goes to its list."""
        if shown:
            self.panel.tree.setFocus(Qt.FocusReason.ShortcutFocusReason)
