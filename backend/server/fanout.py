"""Fan-out of committed events to subscribed connections, with replay hand-over.

A connection subscribing with `since_seq` first registers (live events are
buffered), then reads the stored events, then sets its mark to the last seq
it returned and flushes the buffer, dropping anything at or below the mark.
Since events are published only after their COMMIT and in seq order, the
replayed and live parts meet with no gap and no duplicate.  Only connections
whose token has `read` are sent events.

`follow` and `unfollow` are the one way in and out of a session's events: they
keep the hub's table and the subscriber's own marks in step.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Protocol

from backend import wire
from backend.store.events import Moved, StoredEvent
from shared.protocol import Event


class Subscriber(Protocol):
    def deliver(self, event: Event) -> None: ...

    def can_read(self) -> bool: ...

    def follow(self, session_id: str, mark: int = 0) -> None: ...

    def begin_replay(self, session_id: str) -> None: ...

    def forget(self, session_id: str) -> None: ...


class Hub:
    def __init__(self) -> None:
        self._subs: dict[str, set[Subscriber]] = defaultdict(set)
        self._all: set[Subscriber] = set()

    def attach(self, sub: Subscriber) -> None:
        self._all.add(sub)

    def detach(self, sub: Subscriber) -> None:
        self._all.discard(sub)
        for sid in [sid for sid, subs in self._subs.items() if sub in subs]:
            self._unsubscribe(sub, sid)

    def follow(self, sub: Subscriber, session_id: str, *, replay: bool = False) -> None:
        """Subscribes `sub` to the session's live events.  `replay`: they are held until the
        caller's replay hands over (`end_replay` with the last seq it returned); else every
        event from now on is new to it (a no-op for the marks when it already follows)."""
        if replay:
            sub.begin_replay(session_id)
        else:
            sub.follow(session_id, 0)
        self._subs[session_id].add(sub)

    def unfollow(self, sub: Subscriber, session_id: str) -> None:
        sub.forget(session_id)
        self._unsubscribe(sub, session_id)

    def _unsubscribe(self, sub: Subscriber, session_id: str) -> None:
        subs = self._subs.get(session_id)
        if subs is not None:
            subs.discard(sub)
            if not subs:
                del self._subs[session_id]

    def drop_session(self, session_id: str) -> None:
        self._subs.pop(session_id, None)

    def publish(self, item: object) -> None:
        """Called by the store after COMMIT, in commit order."""
        if isinstance(item, Moved):
            for sub in list(self._subs.get(item.parent, ())):
                self.follow(sub, item.child)  # the child's log starts here: every event is new
            return
        if not isinstance(item, StoredEvent):
            return
        # Events need the `read` scope, whoever subscribed: a submit-only token's prompt.submit
        # subscribes it like any submitter, but it is sent nothing.
        subs = self._subs.get(item.event.session_id, ()) if item.stored else self._all
        event: Event | None = None  # the wire's, made once for all the subscribers
        for sub in list(subs):
            if sub.can_read():
                event = event or wire.event(item.event)
                sub.deliver(event)
