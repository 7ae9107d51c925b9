"""The Backends view: for one backend the app talks to, every backend process on its store
(host, pid, state, start, last heartbeat, sessions held), refreshed every two seconds while
it is shown.

Opened from View ▸ Backends on the store… (the window's backend) and from a backend's header
in the sidebar, by its context menu.  A client only: `backend.list`, which needs the admin
scope, so a pairing whose token lacks it is told so instead of being refused every two
seconds.  The words and the rows come from `desktop.state.fleet`, as `turnkey backends`
prints them.  Hosts are whatever the other computers are called: shown as plain text.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

import shiboken6
from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QBrush, QColor, QFont, QHideEvent, QShowEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from desktop.qt import theme
from desktop.qt.aio import spawn
from desktop.qt.compat import emit
from desktop.qt.marks import dot
from desktop.state import fleet as words
from shared import protocol as p
from shared.methods import BackendList

if TYPE_CHECKING:
    from desktop.link import Link

REFRESH_MS = 2_000
MARK = "▸"  # the backend this view asks (the CLI's `*`)
NUMBERS = (2,)  # the PID column, right-aligned (the last one, Sessions held, fills the rest)


class FleetDialog(QDialog):
    """The table of one store's backends, and the calls that fill it."""

    listed = Signal(object)  # each BackendListResult shown
    failed = Signal(str)  # why nothing could be listed, in the words shown

    def __init__(self, link: Link, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.link = link
        self.listing: p.BackendListResult | None = None
        self._loading = False
        self.setWindowTitle(f"Backends — {link.title}")
        self.resize(780, 330)
        self._build()
        self.timer = QTimer(self, interval=REFRESH_MS)
        self.timer.timeout.connect(self.refresh)
        link.state.connect(lambda _state: self.refresh())
        theme.changed.connect(self._repaint)

    # --- layout ------------------------------------------------------------------------

    def _build(self) -> None:
        lay = QVBoxLayout(self)
        where = "this computer's backend" if not self.link.remote_host else self.link.title
        self.intro = QLabel(f"The backend processes that keep their sessions in the same store as "
                            f"{where}, and what each holds now. Refreshed every two seconds.")
        self.intro.setWordWrap(True)
        self.intro.setTextFormat(Qt.TextFormat.PlainText)
        lay.addWidget(self.intro)
        self.table = QTreeWidget()
        self.table.setAccessibleName("Backends on the store")
        self.table.setHeaderLabels(["", *words.HEADERS])
        self.table.setRootIsDecorated(False)
        self.table.setUniformRowHeights(True)
        # Nothing to do with a row: none is selected (the list is rebuilt every two seconds).
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        header = self.table.header()
        header.setStretchLastSection(True)  # a short host name leaves no gap before the PID
        header.setMinimumSectionSize(24)
        for column in range(len(words.HEADERS)):
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.ResizeToContents)
        for column in NUMBERS:
            self.table.headerItem().setTextAlignment(column, Qt.AlignmentFlag.AlignRight)
        lay.addWidget(self.table, 1)
        self.summary_label = QLabel()
        self.summary_label.setWordWrap(True)
        self.summary_label.setTextFormat(Qt.TextFormat.PlainText)
        lay.addWidget(self.summary_label)
        self.status_label = QLabel()
        self.status_label.setWordWrap(True)
        self.status_label.setTextFormat(Qt.TextFormat.PlainText)  # it quotes the backend's words
        theme.restyle(self.status_label, muted=True)
        lay.addWidget(self.status_label)
        row = QHBoxLayout()
        self.all_check = QCheckBox("Also those gone for over a day")
        self.all_check.setAccessibleDescription(
            "List the backends that stopped or died more than a day ago too")
        self.all_check.toggled.connect(lambda _on: self.refresh())
        self.close_button = QPushButton("Close")
        self.close_button.setDefault(True)
        self.close_button.clicked.connect(self.close)
        row.addWidget(self.all_check)
        row.addStretch(1)
        row.addWidget(self.close_button)
        lay.addLayout(row)

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        self.close_button.setFocus()
        self.refresh()
        self.timer.start()

    def hideEvent(self, event: QHideEvent) -> None:
        self.timer.stop()  # nothing is asked while nobody looks
        super().hideEvent(event)

    # --- listing -------------------------------------------------------------------------

    def blocked(self) -> str:
        """Why the backend cannot be asked now, in words; "" when it can."""
        server = self.link.server
        if self.link.current != "connected" or server is None:
            return "Not connected to this backend; the list comes back once it answers."
        if BackendList.method not in server.capabilities.methods:
            return "This backend is older: it cannot list the backends on its store. Update it."
        scopes = server.principal.scopes
        if "admin" not in scopes:
            return ("Listing the backends on its store needs a token with the admin scope; this "
                    f"pairing's token has {', '.join(scopes)}. Pair again with one made by "
                    "`turnkey token create --scopes read,submit,approve,admin` on that computer.")
        return ""

    def refresh(self) -> None:
        """Asks for the list again, unless hidden, already asking, or unable to ask."""
        if not self._alive() or not self.isVisible() or self._loading:
            return
        why = self.blocked()
        if why:
            self._say(why, "warning")
            emit(self.failed, why)
            return
        self._loading = True
        spawn(self._load(), self._failed)

    async def _load(self) -> None:
        try:
            result = await self.link.call(BackendList(all=self.all_check.isChecked()))
        finally:
            self._loading = False
        if self._alive():
            self.show_result(result)

    def show_result(self, result: p.BackendListResult) -> None:
        self.listing = result
        self.table.clear()
        for row in words.rows(result):
            self.table.addTopLevelItem(self._item(row))
        self.summary_label.setText(words.summary(result))
        self._say(f"{MARK} marks this window's backend, which answered. Updated at "
                  f"{datetime.now().strftime('%H:%M:%S')}.", "")
        emit(self.listed, result)

    def _item(self, row: words.Row) -> QTreeWidgetItem:
        item = QTreeWidgetItem([MARK if row.this else "", *row.cells])
        color = QColor(str(getattr(theme.colors(), row.tone, theme.colors().muted)))
        item.setIcon(3, dot(color.name()))
        item.setForeground(3, QBrush(color))
        for column in NUMBERS:
            item.setTextAlignment(column, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        for column in range(len(row.cells) + 1):
            item.setToolTip(column, row.tip)
        if row.this:
            font = QFont(self.table.font())
            font.setBold(True)
            for column in range(len(row.cells) + 1):
                item.setFont(column, font)
            item.setForeground(0, QBrush(QColor(theme.colors().accent)))
        item.setData(3, Qt.ItemDataRole.AccessibleTextRole, f"State: {row.state}")
        return item

    def _failed(self, message: str) -> None:
        if self._alive():
            self._say(message, "danger")
            emit(self.failed, message)

    def _say(self, text: str, tone: str) -> None:
        self.status_label.setText(text)
        theme.restyle(self.status_label, tone=tone, muted=not tone)

    def _repaint(self, _scheme: str = "") -> None:
        if self._alive() and self.listing is not None:
            self.show_result(self.listing)

    def _alive(self) -> bool:
        return shiboken6.isValid(self)
