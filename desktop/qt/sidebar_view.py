"""The sessions sidebar's list view: Enter or a click opens a session (a search result at the
message that matched), F2 renames it in place, Delete asks to delete it; its context menu also
opens it in a window of its own and, on a backend's rows with several backends, offers a new
session there, the backends on its store and (a remote one) removing its pairing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QModelIndex, QPoint, Qt, Signal
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QAbstractItemView, QListView, QMenu, QWidget

from desktop.qt.compat import emit
from desktop.qt.sidebar_delegate import SessionDelegate
from desktop.qt.sidebar_model import KIND, MATCH, SESSION_ID, SidebarModel
from shared import protocol as p


class SessionListView(QListView):
    """The rows of a `SidebarModel`, and what can be done with the one selected."""

    open_requested = Signal(str, str)  # session_id, the message to open at ("" for the end)
    open_new_requested = Signal(str)  # session_id: in a window of its own
    delete_requested = Signal(str)  # session_id: ask, then delete
    new_on_requested = Signal(str)  # a backend's key: a new session there
    forget_requested = Signal(str)  # a remote backend's key: remove its pairing
    backends_requested = Signal(str)  # a backend's key: the Backends view of its store

    def __init__(self, model: SidebarModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.sidebar_model = model
        self.setObjectName("sessionList")
        self.setProperty("flat", True)
        self.setAccessibleName("Sessions")
        self.setAccessibleDescription(
            "Every session, most recent first: Enter opens one, F2 renames it, Delete deletes it")
        self.setModel(model)
        self.setItemDelegate(SessionDelegate(self))
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.setEditTriggers(QAbstractItemView.EditTrigger.EditKeyPressed)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setVerticalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)
        self.setMouseTracking(True)
        self.setUniformItemSizes(False)
        self.setFrameShape(QListView.Shape.NoFrame)
        # `activated`: Enter on the current row, or a double click; `clicked`: a single click.
        self.activated.connect(self.open_index)
        self.clicked.connect(self.open_index)
        self._actions()
        self.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)

    def _actions(self) -> None:
        """The selected row's actions: its keys work while the list has the focus."""
        self.open_action = self._action("Open", None, self.open_selected)
        self.open_new_action = self._action("Open in new window", None, self.open_selected_new)
        self.rename_action = self._action("Rename…", "F2", self.rename_selected)
        self.delete_action = self._action("Delete…", QKeySequence.StandardKey.Delete,
                                          self.delete_selected)
        for a in (self.rename_action, self.delete_action):
            a.setShortcutContext(Qt.ShortcutContext.WidgetShortcut)  # the window's F2 is its own
        for a in (self.open_action, self.open_new_action, self.rename_action, self.delete_action):
            a.setProperty("palette_hidden", True)  # on the selected row: the window has its own
            self.addAction(a)

    def _action(self, text: str, key: Any, slot: Callable[[], None]) -> QAction:
        action = QAction(text, self)
        if key is not None:
            action.setShortcut(QKeySequence(key))
        action.triggered.connect(lambda _=False: slot())
        return action

    def menu_at(self, pos: QPoint) -> QMenu:
        """A session's actions, or on a backend's rows: a new session there, the backends on
        its store, and (for a remote one) removing its pairing.  Shown unless empty."""
        index = self.indexAt(pos)
        menu = QMenu(self)
        if index.isValid() and index.data(KIND) == "session":
            self.setCurrentIndex(index)
            for action in (self.open_action, self.open_new_action, self.rename_action,
                           self.delete_action):
                menu.addAction(action)
        backend = self.sidebar_model.state.backend_actions(index.row() if index.isValid() else None)
        if backend is not None:  # (the keyboard's way there too)
            menu.addSeparator()
            key, name = backend.key, backend.name
            new = menu.addAction(f"New session on {name}…")
            new.triggered.connect(lambda _=False: emit(self.new_on_requested, key))
            store = menu.addAction(f"Backends on {name}'s store…")
            store.triggered.connect(lambda _=False: emit(self.backends_requested, key))
            if backend.removable:
                forget = menu.addAction(f"Remove {name}…")
                forget.triggered.connect(lambda _=False: emit(self.forget_requested, key))
        if not menu.isEmpty():
            menu.popup(self.viewport().mapToGlobal(pos))
        return menu

    # --- the selected row ----------------------------------------------------------------

    def selected_id(self) -> str | None:
        index = self.currentIndex()
        sid = index.data(SESSION_ID) if index.isValid() else None
        return str(sid) if sid else None

    def mark_current(self, session_id: str | None) -> None:
        """Shows `session_id` as the current row (the session beside the sidebar)."""
        row = self.sidebar_model.row_of(session_id) if session_id else None
        if row is None:
            self.clearSelection()
            return
        index = self.sidebar_model.index(row, 0)
        self.setCurrentIndex(index)
        self.scrollTo(index)

    def first_index(self) -> QModelIndex | None:
        """The first session's row (the best match, when searching)."""
        for row in range(self.sidebar_model.rowCount()):
            index = self.sidebar_model.index(row, 0)
            if index.data(KIND) == "session":
                return index
        return None

    def open_index(self, index: QModelIndex) -> None:
        sid = index.data(SESSION_ID)
        if not sid:
            return
        match: p.SearchMatch | None = index.data(MATCH)
        emit(self.open_requested, str(sid), (match.message_id or "") if match else "")

    def open_selected(self) -> None:
        index = self.currentIndex()
        if index.isValid():
            self.open_index(index)

    def open_selected_new(self) -> None:
        sid = self.selected_id()
        if sid:
            emit(self.open_new_requested, sid)

    def rename_selected(self) -> None:
        index = self.currentIndex()
        if index.isValid() and index.data(KIND) == "session":
            self.edit(index)

    def delete_selected(self) -> None:
        sid = self.selected_id()
        if sid:
            emit(self.delete_requested, sid)
