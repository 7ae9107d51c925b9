"""One session's conversation: header, transcript, approvals, queue, notices and composer
(files dropped anywhere on it attach to the message).

A `Conversation` is a widget, not a window: the main window shows one beside its sessions
sidebar (and swaps it when another session is chosen), and a popped-out `SessionWindow`
holds one on its own.  Each follows its session through the link (`open_session` counts
followers, so the same session in two places is one subscription) until `close_conversation`.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from PySide6.QtCore import QModelIndex, Qt, QTimer, Signal
from PySide6.QtGui import (
    QDragEnterEvent,
    QDragLeaveEvent,
    QDragMoveEvent,
    QDropEvent,
    QKeySequence,
    QResizeEvent,
    QShortcut,
)
from PySide6.QtWidgets import QFrame, QLabel, QMenu, QVBoxLayout, QWidget

from desktop.qt import theme
from desktop.qt.aio import spawn
from desktop.qt.attachments import carries_files, given_files
from desktop.qt.compat import emit
from desktop.qt.composer import Composer, ComposerPanel
from desktop.qt.conversation_answers import AnswerActions, BranchNote
from desktop.qt.conversation_attaching import ConversationAttaching
from desktop.qt.conversation_header import ConversationHeader
from desktop.qt.conversation_loading import ConversationLoading
from desktop.qt.conversation_sending import ConversationSending
from desktop.qt.conversation_shelves import ConversationShelves
from desktop.qt.conversation_turn_bar import TurnBar
from desktop.qt.conversation_welcome import Welcome
from desktop.qt.doors import DoorWatch
from desktop.qt.edit_prompt import EditPromptDialog
from desktop.qt.follow import Follower
from desktop.qt.screens import question
from desktop.qt.transcript_view import TranscriptModel, make_view
from desktop.state import conversation as words
from desktop.state import doors as door_words
from desktop.state.composer import IDLE_HINT, LONG_MESSAGE_TOKENS, RUNNING_HINT
from desktop.state.first_run import ADD_PROVIDER, NEEDS_PLACEHOLDER, Readiness, readiness
from desktop.state.model_choices import Choice, change, others
from desktop.state.session import SessionState
from desktop.state.turns import TurnActions, latest
from shared import protocol as p
from shared.client import RESYNC, Incoming
from shared.methods import ProviderList, SessionUpdate

if TYPE_CHECKING:
    from desktop.link import Link

__all__ = ["IDLE_HINT", "LONG_MESSAGE_TOKENS", "RUNNING_HINT", "Composer", "Conversation"]


class Conversation(QWidget):
    error = Signal(str)
    changed = Signal()  # title, status or session changed: the window's title follows
    moved = Signal(str, str)  # compression continued the conversation: old, new session_id
    open_requested = Signal(str)  # a sub-agent's session, to open in a window of its own
    # A session to show here instead, at a message ("": its end): a branch just made, or
    # the original a branch was made from.
    switch_requested = Signal(str, str)
    add_provider_requested = Signal()  # the welcome's "Add a provider": the provider form

    def __init__(self, link: Link, session_id: str, at_message: str | None = None) -> None:
        super().__init__()
        self.setObjectName("conversation")
        self.link = link
        self.session_id = session_id
        self.state = SessionState(session_id)
        self.state.on_turn_done = self._turn_done
        self.state.on_change = self._refresh_soon
        self.model = TranscriptModel(self.state.transcript)
        self.closed = False
        self._listed: list[p.ProviderChoice] | None = None  # provider.list's, once answered
        # The chat rooms (messaging doors) this session is also reached from: the header says so.
        self.doors = DoorWatch.of(link)
        self.answers = AnswerActions(self, self)  # regenerate, page answers, edit and branch
        self.answers.error.connect(self._show_error)
        self.answers.submitted.connect(self._refresh_soon)
        self.answers.switch.connect(lambda sid, at: emit(self.switch_requested, sid, at))
        self.loading = ConversationLoading(self, self)  # opening, paging, reloading
        self.loading.error.connect(self._show_error)
        self.loading.opened.connect(lambda: spawn(self.fetch_providers()))
        self.loading.changed.connect(self._refresh_soon)
        self.loading.moved.connect(self._continued)
        self.sending = ConversationSending(self, self)  # send, steer, stop, retry, undo
        self.sending.error.connect(self._show_error)
        self.sending.submitted.connect(self._refresh_soon)
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
        spawn(self.loading.open(at_message), self._show_error)

    # --- layout --------------------------------------------------------------------

    def _build(self) -> None:
        box = QVBoxLayout(self)
        box.setContentsMargins(0, 0, 0, 0)
        box.setSpacing(0)
        self._build_header()
        column = QVBoxLayout()
        column.setContentsMargins(16, 8, 16, 14)
        column.setSpacing(8)
        self._build_view()
        self._build_notes()
        self.turn_bar = TurnBar()
        self.turn_bar.retry.connect(self.retry)
        self.turn_bar.try_another.connect(self.try_another)
        self.turn_bar.chosen.connect(self.retry_on)
        self.turn_bar.undo.connect(self.undo)
        self.turn_label = self.turn_bar.label
        self.retry_button = self.turn_bar.retry_button
        self.other_button = self.turn_bar.other_button
        self.undo_button = self.turn_bar.undo_button
        # Turns undone from here, until files.restored marks their cards (in every window).
        self.undone: set[str] = set()
        self.turn_actions = TurnActions()
        self._build_composer()
        # Under the transcript, each bounded (resizeEvent): approvals scroll within their
        # share of the height, and many queued messages fold into one line.
        self.shelves = ConversationShelves(self, self)
        self.shelves.error.connect(self._show_error)
        self.shelves.note.connect(self.banner_note)
        self.shelves.settled.connect(self.refresh)
        self.cards = self.shelves.cards
        self.question_cards = self.shelves.questions
        self.queue_rows = self.shelves.queue_rows
        self.approvals_shelf = self.shelves.approvals_shelf
        self.queue_panel = self.shelves.queue_panel
        above: list[QWidget] = [self.banner, self.folder_note, self.branch_note]
        below: list[QWidget] = [self.thinking, self.notice, self.turn_bar, self.approvals_shelf,
                                self.queue_panel, self.composer_frame]
        for widget in above:
            column.addWidget(widget)
        column.addWidget(self.view, 1)
        for widget in below:
            column.addWidget(widget)
        box.addWidget(self.header_widget)
        line = QFrame()
        line.setObjectName("rule")
        line.setFixedHeight(1)
        box.addWidget(line)
        box.addLayout(column, 1)
        QShortcut(QKeySequence("Ctrl+Return"), self, lambda: self.send())
        QShortcut(QKeySequence(QKeySequence.StandardKey.Copy), self.view, lambda: self._copy())
        self._restyle()

    def _build_header(self) -> None:
        self.header_widget = ConversationHeader()
        self.header = self.header_widget.title
        self.status_label = self.header_widget.status_label
        self.conn_label = self.header_widget.conn_label
        self.model_box = self.header_widget.model_box
        self.model_box.chosen.connect(self._choose)
        self.model_box.opening.connect(lambda: spawn(self.fetch_providers()))
        self.header_bar = self.header_widget.bar  # a window adds its own buttons here (pop out)

    def _build_view(self) -> None:
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
        self.view.review_undo_requested.connect(self.answers.undo_review)
        self.view.edit_requested.connect(lambda row: self.edit_prompt(row))
        self.view.branch_requested.connect(lambda sid: emit(self.switch_requested, sid, ""))
        self.view.verticalScrollBar().valueChanged.connect(self.loading.scrolled)
        self.empty = Welcome(self.view.viewport())  # a new session's welcome
        self.empty.linkActivated.connect(self._welcome_link)

    def _build_notes(self) -> None:
        """The labels over and under the transcript, each hidden until it has something to say."""
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
        self.branch_note = BranchNote()
        self.branch_note.linkActivated.connect(lambda _href: self.open_original())
        self.thinking = QLabel("Thinking…")
        self.thinking.setObjectName("thinking")
        self.thinking.setProperty("muted", True)
        self.thinking.setAccessibleName("Thinking")
        self.thinking.hide()

    def _build_composer(self) -> None:
        panel = ComposerPanel()
        self.composer_frame = panel
        self.composer = panel.composer
        self.send_button = panel.send_button
        self.steer_button = panel.steer_button
        self.stop_button = panel.stop_button
        self.usage_label = panel.usage_label
        self.long_note = panel.long_note
        panel.send.connect(self.send)
        panel.steer.connect(self.steer)
        panel.stop.connect(self.interrupt)
        self.follower = Follower(self.view, self.composer)
        self.attaching = ConversationAttaching(self, self)  # paste, drop, pick; upload; open
        self.attaching.changed.connect(self._refresh_soon)
        self.attaching.ready.connect(lambda intent: self.sending.send(intent))
        self.attaching.thumbnails.loaded.connect(self.state.transcript.touch_attachments)
        self.view.thumbnails = self.attaching.thumbnails
        self.view.attachment_requested.connect(self.attaching.open)
        self._build_drop_target()

    def _build_drop_target(self) -> None:
        """Files dragged over the conversation: it says where they go (over everything, and
        let through to the widgets under it: the drop lands on the conversation)."""
        self.setAcceptDrops(True)
        self.drop_target = QLabel("Drop files to attach them to your message", self)
        self.drop_target.setObjectName("dropTarget")
        self.drop_target.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.drop_target.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents)
        self.drop_target.hide()

    def _restyle(self, _scheme: str = "") -> None:
        self.composer_frame.restyle()
        self.refresh()

    @property
    def provider_menu(self) -> QMenu | None:
        return self.turn_bar.provider_menu

    @property
    def edit_dialog(self) -> EditPromptDialog | None:
        return self.answers.edit_dialog

    def providers(self) -> list[p.ProviderChoice]:
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

    async def fetch_providers(self) -> None:
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
        fields = change(choice, self.state.session, self.providers())
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

    # --- loading (conversation_loading.py) ----------------------------------------

    @property
    def fetching(self) -> bool:
        """An older page is being read."""
        return self.loading.fetching

    async def show_message(self, message_id: str) -> bool:
        """Scrolls to a stored message (a search match); see `ConversationLoading.show_message`."""
        return await self.loading.show_message(message_id)

    def fetch_older(self) -> None:
        self.loading.fetch_older()

    def _continued(self, parent: str, child: str) -> None:
        emit(self.moved, parent, child)
        self.banner.setText("The conversation continues in a new session; earlier messages are "
                            "summarized here and kept in full in the previous session.")
        self.banner.show()
        QTimer.singleShot(10_000, self, self.banner.hide)
        self.refresh()

    # --- events --------------------------------------------------------------------

    def _on_event(self, event: Incoming) -> None:
        mine = event.session_id == self.session_id
        if event.type == RESYNC and mine:
            spawn(self.loading.reload(), self._show_error)
            return
        if isinstance(event.data, p.SessionDeletedEvent) and mine:
            self.banner.setText("This session was deleted.")
            self.banner.show()
            self.composer.setEnabled(False)
            return
        if isinstance(event.data, p.CompressionComplete) and mine and event.data.child_session_id:
            spawn(self.loading.continue_in(event.data.child_session_id), self._show_error)
        lost = (isinstance(event.data, p.SessionUpdated) and mine and self.state.loaded
                and event.data.session.status == "unknown" and self.state.status != "unknown")
        self.state.apply(event)  # the follower keeps a reader at the bottom there
        if lost:
            # The running turn was lost (its backend died and another took the session over,
            # or its end could not be saved): no end event comes, so the stored rows are
            # loaded afresh: what was streamed, marked unknown, and the note saying why.
            spawn(self.loading.reload(), self._show_error)

    def _on_link_state(self, state: str) -> None:
        if state == "connected" and self.state.loaded:
            spawn(self.fetch_providers())  # (the backend may have been started anew)
        self._refresh_soon()

    def _turn_done(self, turn_id: str) -> None:
        spawn(self.loading.reconcile(turn_id), self._show_error)

    # --- actions -------------------------------------------------------------------

    def send(self) -> None:
        self.sending.send("queue")

    def steer(self) -> None:
        """Into the running turn (an idle session simply runs it, as Send would)."""
        self.sending.send("steer")

    def retry(self) -> None:
        """The failed or stopped turn's prompt answered again; see `ConversationSending.retry`."""
        self.sending.retry()

    def regenerate(self) -> None:
        """The last prompt answered again (Ctrl+Shift+R); see `AnswerActions.regenerate`."""
        self.answers.regenerate()

    def page_answer(self, row: int | None, delta: int) -> None:
        """A prompt's previous (-1) or next (+1) answer; see `AnswerActions.page_answer`."""
        self.answers.page_answer(row, delta)

    def edit_prompt(self, row: int | None = None) -> None:
        """Ctrl+E, or a message's Edit and branch…; see `AnswerActions.edit_prompt`."""
        self.answers.edit_prompt(row, self)

    def open_original(self) -> None:
        """A branch's banner link: the session it was made from, at the message it was made at."""
        self.answers.open_original()

    def try_another(self) -> None:
        """The other providers' models, one to answer the failed turn again on."""
        self.sending.try_another()

    def retry_on(self, choice: Choice) -> None:
        """The failed turn's prompt again on `choice`; see `ConversationSending.retry_on`."""
        self.sending.retry_on(choice)

    def undo(self) -> None:
        self.sending.undo()

    def banner_note(self, text: str) -> None:
        """A passing note under the transcript (not an error)."""
        self.turn_bar.note(text)

    def interrupt(self) -> None:
        self.sending.interrupt()

    def answer(self, approval_id: str, decision: p.Decision) -> None:
        self.shelves.answer(approval_id, decision)

    def cancel(self, admission_id: str) -> None:
        self.shelves.cancel(admission_id)

    def focus_first_approval(self) -> None:
        """Ctrl+Shift+A: the focus on the first waiting approval's Allow once."""
        self.shelves.focus_first_approval()

    def focus_approval(self, approval_id: str) -> None:
        """The focus on the approval's Allow once, now or when its card is shown."""
        self.shelves.focus_approval(approval_id)

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self.shelves.bound()
        self.drop_target.setGeometry(self.rect().adjusted(8, 8, -8, -8))

    # --- files dropped anywhere on the conversation (the message box lets them through) ---

    def attach_files(self) -> None:
        """Ctrl+U or the paperclip: pick files to attach."""
        self.attaching.pick()

    def dragEnterEvent(self, e: QDragEnterEvent) -> None:
        if not carries_files(e.mimeData()) or not self.composer.isEnabled():
            e.ignore()
            return
        e.acceptProposedAction()
        self.drop_target.setGeometry(self.rect().adjusted(8, 8, -8, -8))
        self.drop_target.raise_()
        self.drop_target.show()

    def dragMoveEvent(self, e: QDragMoveEvent) -> None:
        e.acceptProposedAction()

    def dragLeaveEvent(self, e: QDragLeaveEvent) -> None:
        self.drop_target.hide()

    def dropEvent(self, e: QDropEvent) -> None:
        self.drop_target.hide()
        if carries_files(e.mimeData()):
            e.acceptProposedAction()
            self.attaching.give(given_files(e.mimeData()))

    def focus_composer(self) -> None:
        self.composer.setFocus(Qt.FocusReason.ActiveWindowFocusReason)

    def _clicked(self, index: QModelIndex) -> None:
        self.state.transcript.toggle(index.row())

    def _copy(self) -> None:
        self.view.copy_current()  # the selected text, else the current message's

    def quote(self, text: str) -> None:
        """Quote in reply: `text` as "> " lines at the end of the message box, which takes focus."""
        self.composer_frame.quote(text)

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
        bound = self.doors.rooms_of(self.session_id)
        rooms = [door_words.header_words(d, r) for d, r in bound]
        also = "\n".join(door_words.bound_words(d, r) for d, r in bound)
        self.header_widget.show_session(s.title, words.where(s.session, backend, rooms), also,
                                        s.status, self.link.current)
        warning = s.session.folder_warning if s.session else None
        self.folder_note.setText(warning or "")
        self.folder_note.setVisible(bool(warning))
        self.branch_note.show_branch(self.answers.branch_words())
        self.model_box.show_session(s.session, self.providers(), self.attaching.pending.has_image)
        self.attaching.show_note()
        self.composer_frame.show_session(s.status, s.busy, s.usage_line())
        # Nothing can answer yet: the message box says what is needed instead of a failed turn.
        self.composer_frame.show_needed(NEEDS_PLACEHOLDER if self.ready() == "needs_provider"
                                        else None)
        self._refresh_turn()
        if s.notice is not None:
            self.notice.setText(s.notice.render(time.monotonic()))
            self.notice.show()
        else:
            self.notice.hide()
        self.shelves.refresh()
        emit(self.changed)

    def _refresh_turn(self) -> None:
        s = self.state
        self.turn_actions = latest(s.transcript.items, s.status, frozenset(self.undone))
        self.thinking.setVisible(self.turn_actions.thinking)
        self.turn_bar.show_actions(self.turn_actions, bool(others(s.session, self.providers())))
        empty = s.loaded and not s.transcript.items and not s.busy
        self.empty.show_text(self._welcome() if empty else None)

    def _welcome(self) -> str:
        """What a new session can do, and which model answers it (or that none can yet)."""
        c = theme.colors()
        return words.welcome(self.state.session, self.providers(), self._summary(),
                             text=c.text, muted=c.muted, warning=c.warning, ready=self.ready())

    def _summary(self) -> p.ProviderSummary | None:
        server = self.link.server
        return server.capabilities.provider if server is not None else None

    def ready(self) -> Readiness:
        """Whether a provider, the offline model alone, or nothing answers this backend's turns."""
        return readiness(self._summary(), self._listed)

    def _welcome_link(self, href: str) -> None:
        if href == ADD_PROVIDER:
            emit(self.add_provider_requested)

    def _on_tick(self) -> None:
        self.shelves.tick()
        if self.thinking.isVisible():
            self.thinking.setText("Thinking" + "." * (1 + int(time.monotonic()) % 3))
        if self.turn_bar.note_ended():
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
