"""A conversation's answers and branches: a prompt answered again (Retry, Regenerate), its
answers paged (‹ 2/3 ›), one of your messages edited into a branch, and a branch's banner
with its link back to the original.  Which message Ctrl+E edits and what the banner says is
`desktop/state/conversation.py`'s."""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING, Protocol, TypeVar

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import QLabel, QWidget

from desktop.qt.aio import spawn
from desktop.qt.compat import emit
from desktop.qt.edit_prompt import EditPromptDialog
from desktop.qt.follow import Follower
from desktop.qt.transcript_view import TranscriptView
from desktop.state import conversation as words
from desktop.state.session import SessionState
from desktop.state.turns import latest
from shared.client import ConnectionLost
from shared.methods import Request, ReviewUndo, SessionChoose, SessionFork, SessionGet, SessionRegenerate

if TYPE_CHECKING:
    from desktop.link import Link

R = TypeVar("R")
SUBMIT_ATTEMPTS = 5


async def call_again(link: Link, request: Request[R]) -> R:
    """`request`, sent again (the same request id) while the connection comes back: a
    request the backend took before the drop answers as a duplicate, run once."""
    for attempt in range(SUBMIT_ATTEMPTS):
        try:
            return await link.call(request)
        except ConnectionLost:
            if attempt == SUBMIT_ATTEMPTS - 1:
                raise
            await asyncio.sleep(0.2)  # the next call waits for the reconnection itself
    raise AssertionError("the last attempt returns or raises")


class Host(Protocol):
    """What the actions need of their conversation (`Conversation`)."""

    link: Link
    session_id: str
    state: SessionState
    view: TranscriptView
    follower: Follower


class BranchNote(QLabel):
    """A branch says where it was made from, with a link back (keyboard too: Tab reaches it)."""

    def __init__(self) -> None:
        super().__init__()
        self.setObjectName("branchNote")
        self.setProperty("banner", "info")
        self.setTextFormat(Qt.TextFormat.RichText)
        self.setWordWrap(True)
        self.setTextInteractionFlags(Qt.TextInteractionFlag.LinksAccessibleByMouse
                                     | Qt.TextInteractionFlag.LinksAccessibleByKeyboard)
        self.setFocusPolicy(Qt.FocusPolicy.TabFocus)
        self.hide()

    def show_branch(self, text: str | None) -> None:
        if text is None:
            self.hide()
            return
        self.setText(text)
        self.show()


class AnswerActions(QObject):
    """`submitted`: a prompt is on its way to be answered again; `switch`: a session to show in
    the conversation's place, at a message ("" for its end)."""

    error = Signal(str)
    submitted = Signal()
    switch = Signal(str, str)

    def __init__(self, host: Host, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.host = host
        self.edit_dialog: EditPromptDialog | None = None
        self.original_title: str | None = None  # a branch's original session, once read

    def _failed(self, message: str) -> None:
        emit(self.error, message)

    def answer_again(self, prompt_key: str | None) -> None:
        """The prompt (its message id; None: the last one) answered again, in place."""
        self.host.follower.jump()
        spawn(self._regenerate(prompt_key), self._failed)

    async def _regenerate(self, prompt_key: str | None) -> None:
        h = self.host
        result = await call_again(h.link, SessionRegenerate(
            session_id=h.session_id, request_id=str(uuid.uuid4()), message_id=prompt_key))
        h.state.submitted(result.receipt, result.receipt.text or "")
        emit(self.submitted)

    def regenerate(self) -> None:
        """The last prompt answered again (Ctrl+Shift+R): the new answer takes the place of the
        one shown, which stays a click away (‹ 1/2 ›).  Behind a running turn it waits."""
        actions = latest(self.host.state.transcript.items, "idle")
        if actions.regenerate or actions.retry_text is not None:
            self.answer_again(actions.prompt_key)

    def undo_review(self, message_id: str) -> None:
        """A review note's Undo: memory and skills back to what they were before the review
        (refused, in words, when something changed them since); `review.undone` marks it."""
        spawn(self.host.link.call(ReviewUndo(session_id=self.host.session_id,
                                             message_id=message_id)), self._failed)

    def page_answer(self, row: int | None, delta: int) -> None:
        """Shows the previous (-1) or next (+1) answer of a prompt: the one whose bar, or row,
        is `row`, else the current row's, else the last prompt with more than one.  The backend
        makes it the answer the model reads; every window follows its `answer.chosen`."""
        t = self.host.state.transcript
        current = self.host.view.currentIndex()
        bar = (t.bar_of(row) if row is not None else None) \
            or (t.bar_of(current.row()) if current.isValid() else None) or t.last_bar()
        if bar is None:
            return
        shown = bar.shown + delta
        if not 0 <= shown < len(bar.turns):
            return
        spawn(self.host.link.call(SessionChoose(session_id=self.host.session_id,
                                                turn_id=bar.turns[shown])), self._failed)

    def edit_prompt(self, row: int | None, parent: QWidget) -> None:
        """Ctrl+E, or a message's Edit and branch…: one of your messages edited in a dialog
        over `parent`, then sent in a new session that holds the conversation before it;
        files stay as they are unless the dialog says."""
        current = self.host.view.currentIndex()
        target = words.edit_target(self.host.state.transcript.items, row,
                                   current.row() if current.isValid() else None)
        if target is None:
            return
        dialog = EditPromptDialog(target.text, parent)
        key = target.key
        dialog.accepted.connect(lambda: self._fork(key, dialog.text(), dialog.restore.isChecked()))
        dialog.open()
        self.edit_dialog = dialog

    def _fork(self, message_id: str, text: str, restore_files: bool) -> None:
        h = self.host

        async def go() -> None:
            result = await call_again(h.link, SessionFork(
                session_id=h.session_id, message_id=message_id, request_id=str(uuid.uuid4()),
                text=text, restore_files=restore_files))
            emit(self.switch, result.session.session_id, "")

        spawn(go(), lambda message: self._failed(f"Not branched: {message}"))

    def open_original(self) -> None:
        """A branch's banner link: the session it was made from, at the message it was made at."""
        session = self.host.state.session
        if session is not None and session.forked_from:
            emit(self.switch, session.forked_from, session.forked_at or "")

    async def name_original(self) -> bool:
        """Reads the title of a branch's original, once; True when it was read now."""
        session = self.host.state.session
        if session is None or not session.forked_from or self.original_title is not None:
            return False
        try:
            found = await self.host.link.call(SessionGet(session_id=session.forked_from))
            self.original_title = found.session.title
        except Exception:
            self.original_title = ""  # deleted since: the banner says so
        return True

    def branch_words(self) -> str | None:
        return words.branch_words(self.host.state.session, self.original_title)
