"""A window on one session: transcript, approvals, queue, notices, composer, usage."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from datetime import UTC
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QModelIndex, Qt, QTimer, Signal
from PySide6.QtGui import (
    QAction,
    QCloseEvent,
    QGuiApplication,
    QKeyEvent,
    QKeySequence,
    QShortcut,
    QShowEvent,
)
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QInputDialog,
    QLabel,
    QMainWindow,
    QPlainTextEdit,
    QPushButton,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from desktop.qt import palette
from desktop.qt.aio import spawn
from desktop.qt.compat import emit
from desktop.qt.follow import Follower
from desktop.qt.transcript_view import TranscriptModel, esc, make_view
from desktop.state.session import SessionState
from desktop.state.sessions import status_label
from shared import protocol as p
from shared.client import RESYNC, ConnectionLost, Incoming, RpcError
from shared.errors import ErrorCode
from shared.methods import (
    AdmissionCancel,
    ApprovalRespond,
    PromptSubmit,
    SessionMessages,
    SessionResume,
    SessionUpdate,
    TurnInterrupt,
)

if TYPE_CHECKING:
    from desktop.link import Link

PAGE = 100
SUBMIT_ATTEMPTS = 5
RECONCILE_PAGES = 20  # a turn longer than this many pages keeps its live items
DECISIONS: tuple[tuple[p.Decision, str], ...] = (
    ("once", "Allow once"), ("session", "Allow for this session"), ("always", "Always allow"),
    ("deny", "Deny"),
)


class Composer(QPlainTextEdit):
    """Enter sends, Shift+Enter is a newline, Esc interrupts."""

    send = Signal()
    interrupt = Signal()

    def __init__(self) -> None:
        super().__init__()
        self.setPlaceholderText("Ask Turnkey… (Enter sends, Shift+Enter for a new line, Esc stops)")
        self.setTabChangesFocus(True)
        self.setMaximumHeight(110)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)

    def keyPressEvent(self, e: QKeyEvent) -> None:
        if e.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter) \
                and not e.modifiers() & Qt.KeyboardModifier.ShiftModifier:
            emit(self.send)
            return
        if e.key() == Qt.Key.Key_Escape:
            emit(self.interrupt)
            return
        super().keyPressEvent(e)


class ApprovalCard(QFrame):
    """One pending approval with its four answers and the time left."""

    def __init__(self, approval: p.Approval, answer: Callable[[str, p.Decision], None]) -> None:
        super().__init__()
        self.approval = approval
        self.setObjectName("approvalCard")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setStyleSheet("#approvalCard { border: 2px solid #d68a00; border-radius: 6px; }")
        box = QVBoxLayout(self)
        title = QLabel(f"<b>{esc(approval.tool)}</b> needs your approval")
        what = QLabel(f"<code>{esc(approval.summary)}</code>")
        what.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        what.setWordWrap(True)
        why = QLabel(esc(approval.reason))
        why.setWordWrap(True)
        self.left = QLabel()
        self.left.setStyleSheet("color: #8a8f98")
        row = QHBoxLayout()
        self.buttons: dict[str, QPushButton] = {}
        for decision, text in DECISIONS:
            b = QPushButton(text)
            b.setAccessibleDescription(f"{text} for {approval.tool}: {approval.summary}")
            b.clicked.connect(lambda _=False, d=decision: answer(approval.approval_id, d))
            self.buttons[decision] = b
            row.addWidget(b)
        row.addStretch(1)
        row.addWidget(self.left)
        for w in (title, what, why):
            box.addWidget(w)
        box.addLayout(row)
        self.tick()

    def tick(self) -> None:
        from datetime import datetime

        try:
            end = datetime.fromisoformat(self.approval.expires_at.replace("Z", "+00:00"))
        except ValueError:
            return
        left = int((end - datetime.now(UTC)).total_seconds())
        self.left.setText(f"{max(0, left) // 60}:{max(0, left) % 60:02d} left" if left > 0 else "expiring…")

    def busy(self, on: bool) -> None:
        for b in self.buttons.values():
            b.setEnabled(not on)


class QueueRow(QFrame):
    def __init__(self, receipt: p.Receipt, text: str, cancel: Callable[[str], None]) -> None:
        super().__init__()
        row = QHBoxLayout(self)
        row.setContentsMargins(6, 2, 6, 2)
        lines = text.strip().splitlines()
        label = QLabel(f"Queued: {esc((lines[0] if lines else '')[:120])}")
        label.setStyleSheet("color: #8a8f98")
        self.cancel = QPushButton("Cancel")
        self.cancel.setAccessibleDescription(f"Cancel the queued message: {text[:80]}")
        self.cancel.clicked.connect(lambda: cancel(receipt.admission_id))
        row.addWidget(label, 1)
        row.addWidget(self.cancel)


# What a session window asks of the app (the controller carries it out), with the menu
# text and shortcut: the same File and Help menus, and shortcuts, as the session browser.
# (Key sequences are made when a window is: not before the QApplication exists.)
APP_ACTIONS: tuple[tuple[str, str, QKeySequence.StandardKey | str | None], ...] = (
    ("new", "&New session…", QKeySequence.StandardKey.New),
    ("sessions", "&All sessions", "Ctrl+Shift+L"),
    ("settings", "&Settings…", "Ctrl+,"),  # (the platform's StandardKey may be empty)
    ("quit", "&Quit", "Ctrl+Q"),
    ("pop_out", "Open in new &window", "Ctrl+Shift+O"),
    ("logs", "Open &logs folder", None),
    ("data", "Open &data folder", None),
)


class SessionWindow(QMainWindow):
    closed = Signal(str)  # session_id
    error = Signal(str)
    requested = Signal(str, str)  # an APP_ACTIONS name, this window's session_id

    def __init__(self, link: Link, session_id: str) -> None:
        super().__init__()
        self.link = link
        self.session_id = session_id
        self.state = SessionState(session_id)
        self.state.on_turn_done = self._turn_done
        self.state.on_change = self._refresh_soon
        self.model = TranscriptModel(self.state.transcript)
        self.fetching = False
        self.cards: dict[str, ApprovalCard] = {}
        self.queue_rows: dict[str, QueueRow] = {}
        self._shown = False
        self._build()
        self.setWindowTitle("Turnkey")
        self.resize(860, 720)
        link.received.connect(self._on_event)
        link.state.connect(self._on_link_state)
        self._refresh_timer = QTimer(self, singleShot=True, interval=30)
        self._refresh_timer.timeout.connect(self.refresh)
        self._tick = QTimer(self, interval=1000)
        self._tick.timeout.connect(self._on_tick)
        self._tick.start()
        spawn(self._open(), self._show_error)

    # --- layout --------------------------------------------------------------------

    def _build(self) -> None:
        central = QWidget()
        box = QVBoxLayout(central)
        box.setContentsMargins(8, 8, 8, 8)
        self.view = make_view(self.model)
        self.view.setAccessibleName("Conversation")
        self.view.setAccessibleDescription(
            "The messages and tool calls of this session; click a tool call to show its output. "
            "Typing here goes to the message box")
        self.view.clicked.connect(self._clicked)
        self.view.verticalScrollBar().valueChanged.connect(self._scrolled)
        self.notice = QLabel()
        self.notice.setWordWrap(True)
        self.notice.setStyleSheet("color: #d68a00")
        self.notice.hide()
        self.banner = QLabel()
        self.banner.setWordWrap(True)
        self.banner.setStyleSheet("background: #d0393e; color: white; padding: 4px; border-radius: 4px")
        self.banner.hide()
        self.approvals_box = QVBoxLayout()
        self.queue_box = QVBoxLayout()
        self.composer = Composer()
        self.composer.setAccessibleName("Message")
        self.composer.setAccessibleDescription(
            "Your message to Turnkey: Enter sends, Shift+Enter starts a new line, Esc stops the turn")
        self.composer.send.connect(self.send)
        self.composer.interrupt.connect(self.interrupt)
        self.follower = Follower(self.view, self.composer)
        self.send_button = QPushButton("Send")
        self.send_button.setAccessibleDescription("Send the message (Enter)")
        self.send_button.clicked.connect(self.send)
        self.stop_button = QPushButton("Stop")
        self.stop_button.setToolTip("Interrupt the running turn (Esc)")
        self.stop_button.clicked.connect(self.interrupt)
        buttons = QVBoxLayout()
        buttons.addWidget(self.send_button)
        buttons.addWidget(self.stop_button)
        buttons.addStretch(1)
        compose = QHBoxLayout()
        compose.addWidget(self.composer, 1)
        compose.addLayout(buttons)
        self.header = QLabel()
        self.header.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        box.addWidget(self.header)
        box.addWidget(self.banner)
        box.addWidget(self.view, 1)
        box.addWidget(self.notice)
        box.addLayout(self.approvals_box)
        box.addLayout(self.queue_box)
        box.addLayout(compose)
        self.setCentralWidget(central)
        self.status_label = QLabel()
        self.usage_label = QLabel()
        self.conn_label = QLabel()
        self.statusBar().addWidget(self.status_label)
        self.statusBar().addWidget(self.conn_label)
        self.statusBar().addPermanentWidget(self.usage_label)
        QShortcut(QKeySequence("Ctrl+Return"), self, lambda: self.send())
        QShortcut(QKeySequence(QKeySequence.StandardKey.Copy), self.view, lambda: self._copy())
        self._menus()

    def _menus(self) -> None:
        """File, Session and Help: a session window is never a dead end (back to every
        session, a new one, settings, quit), with the browser's shortcuts."""
        self.app_actions: dict[str, QAction] = {}
        for name, text, key in APP_ACTIONS:
            action = QAction(text, self)
            if key is not None:
                action.setShortcut(QKeySequence(key))
            action.triggered.connect(lambda _=False, n=name: emit(self.requested, n, self.session_id))
            self.app_actions[name] = action
        close = QAction("&Close window", self)
        close.setShortcut(QKeySequence(QKeySequence.StandardKey.Close))
        close.triggered.connect(lambda _=False: self._close_window())
        self.rename_action = QAction("&Rename…", self)
        self.rename_action.setShortcut(QKeySequence("F2"))
        self.rename_action.triggered.connect(lambda _=False: self.rename())
        self.stop_action = QAction("S&top the running turn", self)
        self.stop_action.setShortcut(QKeySequence("Ctrl+."))
        self.stop_action.triggered.connect(lambda _=False: self.interrupt())
        a = self.app_actions
        file_menu = self.menuBar().addMenu("&File")
        for item in (a["new"], a["sessions"], None, a["settings"], None, close, a["quit"]):
            if item is None:
                file_menu.addSeparator()
            else:
                file_menu.addAction(item)
        session_menu = self.menuBar().addMenu("&Session")
        for item in (self.rename_action, a["pop_out"], self.stop_action):
            session_menu.addAction(item)
        help_menu = self.menuBar().addMenu("&Help")
        help_menu.addAction(palette.install(self))
        help_menu.addSeparator()
        help_menu.addAction(a["logs"])
        help_menu.addAction(a["data"])

    def rename(self) -> None:
        """F2: a new title for this session (not modal: the loop keeps running)."""
        dialog = QInputDialog(self)
        dialog.setWindowTitle("Rename session")
        dialog.setLabelText("Title:")
        dialog.setTextValue(self.state.title)
        dialog.textValueSelected.connect(self._renamed)
        dialog.open()
        self.rename_dialog = dialog

    def _renamed(self, title: str) -> None:
        title = title.strip()
        if title and title != self.state.title:
            spawn(self.link.call(SessionUpdate(session_id=self.session_id, title=title)),
                  self._show_error)

    # --- loading -------------------------------------------------------------------

    async def _open(self) -> None:
        result = await self.link.open_session(self.session_id)
        self.state.load(result)
        self.follower.jump()
        self.refresh()

    async def _reload(self) -> None:
        self.state.reset()
        result = await self.link.call(SessionResume(session_id=self.session_id))
        with self.follower.replacing():
            self.state.load(result)
        self.refresh()

    async def _continue_in(self, child: str) -> None:
        """Compression rotated the conversation into a child session: this window follows it
        (the earlier messages stay in the parent session, listed in the browser)."""
        parent = self.session_id
        notice = self.state.notice  # "context compressed", said in the parent
        self.session_id = self.state.session_id = child
        self.state.reset()
        result = await self.link.open_session(child)
        self.state.load(result)
        if self.state.notice is None:
            self.state.notice = notice
        self.follower.jump()
        await self.link.close_session(parent)
        self.banner.setText("The conversation continues in a new session; earlier messages are "
                            "summarized here and kept in full in the previous session.")
        self.banner.show()
        QTimer.singleShot(10_000, self.banner.hide)
        self.refresh()

    def fetch_older(self) -> None:
        t = self.state.transcript
        if self.fetching or not t.has_more or not t.oldest_message_id:
            return
        self.fetching = True
        spawn(self._fetch_older(t.oldest_message_id), self._show_error)

    async def _fetch_older(self, before_id: str) -> None:
        try:
            page = await self.link.call(SessionMessages(
                session_id=self.session_id, before_id=before_id, limit=PAGE))
            bar = self.view.verticalScrollBar()
            keep = bar.maximum() - bar.value()
            self.state.transcript.prepend(page.messages, page.has_more)
            self.view.doItemsLayout()
            bar.setValue(bar.maximum() - keep)  # the same messages stay under the reader's eyes
        finally:
            self.fetching = False

    def _scrolled(self, value: int) -> None:
        if value <= self.view.verticalScrollBar().minimum() + 4 and self.state.loaded:
            self.fetch_older()

    # --- events --------------------------------------------------------------------

    def _on_event(self, event: Incoming) -> None:
        mine = event.session_id == self.session_id
        if event.type == RESYNC and mine:
            spawn(self._reload(), self._show_error)
            return
        if isinstance(event.data, p.SessionDeletedEvent) and mine:
            self.banner.setText("This session was deleted.")
            self.banner.show()
            self.composer.setEnabled(False)
            return
        if isinstance(event.data, p.CompressionComplete) and mine and event.data.child_session_id:
            spawn(self._continue_in(event.data.child_session_id), self._show_error)
        self.state.apply(event)  # the follower keeps a reader at the bottom there

    def _on_link_state(self, state: str) -> None:
        self._refresh_soon()

    def _turn_done(self, turn_id: str) -> None:
        spawn(self._reconcile(turn_id), self._show_error)

    async def _reconcile(self, turn_id: str) -> None:
        """The finished turn as stored, in place of what was streamed."""
        request = SessionMessages(session_id=self.session_id, limit=PAGE)
        rows: list[p.Message] = []
        for _ in range(RECONCILE_PAGES):  # back to the turn's first row (its prompt)
            page = await self.link.call(request)
            rows = page.messages + rows
            if not page.has_more or not rows or any(
                    m.turn_id == turn_id and m.role == "user" for m in page.messages) \
                    or rows[0].turn_id != turn_id:
                break
            request = SessionMessages(session_id=self.session_id, limit=PAGE,
                                      before_id=rows[0].message_id)
        with self.follower.replacing():  # the stored rows of what was shown: not news
            self.state.transcript.reconcile_turn(turn_id, rows)

    # --- actions -------------------------------------------------------------------

    def send(self) -> None:
        text = self.composer.toPlainText().strip()
        if not text:
            return
        self.composer.clear()
        self.follower.jump()  # sending always shows the end, where the answer will come
        spawn(self._submit(text), self._submit_failed(text))

    async def _submit(self, text: str) -> None:
        # The same request id on every attempt: if the connection drops after the backend took
        # the prompt, sending it again returns the first receipt instead of running it twice.
        request = PromptSubmit(session_id=self.session_id, request_id=str(uuid.uuid4()), text=text)
        for attempt in range(SUBMIT_ATTEMPTS):
            try:
                result = await self.link.call(request)
                break
            except ConnectionLost:
                if attempt == SUBMIT_ATTEMPTS - 1:
                    raise
                await asyncio.sleep(0.2)  # the next call waits for the reconnection itself
        self.state.submitted(result.receipt, text)
        self._refresh_soon()

    def _submit_failed(self, text: str) -> Callable[[str], None]:
        def failed(message: str) -> None:
            if not self.composer.toPlainText().strip():
                self.composer.setPlainText(text)  # the words are not lost
            self._show_error(f"Not sent: {message}")
        return failed

    def interrupt(self) -> None:
        if self.state.busy:
            spawn(self.link.call(TurnInterrupt(session_id=self.session_id)), self._show_error)

    def answer(self, approval_id: str, decision: p.Decision) -> None:
        card = self.cards.get(approval_id)
        if card is not None:
            card.busy(True)

        async def go() -> None:
            try:
                await self.link.call(ApprovalRespond(approval_id=approval_id, decision=decision))
            except Exception as exc:
                if isinstance(exc, RpcError) and exc.code == ErrorCode.APPROVAL_CLOSED:
                    self.state.approvals.pop(approval_id, None)  # answered elsewhere, or expired
                    self.refresh()
                    return
                if card is not None:
                    card.busy(False)
                raise

        spawn(go(), self._show_error)

    def cancel(self, admission_id: str) -> None:
        async def go() -> None:
            await self.link.call(AdmissionCancel(admission_id=admission_id))
            self.state.queue.pop(admission_id, None)
            self.refresh()

        spawn(go(), self._show_error)

    def show_approval(self, approval_id: str) -> None:
        """Brings the window forward with the approval's card in view (a tray click)."""
        self.showNormal()
        self.raise_()
        self.activateWindow()
        card = self.cards.get(approval_id)
        if card is not None:
            card.buttons["once"].setFocus()

    def _clicked(self, index: QModelIndex) -> None:
        self.state.transcript.toggle(index.row())

    def _close_window(self) -> None:
        self.close()

    def _copy(self) -> None:
        index = self.view.currentIndex()
        if index.isValid():
            QGuiApplication.clipboard().setText(str(index.data(Qt.ItemDataRole.DisplayRole) or ""))

    def _show_error(self, message: str) -> None:
        self.banner.setText(message)
        self.banner.show()
        QTimer.singleShot(8000, self.banner.hide)
        emit(self.error, message)

    # --- refresh -------------------------------------------------------------------

    def _refresh_soon(self) -> None:
        if not self._refresh_timer.isActive():
            self._refresh_timer.start()

    def refresh(self) -> None:
        s = self.state
        self.setWindowTitle(f"{s.title} — Turnkey")
        folder = s.session.cwd if s.session else ""
        home = str(Path.home())
        if folder.startswith(home):
            folder = "~" + folder[len(home):]
        model = s.session.model if s.session else ""
        self.header.setText(f"<b>{esc(s.title)}</b> &nbsp;<span style='color:#8a8f98'>"
                            f"{esc(folder)} · {esc(model)}</span>")
        link_state = self.link.current
        self.conn_label.setText("" if link_state == "connected" else f"⟳ {link_state}…")
        self.conn_label.setStyleSheet("color: #d68a00")
        self.status_label.setText(status_label(s.status))
        self.usage_label.setText(s.usage_line())
        self.stop_button.setEnabled(s.busy)
        if s.notice is not None:
            self.notice.setText(s.notice.render(time.monotonic()))
            self.notice.show()
        else:
            self.notice.hide()
        for aid in [a for a in self.cards if a not in s.approvals]:
            card = self.cards.pop(aid)
            self.approvals_box.removeWidget(card)
            card.deleteLater()
        for aid, approval in s.approvals.items():
            if aid not in self.cards:
                card = ApprovalCard(approval, self.answer)
                self.cards[aid] = card
                self.approvals_box.addWidget(card)
        for adm in [a for a in self.queue_rows if a not in s.queue]:
            row = self.queue_rows.pop(adm)
            self.queue_box.removeWidget(row)
            row.deleteLater()
        for adm, receipt in s.queue.items():
            if adm not in self.queue_rows:
                row = QueueRow(receipt, receipt.text or s.prompts.get(adm, ""), self.cancel)
                self.queue_rows[adm] = row
                self.queue_box.addWidget(row)

    def _on_tick(self) -> None:
        for card in self.cards.values():
            card.tick()
        if self.state.notice is not None and self.state.notice.until is not None:
            self.notice.setText(self.state.notice.render(time.monotonic()))

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        if not self._shown:
            self._shown = True
            self.composer.setFocus(Qt.FocusReason.ActiveWindowFocusReason)  # type right away

    def closeEvent(self, event: QCloseEvent) -> None:
        self._tick.stop()
        try:
            self.link.received.disconnect(self._on_event)
            self.link.state.disconnect(self._on_link_state)
        except (RuntimeError, TypeError):
            pass
        spawn(self.link.close_session(self.session_id))
        emit(self.closed, self.session_id)
        super().closeEvent(event)
