"""A session's transcript as a list of display items, built from durable messages and live events.

No Qt here: the widgets adapt this to a list model.  Every change goes through
`_insert`, `_remove` and `_changed`, which tell a `Listener` before and after,
so a Qt model can emit its begin/end signals around the mutation.

Sources of truth, in order: rows from `session.messages`/`session.resume`
(durable), then events with a seq above the snapshot the rows came from.  At
the end of a turn the window reloads that turn's rows and `reconcile_turn`
replaces the live items with the durable ones, so what stays on screen is
exactly what the backend stored (the streamed text is only a preview; the
final text is `message.complete.text`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from desktop.state import answers, questions

# The items live in state/items.py (state/answers.py needs them too); importers find them here.
from desktop.state.items import AssistantItem as AssistantItem
from desktop.state.items import Item as Item
from desktop.state.items import NoteItem as NoteItem
from desktop.state.items import ToolItem as ToolItem
from desktop.state.items import UserItem as UserItem
from desktop.state.live_tail import LiveTail
from shared import protocol as p
from shared.client import Incoming

PROGRESS_LINES = 400  # of live tool output, the last lines kept for the card
PROGRESS_KEEP = 16_000  # and at most this many characters of them
DONE_TOOL = frozenset({"ok", "error", "denied", "skipped", "interrupted", "unknown"})
# A tool call's status in words: its card says them, and so does a copied exchange.
TOOL_STATUS_WORDS = {
    "pending": "queued",
    "running": "running",
    "waiting_approval": "needs approval",
    "waiting_answer": "needs your answer",
    "ok": "done",
    "error": "error",
    "denied": "denied",
    "skipped": "skipped",
    "interrupted": "interrupted",
    "unknown": "outcome unknown",
}

class Listener(Protocol):
    def before_insert(self, index: int, count: int) -> None: ...
    def after_insert(self) -> None: ...
    def before_remove(self, index: int, count: int) -> None: ...
    def after_remove(self) -> None: ...
    def changed(self, index: int) -> None: ...


class _Silent:
    def before_insert(self, index: int, count: int) -> None: ...
    def after_insert(self) -> None: ...
    def before_remove(self, index: int, count: int) -> None: ...
    def after_remove(self) -> None: ...
    def changed(self, index: int) -> None: ...


def args_summary(name: str, arguments: dict[str, Any]) -> str:
    """One line saying what a call does, for the card's header."""
    for key in ("command", "path", "pattern", "query", "url", "task"):
        value = arguments.get(key)
        if isinstance(value, str) and value:
            return value.splitlines()[0][:200]
    if not arguments:
        return ""
    first = next(iter(arguments.items()))
    return f"{first[0]}={first[1]!s}"[:200]


def items_from_messages(messages: Iterable[p.Message]) -> list[Item]:
    """Display items for durable rows, tool results folded into their call's card."""
    out: list[Item] = []
    cards: dict[str, ToolItem] = {}
    for m in messages:
        turn, hidden = m.turn_id, not m.active
        if m.role == "user":
            out.append(UserItem(m.message_id, turn, text=m.content, hidden=hidden,
                                steer=bool((m.meta or {}).get("steer")),
                                branches=list(m.branches or []),
                                attachments=list(m.attachments or [])))
        elif m.role == "assistant":
            if m.content:
                out.append(AssistantItem(m.message_id, turn, text=m.content, hidden=hidden))
            for call in m.tool_calls or []:
                card = ToolItem(f"call:{call.call_id}", turn, call_id=call.call_id,
                                name=call.name, arguments=call.arguments, hidden=hidden)
                card.summary = args_summary(card.name, card.arguments)
                cards[card.call_id] = card
                out.append(card)
        elif m.role == "tool":
            cid = m.call_id or ""
            found = cards.get(cid)
            if found is None:  # its call is on an older page
                found = ToolItem(f"call:{cid}", turn, call_id=cid, name=m.tool_name or "",
                                 hidden=hidden)
                cards[cid] = found
                out.append(found)
            _fill_result(found, m)
        elif m.role == "system_note":
            meta = m.meta or {}
            out.append(NoteItem(m.message_id, turn, kind=m.note_kind or "", text=m.content,
                                detail=str(meta.get("detail") or ""),
                                failure_kind=str(meta.get("kind") or ""), hidden=hidden,
                                undone=bool(meta.get("undone"))))
    return out


def _fill_result(card: ToolItem, m: p.Message) -> None:
    meta = m.meta or {}
    card.status = m.status or "ok"
    card.output = m.content
    card.diff = str(meta.get("diff") or "")
    card.duration_ms = meta.get("duration_ms", card.duration_ms)
    card.spilled_path = meta.get("spilled_path", card.spilled_path)
    card.undone = bool(meta.get("undone"))
    _outcome(card, meta)
    card.name = card.name or m.tool_name or ""
    _decided(card, meta)
    _child(card, meta)
    _sandbox(card, meta)
    card.bump()


def _sandbox(card: ToolItem, meta: dict[str, Any]) -> None:
    card.sandbox_blocked = str(meta.get("sandbox_blocked") or card.sandbox_blocked)
    card.sandbox_note = str(meta.get("sandbox_note") or card.sandbox_note)


def _child(card: ToolItem, meta: dict[str, Any] | None) -> None:
    """A delegate call's child session, from a progress event's or a result's meta."""
    child = (meta or {}).get("child_session_id")
    if isinstance(child, str) and child:
        card.child_session_id = child


def _outcome(card: ToolItem, meta: dict[str, Any]) -> None:
    """A `clarify` call's answer (or that nobody gave one), from its result."""
    status = meta.get("question_status")
    if card.name != "clarify" or not status:
        return
    answer = questions.answer_of_result(card.arguments, meta, card.output)
    if answer is not None:
        card.outcome = f"Answered: {answer}"
    elif status == "expired":
        card.outcome = "Nobody answered in time."


def _decided(card: ToolItem, meta: dict[str, Any]) -> None:
    """Who decided about the call, from its result's meta (absent: nobody was asked)."""
    by = meta.get("decided_by")
    card.decided_by = str(by) if by else card.decided_by
    card.decided_at = str(meta["decided_at"]) if meta.get("decided_at") else card.decided_at
    card.decision = str(meta["decision"]) if meta.get("decision") else card.decision
    card.hook = str(meta["hook"]) if meta.get("hook") else card.hook
    timeout = meta.get("timeout_s")
    card.timeout_s = float(timeout) if isinstance(timeout, int | float) else card.timeout_s


class Transcript:
    """The items of one session window, plus what it needs for paging."""

    def __init__(self, listener: Listener | None = None) -> None:
        self.items: list[Item] = []
        self.listener: Listener = listener or _Silent()
        self.has_more = False
        self.oldest_message_id: str | None = None
        self.fetched_messages = 0  # rows read from the backend: what paging keeps small
        self._stream: AssistantItem | None = None
        self.running: str | None = None  # the turn streaming now: its prompt gets no bar yet
        self.again: str | None = None  # the prompt (key) that turn answers again, if it does

    # --- loading -----------------------------------------------------------------

    def load(self, messages: list[p.Message], has_more: bool,
             active_turn: p.ActiveTurn | None = None, waiting: frozenset[str] = frozenset(),
             asking: frozenset[str] = frozenset()) -> None:
        """Replaces everything with the last page (and the text streamed so far of a running
        turn); the calls in `waiting` (call ids) wait for an approval, those in `asking` for
        the answer to their question."""
        self._stream = None
        if self.items:
            self._remove(0, len(self.items))
        self.fetched_messages += len(messages)
        self.has_more = has_more
        self.oldest_message_id = messages[0].message_id if messages else None
        items = items_from_messages(messages)
        if active_turn is not None:
            for item in items:
                if isinstance(item, ToolItem) and item.turn_id == active_turn.turn_id \
                        and item.status == "pending":
                    item.status = "waiting_approval" if item.call_id in waiting \
                        else "waiting_answer" if item.call_id in asking else "running"
            if active_turn.text:
                self._stream = AssistantItem(f"stream:{active_turn.turn_id}", active_turn.turn_id,
                                             text=active_turn.text, streaming=True)
                items.append(self._stream)
        self.running = active_turn.turn_id if active_turn is not None else None
        self.again = None
        self._insert(0, items)
        self._paginate()

    def prepend(self, messages: list[p.Message], has_more: bool,
                fresh: list[Item] | None = None) -> int:
        """Adds an older page above; returns how many items were added at the top.  `fresh`:
        the page's items made beforehand (`items_from_messages`; measured ahead by the view)."""
        self.fetched_messages += len(messages)
        self.has_more = has_more
        if not messages:
            return 0
        self.oldest_message_id = messages[0].message_id
        # Result cards at the top whose call is on this page: rebuild them with their call.
        head = 0
        while head < len(self.items):
            item = self.items[head]
            if not (isinstance(item, ToolItem) and item.key.startswith("call:")
                    and item.call_id in _call_ids(messages)):
                break
            head += 1
        orphans = [it for it in self.items[:head] if isinstance(it, ToolItem)]
        if fresh is None:
            fresh = items_from_messages(messages)
        by_call = {it.call_id: it for it in fresh if isinstance(it, ToolItem)}
        for orphan in orphans:
            card = by_call[orphan.call_id]
            card.status, card.output, card.diff = orphan.status, orphan.output, orphan.diff
            card.duration_ms, card.spilled_path = orphan.duration_ms, orphan.spilled_path
            card.expanded = orphan.expanded  # as the reader left it (reconcile_turn keeps it too)
            card.bump()  # (not as it was measured, if it was)
        before = len(self.items)
        if head:
            self._remove(0, head)
        self._insert(0, fresh)
        self._paginate()
        return len(self.items) - before

    def reconcile_turn(self, turn_id: str, messages: list[p.Message]) -> None:
        """Swaps a finished turn's live items for the stored rows of that turn."""
        rows = [m for m in messages if m.turn_id == turn_id]
        if not rows:
            return
        if messages[0].turn_id == turn_id and rows[0].role != "user":
            # The page starts inside the turn (a turn longer than the page): replacing all the
            # turn's items with this tail would drop its first rows from the window for good
            # (paging only fetches rows older than oldest_message_id).  Keep the live items;
            # message.complete has already ended them with the final text.
            return
        idx = [i for i, it in enumerate(self.items) if it.turn_id == turn_id]
        fresh = items_from_messages(rows)
        for old in self.items:
            if isinstance(old, ToolItem) and old.turn_id == turn_id and old.expanded:
                for new in fresh:
                    if isinstance(new, ToolItem) and new.call_id == old.call_id:
                        new.expanded = True
        if self._stream is not None and self._stream.turn_id == turn_id:
            self._stream = None
        live = next((self.items[i] for i in idx if answers.of_answer(self.items[i])), None)
        if live is not None:
            # Shown or not as the live rows are: an `answer.chosen` applied since these rows
            # were read is newer than they are (and one not applied yet comes next).
            for new in fresh:
                if answers.of_answer(new):
                    new.hidden = live.hidden
        start = idx[0] if idx else len(self.items)
        if idx:
            # The turn's items are contiguous unless another window's prompt interleaved; remove
            # each (from the end) and put the stored rows where the first one was.
            for i in reversed(idx):
                self._remove(i, 1)
        self._insert(min(start, len(self.items)), fresh)
        if self.running == turn_id:
            self.running = self.again = None
        self._paginate()

    # --- events ------------------------------------------------------------------

    def apply(self, event: Incoming) -> str | None:
        """Applies one live event; returns the turn id when a turn just finished."""
        data, turn = event.data, event.turn_id
        if isinstance(data, p.TextDelta):
            stream = self._streaming(turn)
            stream.text += data.text
            self._touch(stream)
        elif isinstance(data, p.ToolStart):
            self._end_stream()
            card = self._card(data.call_id, turn, data.name)
            card.arguments = data.arguments or card.arguments
            card.summary = data.summary or args_summary(card.name, card.arguments)
            if card.status not in DONE_TOOL:
                card.status = "running"
            self._touch(card)
        elif isinstance(data, p.ToolProgress):
            card = self._card(data.call_id, turn, "")
            if data.text:
                self._live_output(card, data.text)
            _child(card, data.meta)
            self._touch(card)
        elif isinstance(data, p.ToolComplete):
            card = self._card(data.call_id, turn, data.name)
            card.status = data.status
            card.tail = None  # its output is complete: `progress` stays as it was left
            card.summary = data.summary or card.summary
            card.duration_ms = data.duration_ms
            card.spilled_path = data.spilled_path
            meta = data.meta or {}
            card.diff = str(meta.get("diff") or card.diff)
            _decided(card, meta)
            _child(card, meta)
            _sandbox(card, meta)
            if data.output and not card.output:
                # The start of the stored result, until the turn's rows replace it in full.
                card.output = data.output + ("\n…" if data.output_truncated else "")
            _outcome(card, meta)
            self._touch(card)
        elif isinstance(data, p.ApprovalEvent):
            asked = self._find_card(data.approval.call_id)
            if asked is not None and asked.status not in DONE_TOOL:
                asked.status = "waiting_approval" if isinstance(data, p.ApprovalRequested) else "running"
                self._touch(asked)
        elif isinstance(data, p.QuestionEvent):
            self._asked(data.question, isinstance(data, p.QuestionResolved))
        elif isinstance(data, p.TurnStarted):
            self._end_stream()
            self.running, self.again = data.turn_id, data.regenerates
            if data.regenerates is not None:
                self._paginate()  # its prompt's bar goes until the new answer is complete
        elif isinstance(data, p.ReviewNoted):
            if self.find(data.message.message_id) is None:  # (a reload may have read it)
                self._insert(len(self.items), items_from_messages([data.message]))
        elif isinstance(data, p.ReviewUndone):
            row = self.find(data.message_id)
            noted = self.items[row] if row is not None else None
            if isinstance(noted, NoteItem) and not noted.undone:
                noted.undone = True
                self._touch(noted)
        elif isinstance(data, p.AnswerChosen):
            self.choose(data.message_id, data.turn_id)
        elif isinstance(data, p.SessionForked):
            self.forked(data.message_id, data.branch.session_id)
        elif isinstance(data, p.FilesRestored):
            for call_id in data.call_ids:
                undone = self._find_card(call_id)
                if undone is not None and not undone.undone:
                    undone.undone = True
                    self._touch(undone)
        elif isinstance(data, p.MessageComplete):
            last = self._stream if self._stream and self._stream.turn_id == turn else None
            text = data.text
            if last is not None:
                last.streaming = False
                last.text = text  # the authoritative text, not our accumulation
                self._touch(last)
            elif text and not (data.status != "completed" and self._last_said(turn) == text):
                # (Interrupted while its tools ran, a turn's last message is the one with the
                # calls, already shown above their cards: not a new message to add.)
                item = AssistantItem(f"stream:{turn}", turn, text=text)
                self._insert(len(self.items), [item])
            self._stream = None
            if self.running == turn:
                self.running = self.again = None
                self._paginate()
            return turn
        return None

    def _asked(self, q: p.Question, closed: bool) -> None:
        """A question's call waits for the answer, or says how it closed."""
        asked = self._find_card(q.call_id)
        if asked is None:
            return
        if not closed and q.status == "pending":
            if asked.status not in DONE_TOOL:
                asked.status = "waiting_answer"
        else:
            asked.outcome = questions.outcome_words(q)
            if asked.status not in DONE_TOOL:
                asked.status = "running"
        self._touch(asked)

    # --- answers and branches ---------------------------------------------------------

    def choose(self, prompt_key: str, turn_id: str) -> None:
        """Shows `turn_id`'s answer to the prompt (`answer.chosen`), hiding its other answers'
        rows; a prompt not loaded: the rows above the first prompt loaded."""
        ex = answers.exchange_of(self.items, prompt_key)
        if ex is None:
            found = answers.exchanges(self.items)
            ex = found[0] if found and found[0].prompt is None else None
        if ex is not None:
            for i in range(ex.start, ex.end):
                item = self.items[i]
                hide = answers.of_answer(item) and item.turn_id != turn_id
                if item.hidden != hide:
                    item.hidden = hide
                    self._touch(item)
        self._paginate()

    def forked(self, prompt_key: str, session_id: str) -> None:
        """A branch was made at the prompt (`session.forked`): it names it."""
        i = self.find(prompt_key)
        item = self.items[i] if i is not None else None
        if isinstance(item, UserItem) and session_id not in item.branches:
            item.branches.append(session_id)
            self._touch(item)

    def bar_of(self, row: int) -> answers.AnswerBar | None:
        """The answer bar of the exchange row `row` is in, if it has one."""
        ex = answers.exchange_at(self.items, row)
        if ex is None:
            return None
        for i in range(ex.start, ex.end):
            if isinstance(self.items[i], answers.AnswerBar):
                found = self.items[i]
                assert isinstance(found, answers.AnswerBar)
                return found
        return None

    def last_bar(self) -> answers.AnswerBar | None:
        for item in reversed(self.items):
            if isinstance(item, answers.AnswerBar):
                return item
        return None

    def _paginate(self) -> None:
        """Puts each exchange's answer bar where its rows call for one (state/answers.py):
        bars that moved or went are removed, new ones inserted, a changed one updated."""
        found = answers.wanted_bars(self.items, self.running, self.again)
        wanted = {w.prompt_key: w for w in found}
        removed = False
        for i in range(len(self.items) - 1, -1, -1):
            bar = self.items[i]
            if not isinstance(bar, answers.AnswerBar):
                continue
            want = wanted.get(bar.prompt_key)
            if want is None or want.row != i:
                self._remove(i, 1)
                removed = True
                continue
            del wanted[bar.prompt_key]
            now = (list(want.turns), want.shown, want.last)
            if (bar.turns, bar.shown, bar.last) != now:
                bar.turns, bar.shown, bar.last = now
                self._touch(bar)
        if not wanted:
            return
        if removed:  # rows moved up by the removals: the wanted rows are counted again
            found = answers.wanted_bars(self.items, self.running, self.again)
        for want in reversed(found):
            if want.prompt_key in wanted:
                bar = answers.AnswerBar(f"bar:{want.prompt_key}", None, prompt_key=want.prompt_key,
                                        turns=list(want.turns), shown=want.shown, last=want.last)
                self._insert(want.row, [bar])

    def link_children(self, children: Iterable[p.Session]) -> None:
        """Names the sub-agent session of delegate cards that do not know it yet: a window
        opened while the call runs has only its stored call, not the announcement."""
        by_call = {s.delegated_call_id: s.session_id for s in children if s.delegated_call_id}
        for item in self.items:
            if isinstance(item, ToolItem) and item.child_session_id is None \
                    and item.call_id in by_call:
                item.child_session_id = by_call[item.call_id]
                self._touch(item)

    def add_user(self, admission_id: str, turn_id: str | None, text: str,
                 steer: bool = False, attachments: Iterable[p.MessageAttachment] = ()) -> None:
        """The prompt that a turn just started with (or a steer that joined it), until the
        stored row replaces it."""
        if any(isinstance(it, UserItem) and it.key == f"prompt:{admission_id}" for it in self.items):
            return
        self._end_stream()
        self._insert(len(self.items), [UserItem(f"prompt:{admission_id}", turn_id, text=text,
                                                steer=steer, attachments=list(attachments))])

    def touch_attachments(self, sha256: str) -> None:
        """Draws again the prompts showing the file (or thumbnail) `sha256`: it just arrived."""
        for item in self.items:
            if isinstance(item, UserItem) and any(
                    sha256 in (a.sha256, a.thumbnail) for a in item.attachments):
                self._touch(item)

    def toggle(self, index: int) -> None:
        item = self.items[index]
        if isinstance(item, ToolItem) or (isinstance(item, NoteItem) and item.detail):
            item.expanded = not item.expanded
            self._touch(item)

    def streaming(self) -> tuple[str, str]:
        """The answer streaming now, as (its key, its text so far); ("", "") when none is."""
        stream = self._stream
        if stream is None or not stream.streaming:
            return "", ""
        return stream.key, stream.text

    def find(self, key: str) -> int | None:
        for i in range(len(self.items) - 1, -1, -1):
            if self.items[i].key == key:
                return i
        return None

    # --- helpers -------------------------------------------------------------------

    def _streaming(self, turn: str | None) -> AssistantItem:
        if self._stream is None or self._stream.turn_id != turn:
            self._end_stream()
            n = sum(1 for it in self.items if it.key.startswith(f"stream:{turn}"))
            self._stream = AssistantItem(f"stream:{turn}:{n}", turn, streaming=True)
            self._insert(len(self.items), [self._stream])
        return self._stream

    def _last_said(self, turn: str | None) -> str | None:
        for item in reversed(self.items):
            if isinstance(item, AssistantItem) and item.turn_id == turn:
                return item.text
        return None

    def _end_stream(self) -> None:
        if self._stream is not None:
            self._stream.streaming = False
            self._touch(self._stream)
            self._stream = None

    def _find_card(self, call_id: str) -> ToolItem | None:
        i = self.find(f"call:{call_id}")
        item = self.items[i] if i is not None else None
        return item if isinstance(item, ToolItem) else None

    def _card(self, call_id: str, turn: str | None, name: str) -> ToolItem:
        card = self._find_card(call_id)
        if card is None:
            card = ToolItem(f"call:{call_id}", turn, call_id=call_id, name=name, status="running")
            self._insert(len(self.items), [card])
        elif name and not card.name:
            card.name = name
        return card

    @staticmethod
    def _live_output(card: ToolItem, chunk: str) -> None:
        """Appends a chunk of the call's raw output (tool.progress: a stream, in order)."""
        if card.tail is None:
            card.tail = LiveTail(PROGRESS_LINES, PROGRESS_KEEP)
            card.tail.feed(card.progress)  # "" unless output came after the card completed
        card.tail.feed(chunk)
        card.progress = card.tail.text

    def _touch(self, item: Item) -> None:
        item.bump()
        for i in range(len(self.items) - 1, -1, -1):
            if self.items[i] is item:
                self.listener.changed(i)
                return

    def _insert(self, index: int, items: list[Item]) -> None:
        if not items:
            return
        self.listener.before_insert(index, len(items))
        self.items[index:index] = items
        self.listener.after_insert()

    def _remove(self, index: int, count: int) -> None:
        if count <= 0:
            return
        self.listener.before_remove(index, count)
        del self.items[index:index + count]
        self.listener.after_remove()


def _call_ids(messages: list[p.Message]) -> set[str]:
    return {c.call_id for m in messages for c in (m.tool_calls or [])}
