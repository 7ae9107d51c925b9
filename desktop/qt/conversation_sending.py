"""A conversation's sending: the message box's text sent (queued behind a running turn, or
steering it), a turn stopped, the failed or stopped turn's prompt answered again (Retry, or on
another provider), and a turn's file changes undone.  What the turn bar offers and Undo's note
say is `desktop/state/turns.py`'s."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Literal, Protocol

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QPushButton

from desktop.qt.aio import spawn
from desktop.qt.compat import emit
from desktop.qt.composer import Composer
from desktop.qt.conversation_answers import AnswerActions, call_again
from desktop.qt.conversation_attaching import ConversationAttaching
from desktop.qt.conversation_turn_bar import TurnBar
from desktop.qt.follow import Follower
from desktop.state.attachments import PendingFile, named, shown
from desktop.state.model_choices import Choice, change, others
from desktop.state.session import SessionState
from desktop.state.turns import TurnActions, undo_words
from shared import protocol as p
from shared.methods import PromptSubmit, SessionUndo, SessionUpdate, TurnInterrupt

if TYPE_CHECKING:
    from desktop.link import Link

Intent = Literal["queue", "steer"]


class Host(Protocol):
    """What sending needs of its conversation (`Conversation`)."""

    link: Link
    session_id: str
    state: SessionState
    follower: Follower
    composer: Composer
    attaching: ConversationAttaching
    turn_bar: TurnBar
    undo_button: QPushButton
    answers: AnswerActions
    closed: bool
    turn_actions: TurnActions  # what the latest turn offers, as last refreshed
    undone: set[str]  # turns undone from here, until files.restored marks their cards

    def providers(self) -> list[p.ProviderChoice]: ...

    async def fetch_providers(self) -> None: ...

    def refresh(self) -> None: ...


class ConversationSending(QObject):
    """`error`: something was not sent or not undone; `submitted`: a prompt is on its way."""

    error = Signal(str)
    submitted = Signal()

    def __init__(self, host: Host, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.host = host

    def _failed(self, message: str) -> None:
        emit(self.error, message)

    def send(self, intent: Intent = "queue") -> None:
        """The message box's text and files, queued (or, with "steer", into the running turn);
        while files upload, Send waits for them (and goes when they are done)."""
        h = self.host
        text = h.composer.toPlainText().strip()
        why = h.attaching.pending.blocked(text)
        if why is not None:
            if why:
                h.attaching.say(why)
            return
        if h.attaching.hold(intent):
            return
        files = h.attaching.take()
        h.composer.clear()
        h.follower.jump()  # sending always shows the end, where the answer will come
        spawn(self.submit(text, intent, files), self.submit_failed(text, files))

    async def submit(self, text: str, intent: Intent = "queue",
                     files: Sequence[PendingFile] = ()) -> None:
        h = self.host
        # The same request id on every attempt: if the connection drops after the backend took
        # the prompt, sending it again returns the first receipt instead of running it twice.
        result = await call_again(h.link, PromptSubmit(
            session_id=h.session_id, request_id=str(uuid.uuid4()), text=text,
            attachments=named(files) or None, intent=intent))
        h.state.submitted(result.receipt, text, shown(files))
        emit(self.submitted)

    def submit_failed(self, text: str, files: Sequence[PendingFile] = ()) -> Callable[[str], None]:
        def failed(message: str) -> None:
            if not self.host.composer.toPlainText().strip():
                self.host.composer.setPlainText(text)  # the words are not lost
            if files:
                self.host.attaching.put_back(files)  # nor the files
            self._failed(f"Not sent: {message}")
        return failed

    def interrupt(self) -> None:
        h = self.host
        if h.state.busy:
            spawn(h.link.call(TurnInterrupt(session_id=h.session_id)), self._failed)

    def retry(self) -> None:
        """The failed or stopped turn's prompt answered again, in place: no second message."""
        h = self.host
        actions = h.turn_actions
        if actions.retry_text is None or h.state.busy:
            return
        h.turn_actions = TurnActions()
        h.turn_bar.hide()
        h.answers.answer_again(actions.prompt_key)

    def try_another(self) -> None:
        """The provider failed the turn: a menu of the other providers' models; the one picked
        becomes the session's, and the failed turn's prompt is sent again on it."""
        spawn(self._offer_others(), self._failed)

    async def _offer_others(self) -> None:
        h = self.host
        await h.fetch_providers()
        if h.closed:
            return
        h.turn_bar.offer_choices(others(h.state.session, h.providers()))

    def retry_on(self, choice: Choice) -> None:
        """`choice` becomes the session's provider and model, then the failed turn's prompt
        is sent again (after the change is stored: the turn reads it when it starts)."""
        h = self.host
        text = h.turn_actions.retry_text
        if text is None or h.state.busy:
            return
        fields = change(choice, h.state.session, h.providers())
        h.turn_actions = TurnActions()
        h.turn_bar.hide()
        h.follower.jump()

        async def go() -> None:
            if fields:
                await h.link.call(SessionUpdate(session_id=h.session_id, **fields))
            await self.submit(text)

        spawn(go(), self.submit_failed(text))

    def undo(self) -> None:
        """The latest turn's file changes put back (once: its turn is then `undone` here)."""
        h = self.host
        turn = h.turn_actions.undo_turn
        if turn is None or h.state.busy:
            return
        h.undone.add(turn)
        h.undo_button.setEnabled(False)

        async def go() -> None:
            try:
                result = await h.link.call(SessionUndo(session_id=h.session_id, turn_id=turn))
            except Exception:
                h.undone.discard(turn)
                raise
            finally:
                h.undo_button.setEnabled(True)
            h.state.notice = None
            h.turn_bar.note(undo_words(result.restored))
            h.refresh()

        spawn(go(), self._failed)
