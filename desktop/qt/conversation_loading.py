"""A conversation's loading and paging: the session opened (at a search match, if asked),
older pages read as the reader scrolls to the top, the stored rows reloaded after a resync or a
lost turn, a finished turn read back as stored, and a compressed conversation followed into its
new session.  Which page comes next and when reading back stops is `desktop/state/paging.py`'s."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Protocol

from PySide6.QtCore import QObject, Signal

from desktop import startup_trace
from desktop.qt.aio import spawn
from desktop.qt.compat import emit
from desktop.qt.conversation_answers import AnswerActions
from desktop.qt.follow import Follower
from desktop.qt.transcript_view import TranscriptModel, TranscriptView
from desktop.state import conversation as words
from desktop.state.delegation import unnamed_children
from desktop.state.paging import MATCH_PAGES, PAGE, RECONCILE_PAGES, at_top, older_page, turn_read
from desktop.state.session import SessionState
from desktop.state.transcript import Item, items_from_messages
from shared import protocol as p
from shared.methods import SessionList, SessionMessages, SessionResume

if TYPE_CHECKING:
    from desktop.link import Link

# Measuring an older page's rows ahead: the longest the loop is held between two of its turns.
MEASURE_SLICE_S = 0.006


class Host(Protocol):
    """What loading needs of its conversation (`Conversation`)."""

    link: Link
    session_id: str
    state: SessionState
    model: TranscriptModel
    view: TranscriptView
    follower: Follower
    answers: AnswerActions
    closed: bool

    def refresh(self) -> None: ...


class ConversationLoading(QObject):
    """`error`: a page could not be read; `opened`: the session is loaded and shown (at
    open); `changed`: the stored rows may change what is shown;
    `moved`: the conversation continues in a new session (old, new session_id)."""

    error = Signal(str)
    opened = Signal()
    changed = Signal()
    moved = Signal(str, str)

    def __init__(self, host: Host, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.host = host
        self.fetching = False
        self.resumed: list[p.Message] = []  # the page the session opened with

    def _failed(self, message: str) -> None:
        emit(self.error, message)

    async def open(self, at_message: str | None) -> None:
        h = self.host
        result = await h.link.open_session(h.session_id)
        if h.closed:
            await h.link.close_session(h.session_id)
            return
        h.state.load(result)
        self.resumed = result.messages
        h.follower.jump()
        h.refresh()
        startup_trace.watch_paint(h.view.viewport(), "transcript_painted",
                                  lambda: h.model.rowCount() > 0)
        emit(self.opened)
        await self.name_children()
        if await h.answers.name_original():  # a branch's banner names its original
            h.refresh()
        if at_message:
            await self.show_message(at_message)

    async def name_children(self) -> None:
        """Delegate cards loaded while their call runs learn their sub-agent's session from
        the listing of this session's sub-agents (their announcement is not replayed)."""
        h = self.host
        if unnamed_children(h.state.transcript.items):
            found = await h.link.call(SessionList(delegated_from=h.session_id, limit=500))
            h.state.transcript.link_children(found.sessions)

    async def show_message(self, message_id: str) -> bool:
        """Scrolls to a stored message (a search match), loading older pages until it is
        there; False when it is not within MATCH_PAGES pages."""
        h = self.host
        key = words.message_key(message_id, self.resumed)
        for _ in range(MATCH_PAGES):
            if key is not None and h.state.transcript.find(key) is not None:
                break
            t = h.state.transcript
            before = older_page(t.has_more, t.oldest_message_id)
            if before is None:
                break
            page = await h.link.call(SessionMessages(
                session_id=h.session_id, before_id=before, limit=PAGE))
            h.state.transcript.prepend(page.messages, page.has_more)
            key = key or words.message_key(message_id, page.messages)
        row = h.state.transcript.find(key) if key is not None else None
        if row is None:
            return False
        h.view.doItemsLayout()
        index = h.model.index(row, 0)
        h.follower.stuck = False
        h.view.setCurrentIndex(index)
        h.view.scrollTo(index, h.view.ScrollHint.PositionAtCenter)
        h.follower._show_button()
        return True

    async def reload(self) -> None:
        h = self.host
        h.state.reset()
        result = await h.link.call(SessionResume(session_id=h.session_id))
        with h.follower.replacing():
            h.state.load(result)
        h.refresh()
        await self.name_children()

    async def continue_in(self, child: str) -> None:
        """Compression rotated the conversation into a child session: this view follows it
        (the earlier messages stay in the parent session, listed in the sidebar)."""
        h = self.host
        parent = h.session_id
        notice = h.state.notice  # "context compressed", said in the parent
        h.session_id = h.state.session_id = child
        h.state.reset()
        result = await h.link.open_session(child)
        h.state.load(result)
        if h.state.notice is None:
            h.state.notice = notice
        h.follower.jump()
        await h.link.close_session(parent)
        emit(self.moved, parent, child)

    def fetch_older(self) -> None:
        t = self.host.state.transcript
        before = older_page(t.has_more, t.oldest_message_id, self.fetching)
        if before is None:
            return
        self.fetching = True
        spawn(self._fetch_older(before), self._failed)

    async def _fetch_older(self, before_id: str) -> None:
        h = self.host
        try:
            page = await h.link.call(SessionMessages(
                session_id=h.session_id, before_id=before_id, limit=PAGE))
            fresh = items_from_messages(page.messages)
            await self._measure_ahead(fresh)
            if h.closed:
                return
            bar = h.view.verticalScrollBar()
            keep = bar.maximum() - bar.value()
            h.state.transcript.prepend(page.messages, page.has_more, fresh)
            h.view.doItemsLayout()
            bar.setValue(bar.maximum() - keep)  # the same messages stay under the reader's eyes
        finally:
            self.fetching = False

    async def _measure_ahead(self, items: list[Item]) -> None:
        """An older page's rows measured before they are added, a few at a time with the loop
        free in between (the view paints and takes input meanwhile): adding them then costs
        the relayout a lookup a row, not a markdown render and a text layout each."""
        delegate = self.host.view.delegate
        done = 0
        while done < len(items):
            until = time.perf_counter() + MEASURE_SLICE_S
            while done < len(items) and time.perf_counter() < until:
                delegate.measure(items[done])
                done += 1
            await asyncio.sleep(0)
            if self.host.closed:
                return

    def scrolled(self, value: int) -> None:
        h = self.host
        if at_top(value, h.view.verticalScrollBar().minimum(), h.state.loaded):
            self.fetch_older()

    async def reconcile(self, turn_id: str) -> None:
        """The finished turn as stored, in place of what was streamed."""
        h = self.host
        request = SessionMessages(session_id=h.session_id, limit=PAGE)
        rows: list[p.Message] = []
        for _ in range(RECONCILE_PAGES):  # back to the turn's first row (its prompt)
            page = await h.link.call(request)
            rows = page.messages + rows
            if turn_read(turn_id, page.messages, page.has_more, rows):
                break
            request = SessionMessages(session_id=h.session_id, limit=PAGE,
                                      before_id=rows[0].message_id)
        if h.closed:
            return  # another session took its place meanwhile: its widgets are going
        with h.follower.replacing():  # the stored rows of what was shown: not news
            h.state.transcript.reconcile_turn(turn_id, rows)
        # The stored rows may bring what the turn bar offers on (a failed turn's note, the
        # Retry beside it): refresh, or it waits for the next event, which may never come.
        emit(self.changed)
