"""The door's way out: each bound room is sent its session's events, and the door's own
messages, at least once and shown once.

The event log is the outbox for what a turn says: written in the same transaction as the
turn's rows, read again from `delivered_seq` after a crash or an outage.  Every post
carries a transaction id derived from what it is (the reply of turn T is `r.T`, its last
edit `f.T`, an intermediate edit `e.T.DIGEST` of its text), which the platform
deduplicates per device, so a repeat returns the first post instead of a second one.
A post whose answer may have been lost is recorded as intended (`""`) before it is made,
so a restart knows the platform may hold an older text under that id and edits it.

The streamed reply is edited at most every `edit_interval_s`; between edits the deltas
accumulate (a room read after an outage gets one edit with all of them).  Recovery marks
a lost turn `unknown` without an event, so rooms also look for their session's unknown
admissions and end those replies with the recovered note.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec

from backend import wire
from backend.doors import render
from backend.doors.base import Transport, TransportError
from backend.store import admissions, compression, events
from backend.store import doors as store
from backend.store.db import Database, Tx
from backend.store.events import Moved, StoredEvent
from shared.protocol import (
    EVENTS,
    AdmissionSettled,
    ApprovalRequested,
    ApprovalResolved,
    Event,
    QuestionAsked,
    QuestionResolved,
    Receipt,
    TextDelta,
    ToolComplete,
    ToolStart,
    TurnStarted,
)

log = logging.getLogger("doors")

PAGE = 200  # events read per step of a room's delivery
RETRY_FIRST_S = 1.0  # after a failure to reach the platform, doubled up to RETRY_MAX_S
RETRY_MAX_S = 30.0
SAVE_EVERY_S = 5.0  # how often delivered_seq is saved past events that sent nothing


@dataclass
class Reply:
    """The reply message of one turn in one room."""

    event_id: str | None
    draft: render.Draft = field(default_factory=render.Draft)
    shown: str = ""  # the text last posted
    edited_at: float = 0.0
    dirty: bool = False


class Delivery:
    def __init__(self, name: str, transport: Transport, db: Database, edit_interval_s: float,
                 announce: Callable[[], None]) -> None:
        self.name = name
        self.transport = transport
        self.db = db
        self.edit_interval_s = edit_interval_s
        self._announce = announce  # a room's binding changed: tell clients
        self._rooms: dict[str, asyncio.Task[None]] = {}  # delivery task per bound room
        self._wakes: dict[str, asyncio.Event] = {}
        self._by_session: dict[str, set[str]] = {}  # session id -> bound rooms
        self._replies: dict[tuple[str, str], Reply] = {}  # (room, turn id)
        self._outbox_wake = asyncio.Event()
        self._outbox_task: asyncio.Task[None] | None = None
        # (session, seq) read and acted on per room, ahead of the stored delivered_seq
        self._read_to: dict[str, tuple[str, int]] = {}
        self._saved_at: dict[str, float] = {}

    def start(self) -> None:
        self._outbox_task = asyncio.create_task(self._outbox(), name=f"door-{self.name}-outbox")

    async def stop(self) -> None:
        tasks = list(self._rooms.values()) + ([self._outbox_task] if self._outbox_task else [])
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._rooms.clear()

    def owed(self) -> None:
        """Something was queued in `door_outbox`: send it."""
        self._outbox_wake.set()

    def observe(self, item: Any) -> None:
        """The store's publisher: wakes the delivery of rooms whose session got events."""
        if isinstance(item, StoredEvent) and item.stored:
            for room in self._by_session.get(item.event.session_id, ()):
                self._wake(room)
        elif isinstance(item, Moved):
            for room in self._by_session.get(item.parent, ()):
                self._wake(room)

    def _wake(self, room_id: str) -> None:
        wake = self._wakes.get(room_id)
        if wake is not None:
            wake.set()

    async def _outbox(self) -> None:
        """Sends the door's own messages (`door_outbox`), oldest first, until sent."""
        delay = RETRY_FIRST_S
        while True:
            self._outbox_wake.clear()
            try:
                owed = await self.db.read(lambda tx: store.owed(tx, self.name))
                for item in owed:
                    await self.transport.send(item.room_id, txn("o", item.room_id, item.key),
                                              str(item.content["text"]),
                                              notice=bool(item.content.get("notice")))
                    await self.db.write(functools.partial(
                        store.paid, door=self.name, room_id=item.room_id, key=item.key))
            except Exception as exc:  # the platform or the store: both are tried again
                _failed("the door's messages", exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, RETRY_MAX_S)
                continue
            delay = RETRY_FIRST_S
            if not owed:
                await self._outbox_wake.wait()

    def follow(self, room_id: str, session_id: str, announce: bool = True) -> None:
        """Delivers the session's events to the room from now on; a binding that changed is
        announced to clients (`door.state`), so the app marks the session at once."""
        changed = room_id not in self._by_session.get(session_id, ())
        for rooms in self._by_session.values():
            rooms.discard(room_id)
        self._by_session.setdefault(session_id, set()).add(room_id)
        if changed and announce:
            self._announce()
        self._wakes.setdefault(room_id, asyncio.Event()).set()
        task = self._rooms.get(room_id)
        if task is None or task.done():
            self._rooms[room_id] = asyncio.create_task(self._deliver_room(room_id),
                                                       name=f"door-{self.name}-room")

    async def _deliver_room(self, room_id: str) -> None:
        wake = self._wakes[room_id]
        delay = RETRY_FIRST_S
        while True:
            wake.clear()
            try:
                pause = await self._deliver_step(room_id)
            except Exception as exc:  # the platform or the store: both are tried again
                _failed(f"delivery to {room_id}", exc)
                self._read_to.pop(room_id, None)  # read again from what is stored as sent
                await asyncio.sleep(delay)
                delay = min(delay * 2, RETRY_MAX_S)
                continue
            delay = RETRY_FIRST_S
            if pause is None:
                continue  # more to read at once
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), timeout=pause)

    async def _deliver_step(self, room_id: str) -> float | None:
        """Sends what the room is owed of its session's events; returns how long to wait
        for more (None: read again at once)."""
        read_to = self._read_to.get(room_id)

        def read(tx: Tx) -> tuple[store.Binding | None, list[Event], str]:
            bound = store.binding(tx, self.name, room_id)
            if bound is None:
                return None, [], ""
            after = bound.delivered_seq
            if read_to is not None and read_to[0] == bound.session_id:
                after = max(after, read_to[1])
            found = wire.events(events.since(tx, bound.session_id, after, PAGE))
            leaf = compression.leaf(tx, bound.session_id) if not found else bound.session_id
            return bound, found, leaf

        bound, found, leaf = await self.db.read(read)
        if bound is None:
            return 3600.0
        sid = bound.session_id
        if not found and leaf != sid:  # compression rotated the conversation: follow it
            await self.db.write(lambda tx: store.move(tx, self.name, room_id, sid, leaf))
            self.follow(room_id, leaf)
            return None
        for event in found:
            seq = event.seq or 0  # (a stored event always has one)
            if await self._deliver_event(room_id, sid, event):
                await self._delivered(room_id, sid, seq)
            self._read_to[room_id] = (sid, seq)
        if found and time.monotonic() - self._saved_at.get(room_id, 0.0) > SAVE_EVERY_S:
            # Past events that sent nothing (deltas, usage): saved now and then, not per step,
            # which would double the commits of a streaming turn.  Re-reading them after a
            # crash sends nothing twice.
            await self._delivered(room_id, sid, found[-1].seq or 0)
        due = await self._flush_drafts(room_id, sid)
        if len(found) == PAGE:
            return None
        await self._settle_unknown(room_id, sid)
        return due if due is not None else 3600.0

    async def _delivered(self, room_id: str, sid: str, seq: int) -> None:
        await self.db.write(functools.partial(
            store.delivered, door=self.name, room_id=room_id, session_id=sid, seq=seq))
        self._saved_at[room_id] = time.monotonic()

    async def _deliver_event(self, room_id: str, sid: str, event: Event) -> bool:
        """Acts on one event; True when it sent something that must not be sent again."""
        spec = EVENTS.get(event.type)
        if spec is None:
            return False  # an event this backend does not know of: nothing to show
        try:
            data = msgspec.convert(event.data, spec)
        except msgspec.ValidationError as exc:
            log.warning("door %s: event %s of session %s does not decode (%s); not shown",
                        self.name, event.type, sid, exc)
            return False
        if isinstance(data, ApprovalRequested):
            approval = data.approval
            await self._post_once(room_id, f"approval:{approval.approval_id}",
                                  txn("a", approval.approval_id), render.approval_request(approval))
            self._draft(room_id, event).waiting_approval = True
            return True
        if isinstance(data, ApprovalResolved):
            approval = data.approval
            target = await self.db.read(
                lambda tx: store.sent_id(tx, self.name, room_id, f"approval:{approval.approval_id}"))
            if target is not None:
                await self.transport.edit(room_id, target, txn("ar", approval.approval_id),
                                          render.approval_closed(approval))
            if event.turn_id:
                self._draft(room_id, event).waiting_approval = False
            return True
        if isinstance(data, QuestionAsked | QuestionResolved):
            await self._question(room_id, event, data)
            return True
        if isinstance(data, AdmissionSettled):
            receipt = data.receipt
            # (A steer that joined a turn settles with it, with its outcome and text: whichever
            # of the two comes first ends the reply, and `final:TURN` makes the other a no-op.)
            if receipt.turn_id is None and receipt.outcome != "rejected":
                return False
            await self._finish(room_id, sid, receipt)
            return True
        if event.turn_id is None:
            return False
        if isinstance(data, TurnStarted | TextDelta):
            self._draft(room_id, event)
        elif isinstance(data, ToolStart):
            self._draft(room_id, event).tool = render.tool_line(data.name, data.summary)
        elif isinstance(data, ToolComplete):
            draft = self._draft(room_id, event)
            draft.tool = None
            draft.tools_done += 1
        return False

    async def _question(self, room_id: str, event: Event,
                        data: QuestionAsked | QuestionResolved) -> None:
        """A question posted once (`question:ID`, which a reply names), and edited once it
        stops waiting; the running reply's status says a question waits."""
        question = data.question
        key = f"question:{question.question_id}"
        if isinstance(data, QuestionAsked):
            await self._post_once(room_id, key, txn("q", question.question_id),
                                  render.question_request(question))
            self._draft(room_id, event).waiting_answer = True
            return
        target = await self.db.read(lambda tx: store.sent_id(tx, self.name, room_id, key))
        if target is not None:
            await self.transport.edit(room_id, target, txn("qr", question.question_id),
                                      render.question_closed(question))
        # Only a reply still shown: a question answered after a restart belongs to a turn
        # whose reply was ended already.
        reply = self._replies.get((room_id, event.turn_id or ""))
        if reply is not None:
            reply.draft.waiting_answer = False
            reply.dirty = True

    def _draft(self, room_id: str, event: Event) -> render.Draft:
        assert event.turn_id is not None
        reply = self._replies.setdefault((room_id, event.turn_id), Reply(event_id=None))
        reply.dirty = True
        return reply.draft

    async def _flush_drafts(self, room_id: str, sid: str) -> float | None:
        """Edits each running turn's reply whose edit is due; returns when the next is."""
        due: float | None = None
        interval = self.edit_interval_s
        for (room, turn_id), reply in list(self._replies.items()):
            if room != room_id or not reply.dirty:
                continue
            wait = reply.edited_at + interval - time.monotonic()
            if wait > 0:
                due = wait if due is None else min(due, wait)
                continue
            text = await self.db.read(functools.partial(events.turn_text, session_id=sid, turn_id=turn_id))
            body = render.running(text, reply.draft)
            reply.dirty = False
            if body == reply.shown:
                continue
            if reply.event_id is None:
                reply.event_id, certain = await self._post_once(
                    room_id, f"reply:{turn_id}", txn("r", turn_id), body)
                if not certain:  # an older draft came back: bring it up to date
                    await self.transport.edit(room_id, reply.event_id,
                                              txn("e", turn_id, _digest(body)), body)
            else:
                await self.transport.edit(room_id, reply.event_id,
                                          txn("e", turn_id, _digest(body)), body)
            reply.shown = body
            reply.edited_at = time.monotonic()
        return due

    async def _settle_unknown(self, room_id: str, sid: str) -> None:
        """Ends the reply of a turn the backend lost (killed while it ran): recovery marks
        its admission `unknown` without an event, so the log alone would leave the reply
        streaming forever."""
        def read(tx: Tx) -> list[Receipt]:
            found = []
            for admission_id in admissions.unknown_turns(tx, sid):
                row = admissions.by_id(tx, admission_id)
                if row is None or row.turn_id is None \
                        or store.sent_id(tx, self.name, room_id, f"final:{row.turn_id}"):
                    continue
                found.append(wire.receipt(admissions.receipt(tx, row)))
            return found

        for receipt in await self.db.read(read):
            await self._finish(room_id, sid, receipt)

    async def _finish(self, room_id: str, sid: str, receipt: Receipt) -> None:
        turn_id = receipt.turn_id or receipt.admission_id
        done = await self.db.read(lambda tx: store.sent_id(tx, self.name, room_id, f"final:{turn_id}"))
        if done is not None:
            # Its reply already ended (a lost turn that was then settled `interrupted` by the
            # next prompt): it keeps the ending it was given.
            self._replies.pop((room_id, turn_id), None)
            return
        streamed = ""
        if receipt.final_text is None and receipt.turn_id is not None:
            streamed = await self.db.read(lambda tx: events.turn_text(tx, sid, turn_id))
        body = render.final(receipt, streamed)
        reply = self._replies.pop((room_id, turn_id), None)
        event_id = reply.event_id if reply is not None else None
        if not event_id:
            event_id = await self.db.read(
                lambda tx: store.sent_id(tx, self.name, room_id, f"reply:{turn_id}"))
        if not event_id:
            # No reply is known to exist (a short answer, or all of it came while we were
            # away): it is posted whole, under the id its first draft would have had.  If a
            # draft may have gone out under that id (`""`: a post whose answer was lost), the
            # platform hands back that draft instead, so the final text goes as an edit too.
            event_id, certain = await self._post_once(
                room_id, f"reply:{turn_id}", txn("r", turn_id), body)
            if not certain:
                await self.transport.edit(room_id, event_id, txn("f", turn_id), body)
        else:
            await self.transport.edit(room_id, event_id, txn("f", turn_id), body)
        await self.db.write(functools.partial(store.record_sent, door=self.name, room_id=room_id,
                                              key=f"final:{turn_id}", event_id=event_id))

    async def _post_once(self, room_id: str, key: str, txn_id: str, text: str) -> tuple[str, bool]:
        """Posts a message the door edits or reads reactions to later, and records its id.

        Returns (its id, certain): certain is False when a post under `txn_id` may have
        happened before, its answer lost in a crash or an outage: the platform then returns
        that first message, whose text may be older than `text`.  So that this can be told,
        the intent is recorded (as `""`) before the post."""
        known = await self.db.read(lambda tx: store.sent_id(tx, self.name, room_id, key))
        if known:
            return known, False
        if known is None:
            await self.db.write(lambda tx: store.record_sent(tx, self.name, room_id, key, ""))
        event_id = await self.transport.send(room_id, txn_id, text)
        await self.db.write(lambda tx: store.record_sent(tx, self.name, room_id, key, event_id))
        return event_id, known is None


def txn(kind: str, *parts: str) -> str:
    """A transaction id for the platform: the same message always gets the same id."""
    digest = hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:32]
    return f"tk.{kind}.{digest}"


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _failed(what: str, exc: Exception) -> None:
    if isinstance(exc, TransportError):
        log.info("%s waits: %s", what, exc)
    else:
        log.warning("%s failed (%s: %s); trying again", what, type(exc).__name__, exc)
