"""The model's view of each session, kept between requests and extended by what was appended.

Every request is built from the durable transcript (`turn/request.assemble`), and a long
session's is mostly the same as the last one: the rows a session's model sees only ever
change by being appended, except in a compression's commit (a `compacted_ranges` row, the
head's pruned wire copy, the previous summary compacted, a new summary) and when another
answer to a prompt is shown (store/answers.py: rows leave or rejoin the view).  So each
session's view is kept here with the token of those changes (`messages.view_token`) and the
id of its last row; the next request reads only the rows after that id, in the same read as
the token, and rebuilds everything whenever the token moved (or a compression in this
process says so: `forget`).

The wire copy is extended the same way: a row's messages depend on that row alone, except an
assistant row's tool calls, which carry the results stored after them.  So the copy is kept
up to the first assistant row with a call still unanswered and rebuilt from there.  A second
result for an answered call (the last one stored wins) rebuilds it all.  The result is the
same list `context.wire_messages` builds from all the rows (tests/unit/test_transcript_cache.py
checks it against that for random transcripts appended in random steps).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field

from backend.compress.tokens import message_chars
from backend.providers.base import WireMessage
from backend.store import messages
from backend.store.db import Tx
from backend.store.messages import ModelRow
from backend.turn.context import in_model_order, row_messages

KEEP_SESSIONS = 64  # views kept, the least recently used dropped first


@dataclass
class View:
    """One session's model view as of `last_id`, in model order, and its wire copy (without
    the system prompt, which is the session row's and taken afresh every time)."""

    token: tuple[int, int, int]
    last_id: int = 0
    ordered: list[ModelRow] = field(default_factory=list)
    results: dict[str, ModelRow] = field(default_factory=dict)
    wire: list[WireMessage] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)  # where each ordered row's messages start
    open_from: int = 0  # the first ordered row whose messages may still change
    running: list[int] = field(default_factory=list)  # characters of `wire` up to each message
    filed: list[int] = field(default_factory=list)  # messages of `wire` with files, up to each

    def wire_messages(self, system_prompt: str) -> list[WireMessage]:
        """The request's messages: as `context.wire_messages(system_prompt, rows)` builds them."""
        return [WireMessage("system", system_prompt), *self.wire]

    def chars(self) -> int:
        """The characters of `wire` as compress/tokens.request_chars counts them."""
        return self.running[-1] if self.running else 0

    def has_files(self) -> bool:
        """Whether a message of `wire` carries a prompt's files."""
        return bool(self.filed and self.filed[-1])


class Transcripts:
    """The views of the sessions this process assembles requests for."""

    def __init__(self, keep: int = KEEP_SESSIONS) -> None:
        self._views: OrderedDict[str, View] = OrderedDict()
        self._keep = keep
        self._lock = threading.Lock()  # `read` runs on the store's reader thread

    def forget(self, session_id: str) -> None:
        with self._lock:
            self._views.pop(session_id, None)

    def current(self, tx: Tx, session_id: str) -> bool:
        """Whether a view of the session is kept and still current (its token has not moved):
        `read` would then read only the rows stored after it."""
        with self._lock:
            view = self._views.get(session_id)
        return view is not None and view.token == messages.view_token(tx, session_id)

    def read(self, tx: Tx, session_id: str) -> View:
        """The session's current view, inside the caller's read transaction (on the reader's
        thread: use the view there, or copy what is needed out of it)."""
        token = messages.view_token(tx, session_id)
        with self._lock:
            view = self._views.get(session_id)
        if view is None or view.token != token:
            view = View(token)
            rows = messages.for_model(tx, session_id)
        else:
            rows = messages.model_page(tx, session_id, view.last_id)
        if rows and not _extend(view, rows):
            view = View(token)  # a second result for an answered call: built from scratch
            _extend(view, messages.for_model(tx, session_id))
        with self._lock:
            self._views[session_id] = view
            self._views.move_to_end(session_id)
            while len(self._views) > self._keep:
                self._views.popitem(last=False)
        return view


def _extend(view: View, rows: list[ModelRow]) -> bool:
    """Appends `rows` (all after `view.last_id`) to the view; False when the view must be
    rebuilt from all its rows instead (a second result for a call already answered)."""
    fresh = not view.ordered
    if fresh:
        rows = in_model_order(rows)
    for r in rows:
        if r.role == "tool" and r.call_id is not None:
            if r.call_id in view.results and not fresh:
                return False
            view.results[r.call_id] = r
    start = view.open_from
    view.ordered.extend(rows)
    view.last_id = max(view.last_id, max(r.id for r in rows))
    del view.wire[view.starts[start] if start < len(view.starts) else len(view.wire):]
    del view.starts[start:]
    del view.running[len(view.wire):]
    del view.filed[len(view.wire):]
    view.open_from = len(view.ordered)
    for i in range(start, len(view.ordered)):
        r = view.ordered[i]
        view.starts.append(len(view.wire))
        emitted = row_messages(r, view.results)
        if view.open_from == len(view.ordered) and emitted.unanswered:
            view.open_from = i
        for m in emitted.messages:
            view.wire.append(m)
            view.running.append((view.running[-1] if view.running else 0) + message_chars(m))
            view.filed.append((view.filed[-1] if view.filed else 0) + bool(m.files))
    return True


