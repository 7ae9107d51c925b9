"""Compressing a stored session in place, under a lock, with its guards.

The transcript people read is never rewritten: compacted rows stay, marked
`compacted`, and the summary is a new `system_note` (note_kind `summary`).
What the model sees next is the protected head, the summary (updated from
the previous one, not started over) and the tail the budget keeps.  One
compressor per session at a time (`compression_locks`, reclaimed from dead
or expired holders).  A summary call that fails falls back to a
deterministic summary, so the turn can go on, and starts a cooldown (60 →
300 → 900 s) stored on the session; two compressions in a row that leave the
request over the threshold stop automatic compression until a probe 300 s
later.  Either summary gets the same budget: what the model is asked for,
never more than the turn's window leaves beside the head, the tail and an
answer.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from backend import wire
from backend.bulk import collector_paused
from backend.compress import tokens as tok
from backend.compress.model import Call, Entry
from backend.compress.plan import Plan, plan
from backend.compress.prune import prune
from backend.compress.summary import fallback_summary, fit, summary_messages, wrap
from backend.config import ConfigFile
from backend.errors import ProviderError
from backend.ids import new_id
from backend.providers.accounting import measure, price
from backend.providers.base import ChatProvider, ChatRequest, TextChunk, ToolSpec, UsageChunk
from backend.providers.registry import ConfiguredProvider, Providers
from backend.store import compression as store
from backend.store import events, leases, messages, sessions, usage
from backend.store.db import Database, Tx
from backend.store.fenced import TurnFence
from backend.store.leases import Holder, provably_dead
from backend.store.messages import ModelRow
from shared.config import Compression
from shared.protocol import CompressionComplete, CompressionStart, SessionCreated, Usage

log = logging.getLogger("compress")

COOLDOWNS_S = (60.0, 300.0, 900.0)
PROBE_AFTER_S = 300.0
MAX_INEFFECTIVE = 2
MAX_PER_CALL = 3  # compressions before one model call
SUMMARY_TIMEOUT_S = 120.0
SUMMARY_MIN_TOKENS, SUMMARY_MAX_TOKENS = 2_000, 10_000
MIN_ANSWER_TOKENS = 256  # below this much room the request cannot fit the window at all
# Left free beside head, summary and tail: an answer's room and preflight's safety margin.
ANSWER_RESERVE_TOKENS = MIN_ANSWER_TOKENS + 256
SUMMARY_FLOOR_TOKENS = 64  # a summary this short still says something; less cannot fit anyway
WRAP_CHARS = len(wrap(""))  # the frame the model reads a summary in
READ_PAGE_ROWS = 5_000  # the model's view read for compression a page at a time
LONG_SESSION_ROWS = 1_000  # over this many rows, preflight counts in SQL before building


@dataclass
class CompressionResult:
    compressed: bool
    before_tokens: int
    after_tokens: int
    usage: Usage = field(default_factory=Usage)  # the summary call's, already in the ledger
    why_not: str | None = None  # when not compressed
    child_session_id: str | None = None  # rotation: where the conversation continues


@dataclass(frozen=True)
class Where:
    """The turn a compression runs in (for its events), if any."""

    turn_id: str | None = None
    admission_id: str | None = None


class Compressor:
    def __init__(self, db: Database, config: ConfigFile, providers: Providers, epoch: int) -> None:
        self.db = db
        self.config = config
        self.providers = providers
        self.holder = Holder.here(epoch, "compress")
        self.calibrations: dict[str, tok.Calibration] = {}
        self._running: set[str] = set()
        # Told the id of each session a compression changed (in place, or the parent of a
        # rotation): whoever keeps a session's view (turn/transcript.py) forgets it.
        self.listeners: list[Callable[[str], None]] = []

    # --- measuring -------------------------------------------------------------------

    def calibration(self, provider: str) -> tok.Calibration:
        return self.calibrations.setdefault(provider, tok.Calibration())

    def observe(self, provider: str, request: ChatRequest, reported: Usage) -> None:
        """Learns the provider's characters per token from the usage it reported."""
        if not reported.estimated and reported.input_tokens > 0:
            self.calibration(provider).observe(tok.request_chars(request), reported.input_tokens)

    def measure(self, request: ChatRequest, provider: str) -> int:
        return self.calibration(provider).tokens(tok.request_chars(request)) + 4 * len(request.messages)

    def over_threshold(self, request: ChatRequest, link: ConfiguredProvider) -> bool:
        """Whether the request measures over the compression threshold of `link`'s window
        (the turn then leaves old images out before any text is compressed)."""
        cfg = self.config.config.compression
        limit = tok.threshold_tokens(link.cfg.context_window, cfg.threshold)
        return self.measure(request, link.name) >= limit

    async def due(
        self, session_id: str, request: ChatRequest, link: ConfiguredProvider, attempts: int,
    ) -> str | None:
        """The preflight decision: the reason to compress before this call, or None."""
        if not _two_beyond_system(request):
            return None  # (the system prompt, maybe memory, and one message: nothing to compress)
        return await self._decide(session_id, self.measure(request, link.name), link, attempts)

    async def due_by_size(
        self, session_id: str, link: ConfiguredProvider, tools: tuple[ToolSpec, ...],
        kept: Callable[[Tx], bool] | None = None,
    ) -> str | None:
        """The same decision before a long session's request is built, from what SQL counts
        of it (store/messages.model_size): a request is at least that large, so when the count
        alone is over, the request would be too, and building one only to throw it away cost
        a 100,000-message session half a second.  None means: build it and ask `due`.
        `kept(tx)`: whether the caller keeps a current view of the session (turn/transcript.py);
        then building costs only the rows stored since, and the count (which reads every row
        of the session: it grew with the history, turn after turn) is skipped."""
        if not self.config.config.compression.enabled:
            return None

        def read(tx: Tx) -> tuple[int, int, int] | None:
            row = sessions.row(tx, session_id)
            if row is None or row.message_count <= LONG_SESSION_ROWS:
                return None
            if kept is not None and kept(tx):
                return None
            n, chars = messages.model_size(tx, session_id)
            return n, chars, len(row.system_prompt or "")

        size = await self.db.read(read)
        if size is None or size[0] <= 1:
            return None
        n, chars, prompt = size
        least = (self.calibration(link.name).tokens(chars + prompt + tok.tools_chars(tools))
                 + tok.MESSAGE_OVERHEAD_TOKENS * (n + 1))
        return await self._decide(session_id, least, link, 0)

    async def _decide(
        self, session_id: str, measured: int, link: ConfiguredProvider, attempts: int,
    ) -> str | None:
        cfg = self.config.config.compression
        if not cfg.enabled or attempts >= MAX_PER_CALL:
            return None
        limit = tok.threshold_tokens(link.cfg.context_window, cfg.threshold)
        if measured < limit:
            return None
        g = await self.db.read(lambda tx: store.guards(tx, session_id))
        now = time.time()
        # The guards keep compression from running (and costing) again and again while the
        # request still fits; one that cannot fit at all is compressed regardless.
        fits = measured + MIN_ANSWER_TOKENS < link.cfg.context_window
        if fits and now < g.cooldown_until:
            return None
        if fits and g.ineffective >= MAX_INEFFECTIVE and now < g.probe_after:
            return None
        return (f"the request is about {measured:,} tokens, over {limit:,} "
                f"({link.name}'s window is {link.cfg.context_window:,})")

    # --- compressing ------------------------------------------------------------------

    async def compress(
        self, session_id: str, link: ConfiguredProvider, reason: str, tools: tuple[ToolSpec, ...] = (),
        focus: str | None = None, where: Where = Where(), manual: bool = False,
        fence: TurnFence | None = None,
    ) -> CompressionResult:
        """Compresses the session.  `fence`: the running turn it compresses for; its writes
        (the start event and the commit, or the rotation that moves its lease) are then that
        turn's, fenced on its lease.  Without one (session.compress), none runs."""
        cfg = self.config.config.compression
        busy = CompressionResult(False, 0, 0, why_not="another compression of this session is running")
        # One holder per process: the set keeps two compressions in this process apart
        # (a turn's and a session.compress), the table keeps processes apart.
        if session_id in self._running:
            return busy
        self._running.add(session_id)
        try:
            if not await self.db.write(lambda tx: self._lock(tx, session_id)):
                return busy
            try:
                return await self._compress(session_id, link, reason, tools, focus, where, manual,
                                            cfg, fence)
            finally:
                await self.db.write(lambda tx: store.release_lock(tx, session_id, self.holder))
        finally:
            self._running.discard(session_id)

    def _lock(self, tx: Tx, session_id: str) -> bool:
        row = store.lock_row(tx, session_id)
        if row is not None and row.holder != self.holder \
                and row.expires_at > time.time() and not provably_dead(row.holder):
            return False
        if row is not None and row.holder != self.holder:
            log.warning("session %s: reclaiming the compression lock of %s", session_id, row.holder)
        store.put_lock(tx, session_id, self.holder)
        return True

    async def _compress(
        self, session_id: str, link: ConfiguredProvider, reason: str, tools: tuple[ToolSpec, ...],
        focus: str | None, where: Where, manual: bool, cfg: Compression, fence: TurnFence | None,
    ) -> CompressionResult:
        write = self.db.write if fence is None else fence.write
        holder = None if fence is None else fence.turn.holder
        def read(tx: Tx) -> tuple[str, store.Guards]:
            row = sessions.row(tx, session_id)
            prompt = str(row.system_prompt or "") if row is not None else ""
            return prompt, store.guards(tx, session_id)

        cal = self.calibration(link.name)
        tools_chars = tok.tools_chars(tools)
        window = link.cfg.context_window
        tail = tok.tail_budget(window, cfg.tail_tokens_min, cfg.tail_tokens_max)

        def measure_and_plan() -> tuple[int, Plan | None, int]:
            cut = plan(entries, cfg.protect_first_n, tail, cal)
            middle = tok.request_tokens("", cut.middle) if cut is not None else 0
            return tok.request_tokens(prompt, entries, tools_chars, cal), cut, middle

        with collector_paused():  # a long session's entries (see backend/bulk.py)
            prompt, guards = await self.db.read(read)
            entries = await self._entries(session_id)
            # Off the event loop: 100,000 entries take a tenth of a second to measure and cut.
            before, p, middle_tokens = await asyncio.to_thread(measure_and_plan)
        if p is None:  # everything is head or recent tail: nothing to summarize
            return CompressionResult(False, before, before, why_not="nothing old enough to summarize yet")
        await write(functools.partial(self._event, session_id=session_id, where=where,
                                      data=CompressionStart(reason=reason, tokens=before)))
        # Only the head is pruned in place: the middle leaves the model's view and the tail is
        # kept verbatim.  (Pruning is per entry, so this is the whole transcript's pruning, cut
        # to the head.)
        head = prune(p.head, len(p.head))
        changed = [(old, new) for old, new in zip(p.head, head, strict=True) if old is not new]
        previous = p.previous_summary.content if p.previous_summary is not None else None
        aux = self._aux(link)
        rest = tok.request_tokens(prompt, [*head, *p.tail], tools_chars, cal)
        room = window - rest - tok.MESSAGE_OVERHEAD_TOKENS - ANSWER_RESERVE_TOKENS
        text, spent, failed = await self._summary(aux, previous, p, middle_tokens, focus, room, cal)
        summary = Entry(0, "summary", wrap(text))  # (repair numbers its stubs -1, -2, ...)
        after = tok.request_tokens(prompt, [*head, summary, *p.tail], tools_chars, cal)
        limit = tok.threshold_tokens(window, cfg.threshold)
        now = time.time()
        if failed:
            n = guards.failures + 1
            guards = replace(guards, failures=n, cooldown_until=now + COOLDOWNS_S[min(n, 3) - 1])
        else:
            guards = replace(guards, failures=0, cooldown_until=0.0)
        if not manual:
            if after >= limit:
                n = guards.ineffective + 1
                guards = replace(guards, ineffective=n,
                                 probe_after=now + PROBE_AFTER_S if n >= MAX_INEFFECTIVE else 0.0)
            else:
                guards = replace(guards, ineffective=0, probe_after=0.0)
        compacted = [e.id for e in p.middle]
        if p.previous_summary is not None:
            compacted.append(p.previous_summary.id)
        anchor = p.head[-1].id if p.head else 0
        # The middle is every conversation row strictly between the head and the tail.
        hide_before = p.tail[0].id if p.tail else p.middle[-1].id + 1

        def commit(tx: Tx) -> None:
            # The middle leaves the model's view as one range (flagging each row rewrote the
            # whole session under the single writer: 100k rows held it for half a second).
            store.hide(tx, session_id, anchor, hide_before)
            if p.previous_summary is not None:
                store.compact(tx, session_id, [p.previous_summary.id])
            for old, new in changed:
                store.set_wire(tx, old.id, new.content if new.content != old.content else None,
                               [call_json(c) for c in new.calls] if new.calls != old.calls else None)
            messages.insert(
                tx, session_id, "system_note", text, turn_id=where.turn_id, note_kind="summary",
                api_content=wrap(text),
                meta={"anchor": anchor, "compacted": len(compacted), "before_tokens": before,
                      "after_tokens": after, "fallback": failed},
            )
            store.set_guards(tx, session_id, guards)
            # The next request rebuilds the system prompt once (then it is frozen again).
            sessions.clear_system_prompt(tx, session_id)
            if spent.input_tokens or spent.output_tokens:
                usage.record(tx, session_id, aux.name, aux.cfg.model, "compression", spent)
            wire.emit(tx, session_id, CompressionComplete(before_tokens=before, after_tokens=after),
                      turn_id=where.turn_id, admission_id=where.admission_id)

        def rotate(tx: Tx) -> str:
            """The compacted conversation continues in a child session: head, summary and
            tail copied in the model's order; queued and running admissions, the lease and
            every follower move with it; the parent keeps its history and a closing note."""
            parent = sessions.row(tx, session_id)
            assert parent is not None
            child = new_id("ses")
            sessions.insert(tx, child, parent.title, parent.cwd, parent.model, parent.titled,
                            parent.provider)
            sessions.link_rotation(tx, session_id, child)
            # The parent's rows before the tail are pruned as in place (it is not compacted).
            keep_from = next((i for i in range(len(entries) - 1, -1, -1)
                              if entries[i] is p.tail[0]), len(entries)) if p.tail else len(entries)
            pruned = prune(entries, keep_from)
            for old, new in ((o, n) for o, n in zip(entries, pruned, strict=True) if o is not n):
                store.set_wire(tx, old.id, new.content if new.content != old.content else None,
                               [call_json(c) for c in new.calls] if new.calls != old.calls else None)
            last_head = 0
            for e in p.head:
                last_head = store.copy_row(tx, child, e.id)
            messages.insert(
                tx, child, "system_note", text, turn_id=where.turn_id, note_kind="summary",
                api_content=wrap(text),
                meta={"anchor": last_head, "compacted": len(compacted), "before_tokens": before,
                      "after_tokens": after, "fallback": failed, "parent_session_id": session_id},
            )
            for e in p.tail:
                store.copy_row(tx, child, e.id)
            store.set_guards(tx, child, replace(guards, ineffective=0, probe_after=0.0)
                             if not failed else guards)
            store.move_queue(tx, session_id, child)
            if holder is not None:
                leases.release(tx, session_id, holder)
                leases.put(tx, child, holder, time.time(), self.config.config.lease.ttl_s)
            messages.insert(tx, session_id, "system_note",
                            "The conversation continues in a new session, with the earlier part "
                            "summarized.", turn_id=where.turn_id, note_kind="continued",
                            meta={"child_session_id": child})
            if spent.input_tokens or spent.output_tokens:
                usage.record(tx, session_id, aux.name, aux.cfg.model, "compression", spent)
            wire.emit(tx, session_id, CompressionComplete(before_tokens=before, after_tokens=after,
                                                          child_session_id=child),
                      turn_id=where.turn_id, admission_id=where.admission_id)
            tx.publish(events.Moved(session_id, child))  # followers first, then the child's news
            created = sessions.get(tx, child)
            assert created is not None
            wire.broadcast(tx, child, SessionCreated(session=wire.session(created)))
            sessions.changed(tx, session_id)
            return child

        child: str | None = None
        try:
            if cfg.rotate:
                child = await write(rotate)
            else:
                await write(commit)
        finally:  # (a commit that failed may still have happened: forget it either way)
            for listener in self.listeners:
                listener(session_id)
        log.info("session %s: compressed %d rows, %d -> %d tokens%s%s", session_id, len(compacted),
                 before, after, " (fallback summary)" if failed else "",
                 f"; continues in {child}" if child else "")
        return CompressionResult(True, before, after, spent, child_session_id=child)

    async def _entries(self, session_id: str) -> list[Entry]:
        """The model's view as entries, read a page per call (to_entry on the reader's thread,
        not the event loop's): a 100,000-row session never holds the one reader, or the
        loop, for the whole read, and its rows are never all in memory beside its entries."""
        def page(tx: Tx, after: int) -> tuple[list[Entry], int, bool]:
            rows = messages.model_page(tx, session_id, after, READ_PAGE_ROWS)
            last = rows[-1].id if rows else after
            return [e for e in map(to_entry, rows) if e is not None], last, len(rows) < READ_PAGE_ROWS

        out: list[Entry] = []
        after, done = 0, False
        while not done:
            got, after, done = await self.db.read(functools.partial(page, after=after))
            out += got
        return out

    def _aux(self, link: ConfiguredProvider) -> ConfiguredProvider:
        """The auxiliary provider for summaries, or the turn's own when none is set."""
        config = self.config.config
        name = config.auxiliary_provider
        if name and name in config.providers and name != link.name:
            cfg = config.providers[name]
            try:
                return ConfiguredProvider(name, cfg, self.providers.get(name, cfg))
            except ProviderError as exc:
                log.warning("auxiliary provider %r is unusable (%s); summarizing with %s",
                            name, exc.message, link.name)
        return link

    async def _summary(
        self, aux: ConfiguredProvider, previous: str | None, p: Plan, middle_tokens: int,
        focus: str | None, room: int, cal: tok.Calibration,
    ) -> tuple[str, Usage, bool]:
        """The summary text, its call's usage, and whether the model call failed (the
        deterministic summary is used then).  `middle_tokens`: what the middle measures, plain
        (no calibration); `room`: the tokens the turn's window leaves for the summary; either
        kind is cut to it."""
        budget = summary_budget(middle_tokens, aux.cfg.context_window, room)
        limit = summary_chars(budget, cal)
        wire = summary_messages(previous, p.middle, focus, target_tokens=budget)
        request = ChatRequest(model=aux.cfg.model, messages=wire, tools=(), max_tokens=budget)
        try:
            text, reported = await asyncio.wait_for(_collect(aux.provider, request), SUMMARY_TIMEOUT_S)
        except (ProviderError, TimeoutError) as exc:
            why = exc.message if isinstance(exc, ProviderError) else "timed out"
            log.warning("compression summary call failed (%s); using a deterministic summary", why)
            return fallback_summary(previous, p.middle, limit), Usage(), True
        if not text.strip():
            return fallback_summary(previous, p.middle, limit), Usage(), True
        spent = price(measure(reported, request, text), aux.cfg)
        return fit(text.strip(), limit), spent, False

    @staticmethod
    def _event(tx: Tx, session_id: str, data: CompressionStart, where: Where) -> None:
        wire.emit(tx, session_id, data, turn_id=where.turn_id, admission_id=where.admission_id)



def summary_budget(middle_tokens: int, aux_window: int, room: int) -> int:
    """The summary's tokens: a fifth of what it condenses, within [2,000, 10,000], at most a
    quarter of the summarizer's window, and never more than the turn's window has `room`
    for (but at least SUMMARY_FLOOR_TOKENS)."""
    budget = max(SUMMARY_MIN_TOKENS, min(SUMMARY_MAX_TOKENS, middle_tokens // 5))
    budget = min(budget, max(256, aux_window // 4))
    return max(SUMMARY_FLOOR_TOKENS, min(budget, room))


def summary_chars(budget: int, cal: tok.Calibration) -> int:
    """The bare summary's characters for `budget` tokens, framed: by the provider's learnt
    ratio, and never more than preflight's plain estimate (CHARS_PER_TOKEN) would allow."""
    ratio = min(cal.ratio, float(tok.CHARS_PER_TOKEN))
    return max(0, int(budget * ratio) - WRAP_CHARS)


async def _collect(provider: ChatProvider, request: ChatRequest) -> tuple[str, UsageChunk | None]:
    parts: list[str] = []
    reported: UsageChunk | None = None
    async for chunk in provider.stream(request):
        if isinstance(chunk, TextChunk):
            parts.append(chunk.text)
        elif isinstance(chunk, UsageChunk):
            reported = chunk
    return "".join(parts), reported


def to_entry(r: ModelRow) -> Entry | None:
    """A stored row as the compressor sees it; notes other than summaries are not the model's."""
    role = r.role
    content = r.api_content if r.api_content is not None else r.content
    if role == "system_note":
        if r.note_kind != "summary":
            return None
        return Entry(r.id, "summary", str(r.content))  # the summary text, unwrapped
    calls: tuple[Call, ...] = ()
    raw_calls = r.api_tool_calls or r.tool_calls
    if role == "assistant" and raw_calls:
        calls = tuple(Call(c["call_id"], c["name"], raw_arguments(c)) for c in json.loads(raw_calls))
    files, chars = described_files(r) if role == "user" else ((), 0)
    return Entry(r.id, role, str(content), calls, r.call_id, r.tool_name, files=files,
                 file_chars=chars)


def described_files(r: ModelRow) -> tuple[tuple[str, ...], int]:
    """A prompt's files (meta.attachments, items with a sha256) named for the summarizer,
    and what they cost (compress/tokens.file_chars)."""
    if not r.meta or '"sha256"' not in r.meta:  # most rows: no parse
        return (), 0
    items = json.loads(r.meta).get("attachments")
    if not isinstance(items, list):
        return (), 0
    names: list[str] = []
    chars = 0
    for a in items:
        if not isinstance(a, dict) or not isinstance(a.get("sha256"), str):
            continue
        name, kind = str(a.get("name") or "file"), str(a.get("kind") or "")
        w, h, pages = a.get("width"), a.get("height"), a.get("pages")
        if kind == "image":
            names.append(f"[image {name}, {w}×{h}]" if w and h else f"[image {name}]")
        else:
            names.append(f"[file {name}]")
        chars += tok.file_chars(kind, int(a.get("bytes") or 0),
                                pages if isinstance(pages, int) else None)
    return tuple(names), chars


def raw_arguments(call: dict[str, Any]) -> str:
    raw = call.get("arguments_raw")
    return raw if isinstance(raw, str) else json.dumps(call.get("arguments") or {})


def call_json(c: Call) -> dict[str, Any]:
    """A pruned call as stored in api_tool_calls (the wire reads `arguments_raw` first)."""
    return {"call_id": c.call_id, "name": c.name, "arguments_raw": c.arguments}


def _two_beyond_system(request: ChatRequest) -> bool:
    """Whether the request holds at least two messages besides system ones; it looks no
    further than the second (the count over all of them grew with the history)."""
    seen = 0
    for m in request.messages:
        if m.role != "system":
            seen += 1
            if seen > 1:
                return True
    return False
