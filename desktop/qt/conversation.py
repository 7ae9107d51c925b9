"""One session's conversation: header, transcript, approvals, queue, notices and composer.

A `Conversation` is a widget, not a window: the main window shows one beside its sessions
sidebar (and swaps it when another session is chosen), and a popped-out `SessionWindow`
holds one on its own.  Each follows its session through the link (`open_session` counts
followers, so the same session in two places is one subscription) until `close_conversation`.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from PySide6.QtCore import QEvent, QModelIndex, QObject, Qt, QTimer, Signal
from PySide6.QtGui import QFont, QFontMetrics, QKeyEvent, QKeySequence, QResizeEvent, QShortcut, QTextCursor
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QMenu,
    QPlainTextEdit,
    QPushButton,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from desktop.qt import theme
from desktop.qt.aio import spawn
from desktop.qt.compat import emit, set_placeholder
from desktop.qt.doors import DoorWatch
from desktop.qt.edit_prompt import EditPromptDialog
from desktop.qt.follow import Follower
from desktop.qt.model_box import ModelBox
from desktop.qt.screens import question
from desktop.qt.shelves import ApprovalCard, QueuePanel, QueueRow, Shelf, change_preview, shrinkable
from desktop.qt.transcript_view import TranscriptModel, esc, make_view
from desktop.state import doors as door_words
from desktop.state.answers import is_prompt
from desktop.state.copying import quoted
from desktop.state.delegation import unnamed_children
from desktop.state.model_choices import Choice, change, current, others
from desktop.state.session import SessionState
from desktop.state.sessions import home_relative, status_label
from desktop.state.transcript import ToolItem, UserItem
from desktop.state.turns import TurnActions, latest
from shared import protocol as p
from shared.client import RESYNC, ApprovalClosed, ConnectionLost, Incoming
from shared.methods import (
    AdmissionCancel,
    ApprovalRespond,
    PromptSubmit,
    ProviderList,
    Request,
    SessionChoose,
    SessionFork,
    SessionGet,
    SessionList,
    SessionMessages,
    SessionRegenerate,
    SessionResume,
    SessionUndo,
    SessionUpdate,
    TurnInterrupt,
)

if TYPE_CHECKING:
    from desktop.link import Link

R = TypeVar("R")
PAGE = 100
SUBMIT_ATTEMPTS = 5
RECONCILE_PAGES = 20  # a turn longer than this many pages keeps its live items
MATCH_PAGES = 20  # how far back a search match is looked for before giving up
# The approval cards under the transcript take at most this share of the conversation's height
# (they scroll beyond), and the queue, opened, a few rows: the transcript keeps half or more.
APPROVALS_SHARE = 0.2
QUEUE_SHARE = 0.15
QUEUE_ROWS_SHOWN = 3.5
STATUS_TONES = {"running": "accent", "queued": "accent", "waiting_approval": "warning",
                "unknown": "warning"}
LONG_MESSAGE_TOKENS = 8_000  # a message box text over this (estimated) warns: it is resent every turn


def _editable(item: Any) -> bool:
    """A message of yours that can be edited into a branch: a prompt whose row is stored."""
    return is_prompt(item) and not item.hidden and not item.key.startswith("prompt:")


IDLE_HINT = "Message Turnkey…  (Enter sends · Shift+Enter new line · Esc stops)"
RUNNING_HINT = "Steer the running turn (Alt+Enter) or queue a message for after it (Enter)…"


class Composer(QPlainTextEdit):
    """Enter sends, Shift+Enter is a newline (Esc, which stops the turn, is the window's: see
    `Window.stop_action`).  Two lines high when empty, it grows with what is typed up to
    MAX_LINES, then scrolls."""

    MIN_LINES = 2
    MAX_LINES = 10

    send = Signal()
    steer = Signal()

    def __init__(self) -> None:
        super().__init__()
        self.setObjectName("composer")
        self.setPlaceholderText(IDLE_HINT)
        self.setTabChangesFocus(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.document().documentLayout().documentSizeChanged.connect(lambda _size: self._fit())
        self._fit()

    def lines(self) -> int:
        """The lines the text takes as shown (wrapped lines counted), at least one."""
        return max(1, int(self.document().documentLayout().documentSize().height()))

    def _fit(self) -> None:
        shown = max(self.MIN_LINES, min(self.MAX_LINES, self.lines()))
        margins = self.contentsMargins()
        height = (shown * self.fontMetrics().lineSpacing() + 2 * int(self.document().documentMargin())
                  + margins.top() + margins.bottom())
        if height != self.height():
            self.setFixedHeight(height)

    def keyPressEvent(self, e: QKeyEvent) -> None:
        if e.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter) \
                and not e.modifiers() & Qt.KeyboardModifier.ShiftModifier:
            emit(self.steer if e.modifiers() & Qt.KeyboardModifier.AltModifier else self.send)
            return
        super().keyPressEvent(e)


class Conversation(QWidget):
    error = Signal(str)
    changed = Signal()  # title, status or session changed: the window's title follows
    moved = Signal(str, str)  # compression continued the conversation: old, new session_id
    open_requested = Signal(str)  # a sub-agent's session, to open in a window of its own
    # A session to show here instead, at a message ("": its end): a branch just made, or
    # the original a branch was made from.
    switch_requested = Signal(str, str)

    def __init__(self, link: Link, session_id: str, at_message: str | None = None) -> None:
        super().__init__()
        self.setObjectName("conversation")
        self.link = link
        self.session_id = session_id
        self.state = SessionState(session_id)
        self.state.on_turn_done = self._turn_done
        self.state.on_change = self._refresh_soon
        self.model = TranscriptModel(self.state.transcript)
        self.fetching = False
        self.closed = False
        self._resumed: list[p.Message] = []  # the page the session opened with
        self._listed: list[p.ProviderChoice] | None = None  # provider.list's, once answered
        self._note_until = 0.0  # an undo's note shows until then
        self._original_title: str | None = None  # a branch's original session, once read
        self.cards: dict[str, ApprovalCard] = {}
        self.queue_rows: dict[str, QueueRow] = {}
        # The chat rooms (messaging doors) this session is also reached from: the header says so.
        self.doors = DoorWatch.of(link)
        self._build()
        link.received.connect(self._on_event)
        link.state.connect(self._on_link_state)
        self._refresh_timer = QTimer(self, singleShot=True, interval=30)
        self._refresh_timer.timeout.connect(self.refresh)
        self.doors.changed.connect(self._refresh_soon)
        self._tick = QTimer(self, interval=1000)
        self._tick.timeout.connect(self._on_tick)
        self._tick.start()
        theme.changed.connect(self._restyle)
        spawn(self._open(at_message), self._show_error)

    # --- layout --------------------------------------------------------------------

    def _build(self) -> None:
        box = QVBoxLayout(self)
        box.setContentsMargins(0, 0, 0, 0)
        box.setSpacing(0)
        header = QWidget()
        header.setObjectName("conversationHeader")
        top = QHBoxLayout(header)
        top.setContentsMargins(18, 10, 12, 10)
        # The title on one line, the folder, model and rooms on the next, each cut with "…" to
        # the room there is: neither sets the window's minimum width.
        self.header = QLabel()
        self.header.setMinimumWidth(40)
        self.header.setAccessibleName("Session")
        self.header.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.header.installEventFilter(self)
        self._header_parts = ("", "", "")  # title, where (folder, model, rooms), rooms' tooltip
        self.status_label = QLabel()
        self.status_label.setObjectName("statusChip")
        self.conn_label = QLabel()
        self.conn_label.setProperty("tone", "warning")
        self.model_box = ModelBox()
        self.model_box.chosen.connect(self._choose)
        self.model_box.opening.connect(lambda: spawn(self._fetch_providers()))
        top.addWidget(self.header, 1)
        top.addWidget(self.model_box)
        top.addWidget(self.conn_label)
        top.addWidget(self.status_label, 0, Qt.AlignmentFlag.AlignVCenter)
        self.header_bar = top  # a window adds its own buttons here (pop out)
        column = QVBoxLayout()
        column.setContentsMargins(16, 8, 16, 14)
        column.setSpacing(8)
        self.view = make_view(self.model)
        self.view.setProperty("flat", True)
        self.view.setAccessibleName("Conversation")
        self.view.setAccessibleDescription(
            "The messages and tool calls of this session; click a tool call to show its output, "
            "drag over text to select it, Enter on a message to read it with the keyboard. "
            "Typing here goes to the message box")
        self.view.clicked.connect(self._clicked)
        self.view.quote_requested.connect(self.quote)
        self.view.open_session_requested.connect(lambda sid: emit(self.open_requested, sid))
        self.view.page_requested.connect(lambda row, delta: self.page_answer(row, delta))
        self.view.regenerate_requested.connect(self.regenerate)
        self.view.edit_requested.connect(lambda row: self.edit_prompt(row))
        self.view.branch_requested.connect(lambda sid: emit(self.switch_requested, sid, ""))
        self.view.verticalScrollBar().valueChanged.connect(self._scrolled)
        self.notice = QLabel()
        self.notice.setWordWrap(True)
        self.notice.setProperty("tone", "warning")
        self.notice.hide()
        self.banner = QLabel()
        self.banner.setObjectName("errorBanner")
        self.banner.setWordWrap(True)
        self.banner.hide()
        # Stays while the session's summary says its folder holds all the person's files
        # (home or /): the backend's words, as plain text (a path may hold `<`).
        self.folder_note = QLabel()
        self.folder_note.setObjectName("folderWarning")
        self.folder_note.setProperty("banner", "warning")
        self.folder_note.setTextFormat(Qt.TextFormat.PlainText)
        self.folder_note.setWordWrap(True)
        self.folder_note.hide()
        # A branch says where it was made from, with a link back (keyboard too: Tab reaches it).
        self.branch_note = QLabel()
        self.branch_note.setObjectName("branchNote")
        self.branch_note.setProperty("banner", "info")
        self.branch_note.setTextFormat(Qt.TextFormat.RichText)
        self.branch_note.setWordWrap(True)
        self.branch_note.setTextInteractionFlags(Qt.TextInteractionFlag.LinksAccessibleByMouse
                                                 | Qt.TextInteractionFlag.LinksAccessibleByKeyboard)
        self.branch_note.setFocusPolicy(Qt.FocusPolicy.TabFocus)
        self.branch_note.linkActivated.connect(lambda _href: self.open_original())
        self.branch_note.hide()
        self.thinking = QLabel("Thinking…")
        self.thinking.setObjectName("thinking")
        self.thinking.setProperty("muted", True)
        self.thinking.setAccessibleName("Thinking")
        self.thinking.hide()
        self._build_turn_bar()
        self.empty = QLabel(self.view.viewport())
        self.empty.setObjectName("conversationEmpty")
        self.empty.setWordWrap(True)
        self.empty.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty.setTextFormat(Qt.TextFormat.RichText)
        self.empty.hide()
        self.view.viewport().installEventFilter(self)
        self.composer = Composer()
        self.composer.setAccessibleName("Message")
        self.composer.setAccessibleDescription(
            "Your message to Turnkey: Enter sends, Shift+Enter starts a new line, Esc stops the turn")
        self.composer.send.connect(self.send)
        self.follower = Follower(self.view, self.composer)
        # Send (Enter) is the primary action, whether it sends now or queues after the running
        # turn; Steer (Alt+Enter) is secondary.
        self.send_button = QPushButton("Send")
        self.send_button.setProperty("primary", True)
        self.send_button.setDefault(True)
        self.send_button.setAccessibleDescription("Send the message (Enter)")
        self.send_button.clicked.connect(self.send)
        # While a turn runs: Steer adds the message to it (read at its next step), and Send
        # becomes Queue (the message runs after it).
        self.steer_button = QPushButton("Steer")
        self.steer_button.setAccessibleDescription(
            "Add the message to the running turn; the agent reads it at its next step (Alt+Enter)")
        self.steer_button.setToolTip("Add this to the running turn: the agent reads it at its "
                                     "next step, without stopping (Alt+Enter)")
        self.steer_button.clicked.connect(self.steer)
        self.steer_button.hide()
        self._steering = False  # the buttons show Steer and Queue (a turn runs)
        self.composer.steer.connect(self.steer)
        self.stop_button = QPushButton("Stop")
        self.stop_button.setAccessibleDescription("Interrupt the running turn (Esc)")
        self.stop_button.setToolTip("Interrupt the running turn (Esc)")
        self.stop_button.clicked.connect(self.interrupt)
        self.usage_label = shrinkable(QLabel())
        self.usage_label.setProperty("muted", True)
        frame = QFrame()
        frame.setObjectName("composerFrame")
        self.composer_frame = frame
        self.composer.installEventFilter(self)
        inner = QVBoxLayout(frame)
        inner.setContentsMargins(10, 6, 8, 8)
        inner.setSpacing(4)
        inner.addWidget(self.composer)
        self.long_note = QLabel()  # a long message's cost, under the box (see _measure)
        self.long_note.setObjectName("longMessageNote")
        self.long_note.setProperty("muted", True)
        self.long_note.setWordWrap(True)
        self.long_note.hide()
        self.composer.textChanged.connect(self._measure)
        inner.addWidget(self.long_note)
        under = QHBoxLayout()
        under.addWidget(self.usage_label, 1)
        under.addWidget(self.stop_button)
        under.addWidget(self.steer_button)
        under.addWidget(self.send_button)
        inner.addLayout(under)
        # Under the transcript, each bounded (resizeEvent): approvals scroll within their
        # share of the height, and many queued messages fold into one line.
        self.approvals_shelf = Shelf("approvalsShelf")
        self.queue_panel = QueuePanel()
        self.queue_panel.toggled.connect(lambda _on: self._bound_shelves())
        self._focus_card: str | None = None  # an approval to focus once its card is shown
        self._bound_timer = QTimer(self, singleShot=True, interval=0)
        self._bound_timer.timeout.connect(self._bound_shelves)
        column.addWidget(self.banner)
        column.addWidget(self.folder_note)
        column.addWidget(self.branch_note)
        column.addWidget(self.view, 1)
        column.addWidget(self.thinking)
        column.addWidget(self.notice)
        column.addWidget(self.turn_bar)
        column.addWidget(self.approvals_shelf)
        column.addWidget(self.queue_panel)
        column.addWidget(frame)
        box.addWidget(header)
        line = QFrame()
        line.setObjectName("rule")
        line.setFixedHeight(1)
        box.addWidget(line)
        box.addLayout(column, 1)
        QShortcut(QKeySequence("Ctrl+Return"), self, lambda: self.send())
        QShortcut(QKeySequence(QKeySequence.StandardKey.Copy), self.view, lambda: self._copy())
        self._restyle()

    def _restyle(self, _scheme: str = "") -> None:
        self.send_button.setIcon(theme.icon("queue" if self._steering else "send"))
        self.steer_button.setIcon(theme.icon("send"))
        self.stop_button.setIcon(theme.icon("stop"))
        self.refresh()

    def _build_turn_bar(self) -> None:
        """Retry a failed or stopped turn; undo the file changes of the latest one."""
        self.turn_bar = QFrame()
        self.turn_bar.setObjectName("turnBar")
        row = QHBoxLayout(self.turn_bar)
        row.setContentsMargins(2, 0, 2, 0)
        self.turn_label = QLabel()
        self.turn_label.setProperty("muted", True)
        self.retry_button = QPushButton("Retry")
        self.retry_button.setAccessibleDescription(
            "Answer the last message again, in place of the answer that did not finish")
        self.retry_button.clicked.connect(self.retry)
        # The provider failed the turn: the same prompt on another one, picked from a menu.
        self.other_button = QPushButton("Try another provider")
        self.other_button.setAccessibleDescription(
            "Choose another provider and model for this session and send the last message again")
        self.other_button.clicked.connect(self.try_another)
        self.provider_menu: QMenu | None = None
        self.undo_button = QPushButton("Undo file changes")
        self.undo_button.setAccessibleDescription(
            "Put back the files the last turn changed, as they were before it")
        self.undo_button.clicked.connect(self.undo)
        row.addWidget(self.turn_label, 1)
        row.addWidget(self.undo_button)
        row.addWidget(self.other_button)
        row.addWidget(self.retry_button)
        self.turn_bar.hide()
        # Turns undone from here, until files.restored marks their cards (in every window).
        self.undone: set[str] = set()
        self.turn_actions = TurnActions()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        """The message box's frame shows its focus (the editor inside has no border); the
        empty-session text stays centred in the transcript; the header's title is cut to its
        width.  (The header is watched from before the rest is built.)"""
        kind = event.type()
        if watched is self.header:
            if kind == QEvent.Type.Resize:
                self._show_header()
        elif watched is getattr(self, "composer", None) \
                and kind in (QEvent.Type.FocusIn, QEvent.Type.FocusOut):
            theme.restyle(self.composer_frame, focused=kind == QEvent.Type.FocusIn)
        elif kind == QEvent.Type.Resize and hasattr(self, "view") \
                and watched is self.view.viewport():
            self._place_empty()
        return False

    def _place_empty(self) -> None:
        area = self.view.viewport().rect()
        width = min(560, area.width() - 40)
        height = self.empty.heightForWidth(width)
        self.empty.setGeometry((area.width() - width) // 2, max(10, (area.height() - height) // 3),
                               width, height)

    def _providers(self) -> list[p.ProviderChoice]:
        """The providers a session can choose, as last listed; until then (or from a backend
        that does not list them) the one turns use first, as `initialize` said."""
        if self._listed is not None:
            return self._listed
        server = self.link.server
        summary = server.capabilities.provider if server is not None else None
        if summary is None or not summary.name:
            return []
        return [p.ProviderChoice(name=summary.name, model=summary.model or "",
                                 kind=summary.kind or "", default=True)]

    async def _fetch_providers(self) -> None:
        """Asks the backend which providers there are (at open, on reconnecting, and each time
        the model box or the Try another provider menu opens: settings may have changed)."""
        server = self.link.server
        if server is None or ProviderList.method not in server.capabilities.methods:
            return
        result = await self.link.call(ProviderList())
        if result.providers != self._listed:
            self._listed = result.providers
            self._refresh_soon()

    def _choose(self, choice: Choice) -> None:
        fields = change(choice, self.state.session, self._providers())
        if fields:
            spawn(self.link.call(SessionUpdate(session_id=self.session_id, **fields)),
                  self._show_error)

    def rename(self) -> None:
        """F2: a new title for this session (not modal: the loop keeps running)."""
        dialog = question(self, "Rename session", "Title:", self.state.title)
        dialog.textValueSelected.connect(self._renamed)
        dialog.open()
        self.rename_dialog = dialog

    def _renamed(self, title: str) -> None:
        title = title.strip()
        if title and title != self.state.title:
            spawn(self.link.call(SessionUpdate(session_id=self.session_id, title=title)),
                  self._show_error)

    # --- loading -------------------------------------------------------------------

    async def _open(self, at_message: str | None) -> None:
        result = await self.link.open_session(self.session_id)
        if self.closed:
            await self.link.close_session(self.session_id)
            return
        self.state.load(result)
        self._resumed = result.messages
        self.follower.jump()
        self.refresh()
        spawn(self._fetch_providers())  # (the box shows the default provider until it answers)
        await self._name_children()
        await self._name_original()
        if at_message:
            await self.show_message(at_message)

    async def _name_children(self) -> None:
        """Delegate cards loaded while their call runs learn their sub-agent's session from
        the listing of this session's sub-agents (their announcement is not replayed)."""
        if unnamed_children(self.state.transcript.items):
            found = await self.link.call(SessionList(delegated_from=self.session_id, limit=500))
            self.state.transcript.link_children(found.sessions)

    async def _name_original(self) -> None:
        """A branch's banner names the session it was made from (read once)."""
        session = self.state.session
        if session is None or not session.forked_from or self._original_title is not None:
            return
        try:
            found = await self.link.call(SessionGet(session_id=session.forked_from))
            self._original_title = found.session.title
        except Exception:
            self._original_title = ""  # deleted since: the banner says so
        self.refresh()

    async def show_message(self, message_id: str) -> bool:
        """Scrolls to a stored message (a search match), loading older pages until it is
        there; False when it is not within MATCH_PAGES pages."""
        key = self._key_of(message_id, self._resumed)
        for _ in range(MATCH_PAGES):
            if key is not None and self.state.transcript.find(key) is not None:
                break
            t = self.state.transcript
            if not t.has_more or not t.oldest_message_id:
                break
            page = await self.link.call(SessionMessages(
                session_id=self.session_id, before_id=t.oldest_message_id, limit=PAGE))
            self.state.transcript.prepend(page.messages, page.has_more)
            key = key or self._key_of(message_id, page.messages)
        row = self.state.transcript.find(key) if key is not None else None
        if row is None:
            return False
        self.view.doItemsLayout()
        index = self.model.index(row, 0)
        self.follower.stuck = False
        self.view.setCurrentIndex(index)
        self.view.scrollTo(index, self.view.ScrollHint.PositionAtCenter)
        self.follower._show_button()
        return True

    @staticmethod
    def _key_of(message_id: str, messages: list[p.Message]) -> str | None:
        for m in messages:
            if m.message_id == message_id:
                return f"call:{m.call_id}" if m.role == "tool" and m.call_id else m.message_id
        return None

    async def _reload(self) -> None:
        self.state.reset()
        result = await self.link.call(SessionResume(session_id=self.session_id))
        with self.follower.replacing():
            self.state.load(result)
        self.refresh()
        await self._name_children()

    async def _continue_in(self, child: str) -> None:
        """Compression rotated the conversation into a child session: this view follows it
        (the earlier messages stay in the parent session, listed in the sidebar)."""
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
        emit(self.moved, parent, child)
        self.banner.setText("The conversation continues in a new session; earlier messages are "
                            "summarized here and kept in full in the previous session.")
        self.banner.show()
        QTimer.singleShot(10_000, self, self.banner.hide)
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
        lost = (isinstance(event.data, p.SessionUpdated) and mine and self.state.loaded
                and event.data.session.status == "unknown" and self.state.status != "unknown")
        self.state.apply(event)  # the follower keeps a reader at the bottom there
        if lost:
            # The running turn was lost (its backend died and another took the session over,
            # or its end could not be saved): no end event comes, so the stored rows are
            # loaded afresh: what was streamed, marked unknown, and the note saying why.
            spawn(self._reload(), self._show_error)

    def _on_link_state(self, state: str) -> None:
        if state == "connected" and self.state.loaded:
            spawn(self._fetch_providers())  # (the backend may have been started anew)
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
        if self.closed:
            return  # another session took its place meanwhile: its widgets are going
        with self.follower.replacing():  # the stored rows of what was shown: not news
            self.state.transcript.reconcile_turn(turn_id, rows)
        # The stored rows may bring what the turn bar offers on (a failed turn's note, the
        # Retry beside it): refresh, or it waits for the next event, which may never come.
        self._refresh_soon()

    # --- actions -------------------------------------------------------------------

    def send(self) -> None:
        self._send("queue")

    def steer(self) -> None:
        """Into the running turn (an idle session simply runs it, as Send would)."""
        self._send("steer")

    def _send(self, intent: Literal["queue", "steer"]) -> None:
        text = self.composer.toPlainText().strip()
        if not text:
            return
        self.composer.clear()
        self.follower.jump()  # sending always shows the end, where the answer will come
        spawn(self._submit(text, intent), self._submit_failed(text))

    async def _submit(self, text: str, intent: Literal["queue", "steer"] = "queue") -> None:
        # The same request id on every attempt: if the connection drops after the backend took
        # the prompt, sending it again returns the first receipt instead of running it twice.
        result = await self._call_again(PromptSubmit(
            session_id=self.session_id, request_id=str(uuid.uuid4()), text=text, intent=intent))
        self.state.submitted(result.receipt, text)
        self._refresh_soon()

    def _submit_failed(self, text: str) -> Callable[[str], None]:
        def failed(message: str) -> None:
            if not self.composer.toPlainText().strip():
                self.composer.setPlainText(text)  # the words are not lost
            self._show_error(f"Not sent: {message}")
        return failed

    def retry(self) -> None:
        """The failed or stopped turn's prompt answered again, in place: no second message."""
        actions = self.turn_actions
        if actions.retry_text is None or self.state.busy:
            return
        self.turn_actions = TurnActions()
        self.turn_bar.hide()
        self.follower.jump()
        spawn(self._regenerate(actions.prompt_key), self._show_error)

    def regenerate(self) -> None:
        """The last prompt answered again (Ctrl+Shift+R): the new answer takes the place of the
        one shown, which stays a click away (‹ 1/2 ›).  Behind a running turn it waits."""
        actions = latest(self.state.transcript.items, "idle")
        if not actions.regenerate and actions.retry_text is None:
            return
        self.follower.jump()
        spawn(self._regenerate(actions.prompt_key), self._show_error)

    async def _regenerate(self, prompt_key: str | None) -> None:
        result = await self._call_again(SessionRegenerate(
            session_id=self.session_id, request_id=str(uuid.uuid4()), message_id=prompt_key))
        self.state.submitted(result.receipt, result.receipt.text or "")
        self._refresh_soon()

    async def _call_again(self, request: Request[R]) -> R:
        """`request`, sent again (the same request id) while the connection comes back: a
        request the backend took before the drop answers as a duplicate, run once."""
        for attempt in range(SUBMIT_ATTEMPTS):
            try:
                return await self.link.call(request)
            except ConnectionLost:
                if attempt == SUBMIT_ATTEMPTS - 1:
                    raise
                await asyncio.sleep(0.2)  # the next call waits for the reconnection itself
        raise AssertionError("the last attempt returns or raises")

    def page_answer(self, row: int | None, delta: int) -> None:
        """Shows the previous (-1) or next (+1) answer of a prompt: the one whose bar, or row,
        is `row`, else the current row's, else the last prompt with more than one.  The backend
        makes it the answer the model reads; every window follows its `answer.chosen`."""
        t = self.state.transcript
        current = self.view.currentIndex()
        bar = (t.bar_of(row) if row is not None else None) \
            or (t.bar_of(current.row()) if current.isValid() else None) or t.last_bar()
        if bar is None:
            return
        shown = bar.shown + delta
        if not 0 <= shown < len(bar.turns):
            return
        spawn(self.link.call(SessionChoose(session_id=self.session_id, turn_id=bar.turns[shown])),
              self._show_error)

    def edit_prompt(self, row: int | None = None) -> None:
        """Ctrl+E, or a message's Edit and branch…: one of your messages (the one at `row`, else
        the current row if it is one, else your last) edited, then sent in a new session that
        holds the conversation before it; files stay as they are unless the dialog says."""
        items = self.state.transcript.items
        current = self.view.currentIndex()
        rows = [r for r in (row, current.row() if current.isValid() else None) if r is not None]
        rows += [i for i in range(len(items) - 1, -1, -1)]
        target = next((items[r] for r in rows if 0 <= r < len(items) and _editable(items[r])), None)
        if not isinstance(target, UserItem):
            return
        dialog = EditPromptDialog(target.text, self)
        key = target.key
        dialog.accepted.connect(lambda: self._fork(key, dialog.text(), dialog.restore.isChecked()))
        dialog.open()
        self.edit_dialog = dialog

    def _fork(self, message_id: str, text: str, restore_files: bool) -> None:
        async def go() -> None:
            result = await self._call_again(SessionFork(
                session_id=self.session_id, message_id=message_id, request_id=str(uuid.uuid4()),
                text=text, restore_files=restore_files))
            emit(self.switch_requested, result.session.session_id, "")

        spawn(go(), lambda words: self._show_error(f"Not branched: {words}"))

    def open_original(self) -> None:
        """A branch's banner link: the session it was made from, at the message it was made at."""
        session = self.state.session
        if session is not None and session.forked_from:
            emit(self.switch_requested, session.forked_from, session.forked_at or "")

    def try_another(self) -> None:
        """The provider failed the turn: a menu of the other providers' models; the one picked
        becomes the session's, and the failed turn's prompt is sent again on it."""
        spawn(self._offer_others(), self._show_error)

    async def _offer_others(self) -> None:
        await self._fetch_providers()
        if self.closed:
            return
        menu = QMenu(self.other_button)
        menu.setAccessibleName("Try another provider")
        for choice in others(self.state.session, self._providers()):
            action = menu.addAction(choice.label)
            action.triggered.connect(lambda _=False, c=choice: self.retry_on(c))
        if menu.isEmpty():
            menu.addAction("No other provider is set up: add one in Settings").setEnabled(False)
        self.provider_menu = menu
        menu.popup(self.other_button.mapToGlobal(self.other_button.rect().bottomLeft()))

    def retry_on(self, choice: Choice) -> None:
        """`choice` becomes the session's provider and model, then the failed turn's prompt
        is sent again (after the change is stored: the turn reads it when it starts)."""
        text = self.turn_actions.retry_text
        if text is None or self.state.busy:
            return
        fields = change(choice, self.state.session, self._providers())
        self.turn_actions = TurnActions()
        self.turn_bar.hide()
        self.follower.jump()

        async def go() -> None:
            if fields:
                await self.link.call(SessionUpdate(session_id=self.session_id, **fields))
            await self._submit(text)

        spawn(go(), self._submit_failed(text))

    def undo(self) -> None:
        turn = self.turn_actions.undo_turn
        if turn is None or self.state.busy:
            return
        self.undone.add(turn)
        self.undo_button.setEnabled(False)

        async def go() -> None:
            try:
                result = await self.link.call(SessionUndo(session_id=self.session_id, turn_id=turn))
            except Exception:
                self.undone.discard(turn)
                raise
            finally:
                self.undo_button.setEnabled(True)
            names = ", ".join(Path(f).name for f in result.restored[:5])
            more = f" and {len(result.restored) - 5} more" if len(result.restored) > 5 else ""
            self.state.notice = None
            self.banner_note(f"Put back {len(result.restored)} file"
                             f"{'s' if len(result.restored) != 1 else ''}: {names}{more}."
                             if result.restored else "Nothing to put back: no file had changed.")
            self.refresh()

        spawn(go(), self._show_error)

    def banner_note(self, text: str) -> None:
        """A passing note under the transcript (not an error)."""
        self.turn_label.setText(text)
        self.turn_bar.show()
        self.retry_button.hide()
        self.other_button.hide()
        self.undo_button.hide()
        self._note_until = time.monotonic() + 8

    def interrupt(self) -> None:
        if self.state.busy:
            spawn(self.link.call(TurnInterrupt(session_id=self.session_id)), self._show_error)

    def answer(self, approval_id: str, decision: p.Decision) -> None:
        card = self.cards.get(approval_id)
        if card is not None:
            self._let_go(card)  # (its buttons are disabled now, the card goes soon)
            card.busy(True)

        async def go() -> None:
            try:
                await self.link.call(ApprovalRespond(approval_id=approval_id, decision=decision))
            except Exception as exc:
                if isinstance(exc, ApprovalClosed):
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

    def focus_first_approval(self) -> None:
        """Ctrl+Shift+A: the focus on the first waiting approval's Allow once."""
        first = next(iter(self.cards), None)
        if first is not None:
            self.focus_approval(first)

    def focus_approval(self, approval_id: str) -> None:
        """Puts the focus on the approval's Allow once, scrolled into view (a notification
        was clicked): now, or when its card is shown (the session may still be loading)."""
        card = self.cards.get(approval_id)
        if card is None:
            self._focus_card = approval_id
            return
        self._focus_card = None
        card.buttons["once"].setFocus(Qt.FocusReason.OtherFocusReason)
        self.approvals_shelf.ensureWidgetVisible(card, 0, 0)

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._bound_shelves()

    def _bound_shelves(self) -> None:
        """The approvals take at most APPROVALS_SHARE of the height (or the first card's least
        height: its preview gives way first), the opened queue at most QUEUE_SHARE or a few
        rows: both scroll beyond, and the transcript keeps the rest."""
        height = self.height()
        limit = int(height * APPROVALS_SHARE)
        first = next(iter(self.cards.values()), None)
        if first is not None:  # (its answers are never scrolled out of view)
            limit = max(limit, first.least_height())
        self.approvals_shelf.bound(limit)
        for card in self.cards.values():
            card.fit(self.approvals_shelf.maximumHeight())
        rows = int(self.queue_panel.row_height() * QUEUE_ROWS_SHOWN)
        self.queue_panel.shelf.bound(min(rows, int(height * QUEUE_SHARE)))

    def _let_go(self, going: QWidget) -> None:
        """A card or a queued row that goes (answered, cancelled, started): the focus it holds
        goes to the message box, so the person types on; left to Qt, it would move along the
        window's focus chain to its first control (the sidebar's New session button)."""
        focused = self.window().focusWidget()
        if focused is not None and going.isAncestorOf(focused):
            self.composer.setFocus(Qt.FocusReason.OtherFocusReason)

    def focus_composer(self) -> None:
        self.composer.setFocus(Qt.FocusReason.ActiveWindowFocusReason)

    def _clicked(self, index: QModelIndex) -> None:
        self.state.transcript.toggle(index.row())

    def _copy(self) -> None:
        self.view.copy_current()  # the selected text, else the current message's

    def quote(self, text: str) -> None:
        """Quote in reply: `text` as "> " lines at the end of the message box, which takes focus."""
        before = self.composer.toPlainText()
        newlines = len(before) - len(before.rstrip("\n"))
        gap = "\n" * max(0, 2 - newlines) if before.strip() else ""  # a blank line after what is there
        self.composer.moveCursor(QTextCursor.MoveOperation.End)
        self.composer.insertPlainText(f"{gap}{quoted(text)}\n\n")
        self.composer.setFocus(Qt.FocusReason.OtherFocusReason)

    def _measure(self) -> None:
        """Warns (without stopping anything) when the message box holds a long text: every later
        turn sends the whole conversation again, so its cost repeats."""
        tokens = self.composer.document().characterCount() // 4  # a rough estimate, and cheap
        if tokens > LONG_MESSAGE_TOKENS:
            self.long_note.setText(f"Long message: about {tokens:,} tokens, sent with every turn from now on")
        self.long_note.setVisible(tokens > LONG_MESSAGE_TOKENS)

    def _show_error(self, message: str) -> None:
        if self.closed:
            return
        self.banner.setText(message)
        self.banner.show()
        QTimer.singleShot(8000, self, self.banner.hide)
        emit(self.error, message)

    # --- refresh -------------------------------------------------------------------

    def _refresh_soon(self) -> None:
        if not self._refresh_timer.isActive():
            self._refresh_timer.start()

    def refresh(self) -> None:
        s = self.state
        backend = self.link.where  # a remote backend's name; its paths are its own
        folder = (s.session.cwd if backend else home_relative(s.session.cwd)) if s.session else ""
        model = s.session.model if s.session else ""
        rooms = [door_words.header_words(d, r) for d, r in self.doors.rooms_of(self.session_id)]
        where = " · ".join(x for x in (f"on {backend}" if backend else "", folder, model, *rooms) if x)
        also = "\n".join(door_words.bound_words(d, r) for d, r in self.doors.rooms_of(self.session_id))
        self._header_parts = (s.title, where, also)
        self._show_header()
        warning = s.session.folder_warning if s.session else None
        self.folder_note.setText(warning or "")
        self.folder_note.setVisible(bool(warning))
        self._branch_words()
        self.model_box.show_session(s.session, self._providers())
        link_state = self.link.current
        self.conn_label.setText("" if link_state == "connected" else f"⟳ {link_state}…")
        self.status_label.setText(status_label(s.status))
        theme.restyle(self.status_label, tone=STATUS_TONES.get(s.status, "muted"))
        self.usage_label.setText(s.usage_line())
        self.stop_button.setEnabled(s.busy)
        running = s.status in ("running", "waiting_approval")
        if running != self._steering:
            self._steering = running
            self.steer_button.setVisible(running)
            self.send_button.setIcon(theme.icon("queue" if running else "send"))
            self.send_button.setText("Queue" if running else "Send")
            self.send_button.setToolTip("Send after the running turn (Enter)" if running else "")
            set_placeholder(self.composer, RUNNING_HINT if running else IDLE_HINT)
        self._refresh_turn()
        if s.notice is not None:
            self.notice.setText(s.notice.render(time.monotonic()))
            self.notice.show()
        else:
            self.notice.hide()
        for aid in [a for a in self.cards if a not in s.approvals]:
            card = self.cards.pop(aid)
            self._let_go(card)
            self.approvals_shelf.remove(card)
            card.deleteLater()
        for aid, approval in s.approvals.items():
            if aid not in self.cards:
                card = ApprovalCard(approval, self.answer, self._preview(approval))
                card.reflowed.connect(self._bound_timer.start)
                self.cards[aid] = card
                self.approvals_shelf.add(card)
                if aid == self._focus_card:  # (once it is laid out)
                    QTimer.singleShot(0, self, lambda a=aid: self.focus_approval(a))
        for adm in [a for a in self.queue_rows if a not in s.queue]:
            row = self.queue_rows.pop(adm)
            self._let_go(row)
            self.queue_panel.remove(row)
            row.deleteLater()
        for adm, receipt in s.queue.items():
            if adm not in self.queue_rows:
                row = QueueRow(receipt, receipt.text or s.prompts.get(adm, ""), self.cancel)
                self.queue_rows[adm] = row
                self.queue_panel.add(row)
        self._bound_shelves()
        emit(self.changed)

    def _show_header(self) -> None:
        """The header's two lines for its width, each cut with "…" (the whole in its tooltip)."""
        title, where, also = self._header_parts
        room = max(40, self.header.width() - 4)
        font = QFont(self.header.font())
        font.setPointSizeF(13)
        font.setWeight(QFont.Weight.DemiBold)
        short_title = QFontMetrics(font).elidedText(title, Qt.TextElideMode.ElideRight, room)
        short_where = self.header.fontMetrics().elidedText(where, Qt.TextElideMode.ElideMiddle, room)
        cut = "\n".join(x for x, y in ((title, short_title), (where, short_where)) if x != y)
        tip = "\n".join(x for x in (cut, also) if x)
        self.header.setToolTip(f"<p style='white-space:pre-wrap'>{esc(tip)}</p>" if tip else "")
        muted = theme.colors().muted
        self.header.setText(f"<span style='font-size:13pt; font-weight:600'>{esc(short_title)}"
                            f"</span><br><span style='color:{muted}'>{esc(short_where)}</span>")

    def _branch_words(self) -> None:
        session = self.state.session
        if session is None or not session.forked_from:
            self.branch_note.hide()
            return
        title = self._original_title
        named = f"“{esc(title)}”" if title else ("a session deleted since" if title == "" else
                                                  "another session")
        link = "" if title == "" else " — <a href='original'>open the original</a>"
        self.branch_note.setText(f"Branched from {named} at an earlier message{link}.")
        self.branch_note.show()

    def _refresh_turn(self) -> None:
        s = self.state
        self.turn_actions = latest(s.transcript.items, s.status, frozenset(self.undone))
        self.thinking.setVisible(self.turn_actions.thinking)
        showing_note = time.monotonic() < self._note_until  # an undo's note stays a while
        offers = self.turn_actions.retry_text is not None or self.turn_actions.undo_turn is not None
        if showing_note:
            self.turn_bar.show()
        elif offers:
            parts = []
            if self.turn_actions.retry_text is not None:
                parts.append("The last turn did not finish.")
            if self.turn_actions.undo_turn is not None:
                n = self.turn_actions.files_changed
                who = "It" if parts else "The last turn"
                parts.append(f"{who} changed files ({n} change{'s' if n != 1 else ''}).")
            self.turn_label.setText(" ".join(parts))
            self.retry_button.setVisible(self.turn_actions.retry_text is not None)
            self.other_button.setVisible(self.turn_actions.provider_failed and bool(
                others(s.session, self._providers())))
            self.undo_button.setVisible(self.turn_actions.undo_turn is not None)
            self.turn_bar.show()
        else:
            self.turn_bar.hide()
        empty = s.loaded and not s.transcript.items and not s.busy
        if empty:
            self.empty.setText(self._welcome())
            self._place_empty()
        self.empty.setVisible(empty)

    def _welcome(self) -> str:
        """What a new session can do, and which model answers it."""
        c = theme.colors()
        folder = home_relative(self.state.session.cwd) if self.state.session else "this folder"
        server = self.link.server
        summary = server.capabilities.provider if server is not None else None
        now = current(self.state.session, self._providers())  # the session's own provider
        model = (now.model if now else "") or (summary.model if summary is not None else "") \
            or "the configured model"
        name = (now.provider if now else "") or (summary.name if summary is not None else "") or ""
        who = esc(model) + (f" ({esc(name)})" if name else "")
        weak = ""
        if summary is not None and summary.offline_default:
            weak = (f"<p style='color:{c.warning}'>No provider is set up, so the small built-in "
                    "offline model answers: fine for trying Turnkey out, weak at real work. Add a "
                    "provider in Settings (Ctrl+,).</p>")
        return (f"<p style='font-size:15pt; font-weight:600; color:{c.text}'>New session</p>"
                f"<p style='color:{c.muted}'>Ask Turnkey to read, change and run things in "
                f"<b>{esc(folder)}</b>. It asks you before anything outside the folder or risky, "
                f"and every change can be undone.</p>"
                f"<p style='color:{c.muted}'>Answering: {who}</p>{weak}")

    def _preview(self, approval: p.Approval) -> tuple[str, str] | None:
        row = self.state.transcript.find(f"call:{approval.call_id}")
        item = self.state.transcript.items[row] if row is not None else None
        if not isinstance(item, ToolItem):
            return None
        return change_preview(item.name or approval.tool, item.arguments)

    def _on_tick(self) -> None:
        for card in self.cards.values():
            card.tick()
        if self.thinking.isVisible():
            self.thinking.setText("Thinking" + "." * (1 + int(time.monotonic()) % 3))
        if self._note_until and time.monotonic() >= self._note_until:
            self._note_until = 0.0
            self._refresh_turn()
        if self.state.notice is not None and self.state.notice.until is not None:
            self.notice.setText(self.state.notice.render(time.monotonic()))

    def close_conversation(self) -> None:
        """Stops following the session (once); the widget can then be deleted."""
        if self.closed:
            return
        self.closed = True
        self._tick.stop()
        self._refresh_timer.stop()
        try:
            self.link.received.disconnect(self._on_event)
            self.link.state.disconnect(self._on_link_state)
            theme.changed.disconnect(self._restyle)
        except (RuntimeError, TypeError):
            pass
        if self.state.loaded:
            spawn(self.link.close_session(self.session_id))
