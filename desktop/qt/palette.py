"""The command palette (Ctrl+K): every action of the window it opens over, found by typing.

It lists the window's own actions (its menus' and its shortcuts'), so whatever a window can
do is reachable from the keyboard without knowing where it sits in a menu; typing filters
by the letters in order ("nse" finds "New session…"), Enter runs the chosen action and
Esc closes.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtGui import QAction, QKeyEvent, QKeySequence
from PySide6.QtWidgets import QDialog, QLineEdit, QListWidget, QListWidgetItem, QVBoxLayout, QWidget

SHORTCUT = "Ctrl+K"


def plain(text: str) -> str:
    """An action's text as a person reads it: no mnemonic '&', no trailing ellipsis."""
    return text.replace("&&", "\0").replace("&", "").replace("\0", "&").rstrip("…").strip()


def matches(query: str, text: str) -> bool:
    """The query's letters appear in `text` in order (case does not matter)."""
    rest = iter(text.lower())
    return all(ch in rest for ch in query.lower() if not ch.isspace())


def actions_of(window: QWidget) -> list[QAction]:
    """The window's actions a person can run now, each once, in a stable order."""
    seen: set[int] = set()
    found: list[QAction] = []
    for action in window.findChildren(QAction):
        if id(action) in seen or action.isSeparator() or not plain(action.text()):
            continue
        if not action.isEnabled() or action.menu() is not None or action.property("palette_opener") \
                or action.property("palette_hidden"):
            continue
        seen.add(id(action))
        found.append(action)
    return sorted(found, key=lambda a: plain(a.text()).lower())


class CommandPalette(QDialog):
    def __init__(self, window: QWidget) -> None:
        super().__init__(window)
        self.window_ = window
        self.setWindowTitle("Commands")
        self.setModal(False)
        self.setMinimumWidth(460)
        box = QVBoxLayout(self)
        self.query = QLineEdit()
        self.query.setPlaceholderText("Type a command…")
        self.query.setAccessibleName("Command")
        self.query.setAccessibleDescription("Type to find a command; Enter runs it, Esc closes")
        self.list = QListWidget()
        self.list.setAccessibleName("Commands")
        box.addWidget(self.query)
        box.addWidget(self.list)
        self.query.textChanged.connect(self._filter)
        self.query.returnPressed.connect(self.run_selected)
        self.list.itemActivated.connect(lambda _item: self.run_selected())
        self.query.installEventFilter(self)
        self._actions = actions_of(window)
        self._filter("")

    def _filter(self, query: str) -> None:
        self.list.clear()
        for action in self._actions:
            name = plain(action.text())
            if not matches(query, name):
                continue
            key = action.shortcut().toString(QKeySequence.SequenceFormat.NativeText)
            item = QListWidgetItem(f"{name}    {key}" if key else name)
            item.setData(Qt.ItemDataRole.UserRole, action)
            item.setToolTip(action.toolTip())
            self.list.addItem(item)
        if self.list.count():
            self.list.setCurrentRow(0)

    def run_selected(self) -> None:
        item = self.list.currentItem()
        if item is None:
            return
        action = item.data(Qt.ItemDataRole.UserRole)
        self.close()
        if isinstance(action, QAction):
            action.trigger()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        """Up and Down move in the list while typing goes on in the query."""
        if watched is self.query and isinstance(event, QKeyEvent) \
                and event.type() == QEvent.Type.KeyPress \
                and event.key() in (Qt.Key.Key_Up, Qt.Key.Key_Down):
            row = self.list.currentRow() + (1 if event.key() == Qt.Key.Key_Down else -1)
            if 0 <= row < self.list.count():
                self.list.setCurrentRow(row)
            return True
        return False


def install(window: QWidget) -> QAction:
    """Adds Ctrl+K to `window`; returns the action (for a menu to show it)."""
    action = QAction("Command palette…", window)
    action.setProperty("palette_opener", True)
    action.setShortcut(QKeySequence(SHORTCUT))
    action.setShortcutContext(Qt.ShortcutContext.WindowShortcut)

    def open_palette() -> None:
        palette = CommandPalette(window)
        window.setProperty("commandPalette", palette)  # kept while it is open (and found by tests)
        palette.show()
        palette.query.setFocus()

    action.triggered.connect(lambda _=False: open_palette())
    window.addAction(action)
    return action
