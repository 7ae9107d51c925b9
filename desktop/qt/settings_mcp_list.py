"""The MCP page's list of servers: each by name with its state (a coloured dot and words) and
its tools; Add… and Remove… beneath.  The rows are `desktop.state.mcp.ServerRow`s."""

from __future__ import annotations

from PySide6.QtCore import QModelIndex, Qt, Signal
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from desktop.qt.compat import emit
from desktop.qt.marks import dot, state_color
from desktop.state import mcp


class ServerList(QWidget):
    """The servers by name with their state and tools; Add… and Remove… beneath."""

    picked = Signal(str)  # a server's name: the person selected its row

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        table = self.table = QTreeWidget()
        table.setAccessibleName("MCP servers")
        table.setAccessibleDescription("Each server's name, state and tools; Delete removes the "
                                       "selected server")
        table.setHeaderLabels(["Server", "State", "Tools"])
        table.setRootIsDecorated(False)
        table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        table.header().setAccessibleName("Server columns")
        table.header().setStretchLastSection(False)
        table.header().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        table.header().setSectionResizeMode(1, QHeaderView.ResizeMode.ResizeToContents)
        table.header().setSectionResizeMode(2, QHeaderView.ResizeMode.ResizeToContents)
        table.currentItemChanged.connect(self._changed)
        lay.addWidget(table, 1)
        buttons = QHBoxLayout()
        self.add_button = QPushButton("&Add…")
        self.add_button.setAccessibleDescription("Add an MCP server: a program or a URL")
        self.remove_button = QPushButton("&Remove…")
        self.remove_button.setAccessibleDescription("Remove the selected server, after asking")
        buttons.addWidget(self.add_button)
        buttons.addWidget(self.remove_button)
        buttons.addStretch(1)
        lay.addLayout(buttons)

    def _changed(self, item: QTreeWidgetItem | None, _previous: QTreeWidgetItem | None) -> None:
        if item is not None:
            emit(self.picked, self._name(item))

    @staticmethod
    def _name(item: QTreeWidgetItem) -> str:
        return str(item.data(0, Qt.ItemDataRole.UserRole))

    def row(self, index: int) -> QTreeWidgetItem:
        item = self.table.topLevelItem(index)
        assert item is not None, index
        return item

    def shown(self) -> list[str]:
        return [self._name(self.row(i)) for i in range(self.table.topLevelItemCount())]

    def rebuild(self, names: list[str], selected: str | None) -> None:
        """A row per server (`selected`'s current), without telling anyone."""
        self.table.blockSignals(True)
        self.table.clear()
        for name in names:
            item = QTreeWidgetItem([name, "", ""])
            item.setData(0, Qt.ItemDataRole.UserRole, name)
            self.table.addTopLevelItem(item)
        self.table.blockSignals(False)
        if selected is not None:
            self.mark(selected)

    def fill(self, rows: list[mcp.ServerRow]) -> None:
        """Each row's state (in its colour) and tools, in place."""
        for i, row in enumerate(rows):
            item = self.row(i)
            item.setText(1, row.state)
            item.setIcon(1, dot(state_color(row.tone)))  # an icon: a selected row keeps its colour
            item.setForeground(1, QBrush(QColor(state_color(row.tone))))
            item.setText(2, row.tools)
            item.setToolTip(1, row.state_tip)
            item.setToolTip(0, row.what)

    def pick(self, name: str) -> None:
        """Selects `name`'s row as a click would (`picked` follows)."""
        if name in self.shown():
            self.table.setCurrentItem(self.row(self.shown().index(name)))

    def mark(self, name: str) -> None:
        """Shows `name`'s row as the current one, without telling anyone."""
        if name in self.shown():
            self.table.blockSignals(True)
            self.table.setCurrentItem(self.row(self.shown().index(name)))
            self.table.blockSignals(False)

    def unmark(self) -> None:
        """No row current (a new server is being made), without telling anyone."""
        self.table.blockSignals(True)
        self.table.setCurrentIndex(QModelIndex())
        self.table.clearSelection()
        self.table.blockSignals(False)
