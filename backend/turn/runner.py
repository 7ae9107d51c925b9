"""Runs one claimed turn: lease, then the loop of stages, then the finalizer.

The admission is already `started` when a turn reaches this module.  The
turn holds its session's lease before it writes the transcript (usually
taken in the claim's own transaction; otherwise it waits here).  Each
iteration of the loop is a row of stages — begin, assemble, preflight, call,
normalize, then either a tool round or the final answer — and each stage
says whether to proceed, start the next iteration, or leave the loop.
Whatever happens — an answer, a provider failure, an interrupt, a lost
lease, a spent budget, a store that cannot write — the turn ends through
`close_turn`, so no admission is left `started` by a live process.  Only
when the store cannot take even that (retried a few seconds) does `run`
raise StoreUnavailable, and the authority settles the admission `unknown`
in place as soon as the store takes writes again.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from backend import wire
from backend.compress.compressor import MAX_PER_CALL as MAX_COMPRESSIONS_PER_CALL
from backend.compress.compressor import Compressor, Where
from backend.config import ConfigFile
from backend.errors import ProviderError, StoreUnavailable
from backend.mcp.pool import McpPool
from backend.providers.base import ChatRequest, ToolSpec
from backend.providers.errors import policy, told
from backend.providers.registry import ConfiguredProvider, Providers
from backend.race import unless_stopped
from backend.store import admissions, attachments, messages, sessions
from backend.store.db import Database, Tx
from backend.store.fenced import TurnFence
from backend.store.leases import LeaseRecord
from backend.tools import memory, registry, skills
from backend.tools.base import Tool
from backend.tools.executor import BatchContext, Executor
from backend.tools.hooks import HookRunner
from backend.tools.sandbox import child_env
from backend.turn.attachments import Target
from backend.turn.call import ModelCallResult, attempt
from backend.turn.finalize import (
    CLOSE_RETRY_S,
    LedgerEntry,
    TurnEnd,
    close_turn,
    record_ledger,
)
from backend.turn.hooks import TurnHooks
from backend.turn.lease import LeaseWatch, wait_for_lease
from backend.turn.preflight import preflight
from backend.turn.prepared import PartCache, PreparedFiles, Reader
from backend.turn.request import assemble
from backend.turn.retry import MAX_ATTEMPTS, delay_for
from backend.turn.review import Reviewer
from backend.turn.route import RunningTurn, for_model, take_session
from backend.turn.stages import Action
from backend.turn.stream import DeltaWriter
from backend.turn.tool_round import prepare, run_round, signature
from backend.turn.transcript import Transcripts
from shared.config import sees_images
from shared.protocol import (
    LeaseWaiting,
    ProviderFallback,
    ProviderRetry,
    TextDelta,
    TurnStatus,
    TurnSteered,
    Usage,
)

log = logging.getLogger("turn")

SUMMARY_TIMEOUT_S = 120.0
# How a steer reads on the wire: the person's words, marked as sent mid-turn so the model
# folds them into the work in progress instead of starting over.
STEER_FRAME = ("[The user sent this while you were working; take it into account from here "
               "on:]\n{text}")
MAX_EMPTY_ANSWERS = 2
MAX_IDENTICAL_BATCHES = 3


@dataclass
class TurnState:
    """Everything one turn keeps in memory; nothing of it outlives the turn.  Where the turn
    runs and how it is stopped belong to `turn` (its routing state's one owner)."""

    turn: RunningTurn
    fence: TurnFence  # every write of the turn goes through it (store/fenced.py)
    halt: asyncio.Event = field(default_factory=asyncio.Event)  # interrupt or budget spent
    budget_why: str | None = None
    iterations: int = 0
    usage: Usage = field(default_factory=Usage)
    status: TurnStatus = "completed"
    reason: str | None = None  # for a person: what happened and what to do
    detail: str | None = None  # a provider failure's raw detail, shown a click away
    failure_kind: str | None = None  # a provider failure's kind (providers/errors.py)
    text: str = ""  # the final text (message.complete's)
    text_stored: bool = False  # True: `text` already sits in an assistant row
    unsent: str = ""  # the final answer's streamed text not stored yet: the close stores it
    call_ids: set[str] = field(default_factory=set)
    empty_answers: int = 0
    last_batch: str | None = None
    same_batches: int = 0
    chain: list[ConfiguredProvider] = field(default_factory=list)  # the provider chain; a fallback moves on
    chain_index: int = 0
    ledger: list[LedgerEntry] = field(default_factory=list)  # calls not yet recorded
    overflow_compressed: bool = False  # one compress-and-retry after a provider overflow
    # What the model was offered by the latest request, by name: the built-in tools and the
    # MCP servers' tools as listed then; its calls are checked against this same set.
    offered: dict[str, Tool] = field(default_factory=lambda: dict(registry.BUILTINS))
    specs: tuple[ToolSpec, ...] = ()
    mcp_listed: bool = False  # the MCP servers' lists were refreshed for this turn
    # The volatile block (memory, then the skills index), read at the turn's first request and
    # sent unchanged by every later one: a write during the turn shows from the next turn, and
    # the cached prefix holds.
    volatile: str | None = None
    depth: int | None = None  # delegations below a person's session (read once per turn)
    files: PreparedFiles | None = None  # the prompts' files as prepared for this turn's calls
    told_unseen: bool = False  # people were told the model cannot see this prompt's images
    hooks: TurnHooks | None = None  # the person's hooks (None: no runner for them)

    @property
    def link(self) -> ConfiguredProvider:
        return self.chain[self.chain_index]

    def fail(self, reason: str, exc: ProviderError | None = None) -> None:
        """Fails the turn (the first failure stands); `exc`, a provider's failure behind it,
        gives the raw detail and kind kept beside the words."""
        if self.status == "completed":
            self.status, self.reason = "failed", reason
            if exc is not None:
                self.detail, self.failure_kind = exc.message, exc.kind

    def spend(self, why: str) -> None:
        if self.budget_why is None:
            self.budget_why = why
        self.halt.set()

    @property
    def interrupted(self) -> bool:
        return self.turn.interrupted


class TurnRunner:
    def __init__(
        self, db: Database, config: ConfigFile, providers: Providers, executor: Executor,
        compressor: Compressor, mcp: McpPool | None = None, files: Reader | None = None,
        hooks: HookRunner | None = None,
    ) -> None:
        self.db = db
        self.hooks = hooks  # runs the person's [hooks.*] commands
        # Where a prompt's files are read from: the store (attachments, by sha256).
        self.read_file: Reader = files or functools.partial(
            attachments.read_bytes, db, executor.data_dir / "attachments")
        self.parts = PartCache()  # prepared files, shared by the turns of this backend
        self.mcp = mcp
        self.config = config
        self.providers = providers
        self.executor = executor
        self.compressor = compressor
        self.transcripts = Transcripts()  # each session's model view, kept between requests
        self.reviewer = Reviewer(db, config, providers, executor.data_dir)
        compressor.listeners.append(self.transcripts.forget)  # a compressed view is rebuilt

    def default_model(self) -> str:
        chosen = self.providers.default(self.config.config)
        return chosen[1].model if chosen else ""

    async def run(self, turn: RunningTurn) -> TurnStatus:
        started = time.monotonic()
        st = TurnState(turn, TurnFence(self.db, turn), files=PreparedFiles(self.read_file, self.parts),
                       depth=turn.claim.depth)
        if self.hooks is not None:
            st.hooks = TurnHooks(self.hooks, lambda: self.config.config.hooks, self.db, turn, st.fence)
        if not turn.claim.leased and not await self._wait_lease(st):
            return st.status
        cfg = self.config.config
        watch = turn.watch_lease(self.db, ttl=cfg.lease.ttl_s, refresh=cfg.lease.refresh_s,
                                 stall=cfg.limits.stall_timeout_s)
        watch.start()
        loop = asyncio.get_running_loop()
        timer = loop.call_later(cfg.limits.turn_timeout_s, st.spend,
                                f"{cfg.limits.turn_timeout_s:g} s, limits.turn_timeout_s")
        relay = asyncio.create_task(_relay(turn.stop, st.halt))
        try:
            if st.hooks is not None:  # before the first model call; an interrupt kills them
                await unless_stopped(st.hooks.start(turn.claim.text), st.halt)
            await self._loop(st, watch)
            if st.budget_why and not st.interrupted and st.status == "completed" and not st.text:
                await self._summarize(st, watch)
        except ProviderError as exc:
            st.fail(told(exc), exc)
        except StoreUnavailable as exc:
            st.fail(f"session_persistence_failed: {exc.message}")
        finally:
            timer.cancel()
            relay.cancel()
            await watch.stop()
        if st.interrupted and st.status == "completed":
            st.status, st.reason = "interrupted", turn.reason
        if st.hooks is not None:
            await self._turn_end(st)
        await self._finalize(st)
        log.info("turn %s session %s %s after %d calls in %.0f ms%s", turn.turn_id,
                 turn.session_id, st.status, st.iterations, (time.monotonic() - started) * 1000,
                 f": {st.reason}" if st.reason else "")
        return st.status

    # --- the loop ----------------------------------------------------------------------

    async def _loop(self, st: TurnState, watch: LeaseWatch) -> None:
        st.chain = self._chain(st)
        while True:
            if self._begin(st) is Action.BREAK:
                return
            if st.turn.steer_waiting:
                await self._take_steers(st)
            request = await self._assemble(st)
            if request is None:
                return
            outcome = await self._call(st, request, watch, st.halt)
            if outcome is Action.CONTINUE:
                continue  # a fallback: assemble and preflight again for the new provider
            if not isinstance(outcome, ModelCallResult):
                return
            action = self._normalize(st, outcome)
            if action is Action.CONTINUE:
                continue
            if action is Action.BREAK:
                return
            if await self._tool_round(st, outcome, watch) is Action.BREAK:
                return

    def _chain(self, st: TurnState) -> list[ConfiguredProvider]:
        """The providers this turn may call, in order: the session's own (as claimed) or the
        default one, then the fallbacks."""
        return self.providers.chain(self.config.config, self.config.path, st.turn.claim.provider)

    def _begin(self, st: TurnState) -> Action:
        """Begin stage: stop on interrupt or a spent budget, else count the call."""
        if st.halt.is_set():
            return Action.BREAK
        limit = self.config.config.limits.max_iterations
        if st.iterations >= limit:
            st.spend(f"{limit} model calls, limits.max_iterations")
            return Action.BREAK
        st.iterations += 1
        return Action.PROCEED

    async def _take_steers(self, st: TurnState) -> None:
        """Steer stage: the session's queued steers join this turn, before its next model
        call (so after the tool round that just ended).  In one transaction each becomes
        `started` with this turn (settled with it), a user row where the model reads it,
        and a `turn.steered` event; a crash after it leaves them `unknown` with the turn."""
        turn = st.turn
        turn.steer_waiting = False  # a steer admitted from here on sets it again

        def job(tx: Tx) -> int:
            sid, tid = turn.session_id, turn.turn_id
            steers = admissions.queued_steers(tx, sid)
            for row in steers:
                text = admissions.text_of(row)
                admissions.mark_started(tx, row.admission_id, turn.holder.epoch, tid)
                files = attachments.of_admission(tx, row.admission_id)
                messages.insert(tx, sid, "user", text, turn_id=tid,
                                api_content=STEER_FRAME.format(text=text),
                                meta={"steer": True, "admission_id": row.admission_id,
                                      **({"attachments": files} if files else {})})
                wire.emit(tx, sid,
                          TurnSteered(turn_id=tid, admission_id=row.admission_id, text=text),
                          turn_id=tid, admission_id=row.admission_id)
            return len(steers)

        if not await self.db.read(lambda tx: admissions.steer_queued(tx, turn.session_id)):
            return
        taken = await st.fence.write(job)
        if taken:
            log.info("turn %s: %d steer(s) joined it", turn.turn_id, taken)

    async def _assemble(self, st: TurnState, summary_for: str | None = None) -> ChatRequest | None:
        """Assemble and preflight stages, for the provider about to be called.  The first
        provider of the chain (the session's, or the default) answers as the session's model;
        a fallback as its own."""
        link = st.link
        tools = await self._offer(st) if link.cfg.tools else ()
        roomy = link.cfg.context_window >= registry.AGENT_TOOLS_MIN_WINDOW

        async def build() -> ChatRequest:
            return await self._with_files(st, link, await assemble(
                self.db, self.transcripts, st.turn.session_id, link.provider.model, tools,
                summary_for=summary_for, model=None if st.chain_index == 0 else link.cfg.model,
                volatile=(st.volatile or "") if roomy else "", turn_id=st.turn.turn_id,
                fence=st.fence))

        # Preflight compression: measure, compress if due, measure again (a few times at most).
        # A long session is counted in SQL first: one far over its window compresses before a
        # request is ever built from all of it.
        first = 0
        sid = st.turn.session_id
        by_size = self.compressor.due_by_size(
            sid, link, tools, kept=lambda tx: self.transcripts.current(tx, sid))
        if st.volatile is None and roomy:
            # The memory and skills files are read beside the count: one wait for both.
            why, st.volatile = await asyncio.gather(by_size, asyncio.to_thread(
                _volatile, self.executor.data_dir, Path(st.turn.claim.cwd)))
        else:
            why = await by_size
        if why is not None and await self._compress(st, link, tools, why):
            first = 1
        request = await build()
        for tries in range(first, MAX_COMPRESSIONS_PER_CALL):
            why = await self.compressor.due(st.turn.session_id, request, link, tries)
            if why is None or not await self._compress(st, link, tools, why):
                break
            request = await build()
        checked = preflight(request, link.name, link.cfg)
        if checked.request is None:
            st.fail(checked.reason or "the request does not fit the model's window")
        return checked.request

    async def _with_files(self, st: TurnState, link: ConfiguredProvider,
                          request: ChatRequest) -> ChatRequest:
        """The prompts' files rendered for the provider about to be called (a fallback gets
        its own form, and preflight measures what it is sent).  Over the compression
        threshold, old prompts' images and PDFs are left out first (notes name them): they
        cost the most and say the least by now.  A model that cannot see this prompt's
        images gets notes in their place, and people are told once a turn."""
        if st.files is None or not _with_files_in(request):
            return request
        target = Target(link.cfg.kind, sees_images(link.cfg, request.model))
        done = await st.files.render(request, target)
        if done.dropped:
            log.info("turn %s: %d earlier attachment(s) left out to fit the request's size",
                     st.turn.turn_id, done.dropped)
        if self.compressor.over_threshold(done.request, link):
            lighter = await st.files.render(request, target, drop_old=True)
            if lighter.dropped:
                log.info("turn %s: %d earlier attachment(s) left out to save room",
                         st.turn.turn_id, lighter.dropped)
                done = lighter
        if done.unseen and not st.told_unseen:
            st.told_unseen = True
            await self._note(st, f"{link.name}'s model {request.model} cannot see images, so "
                             "it was told only the name and size of each image attached. To "
                             "send images, choose a provider or model that sees them (vision).")
        return done.request

    async def _note(self, st: TurnState, text: str) -> None:
        """A note for people (kind `attachments`) among the turn's rows; the model never
        reads notes."""
        turn = st.turn

        def job(tx: Tx) -> None:
            messages.insert(tx, turn.session_id, "system_note", text, turn_id=turn.turn_id,
                            note_kind="attachments")

        await st.fence.write(job)

    async def _offer(self, st: TurnState) -> tuple[ToolSpec, ...]:
        """The tools for the next request: the built-ins, then each enabled MCP server's, in
        a stable order.  A turn's first request lists the servers' tools afresh (starting
        a server on first need); later ones take the lists as they are now, changed only by
        a server's own list_changed."""
        extra: dict[str, Tool] = {}
        if self.mcp is not None and self.mcp.servers:
            first, st.mcp_listed = not st.mcp_listed, True
            got, found = await unless_stopped(
                self.mcp.tools_for(Path(st.turn.claim.cwd), refresh=first), st.halt)
            extra = found if got and found is not None else {}
        if st.depth is None:
            sid = st.turn.session_id
            st.depth = await self.db.read(lambda tx: sessions.delegation_depth(tx, sid))
        # A sub-agent too deep is not offered `delegate`; a small model neither agent tool.
        builtins = registry.offered(st.depth, st.link.cfg.context_window)
        st.offered = {**builtins, **extra}
        st.specs = registry.specs(builtins) + tuple(ToolSpec(t.name, t.description, t.parameters)
                                                    for t in extra.values())
        return st.specs

    async def _compress(self, st: TurnState, link: ConfiguredProvider, tools: tuple[ToolSpec, ...],
                        why: str) -> bool:
        """Compresses the session for this turn; True when it did (the request is rebuilt)."""
        turn = st.turn
        out = await self.compressor.compress(
            turn.session_id, link, why, tools, where=Where(turn.turn_id, turn.admission_id),
            fence=st.fence)
        st.usage = _add(st.usage, out.usage)  # the turn's cost includes its summaries
        if out.child_session_id is not None:
            # Rotation: the turn goes on in the child session, which holds its lease now.
            turn.rotated(out.child_session_id)
        return out.compressed

    async def _call(
        self, st: TurnState, request: ChatRequest, watch: LeaseWatch, stop: asyncio.Event,
    ) -> ModelCallResult | Action:
        """Call stage: up to MAX_ATTEMPTS attempts on this provider, racing `stop`; then a
        fallback (CONTINUE: back to preflight) or the end of the turn (BREAK)."""
        async def store(text: str) -> None:
            watch.progress()
            await self._store_delta(st, text)

        link = st.link
        for n in range(1, MAX_ATTEMPTS + 1):
            deltas = DeltaWriter(store)
            watch.progress()
            try:
                result = await attempt(link.provider, request, deltas, link.cfg, stop)
            except ProviderError as exc:
                await deltas.close()
                step = await self._recover(st, link, exc, n, deltas.streamed, stop)
                if step is None:
                    continue
                return step
            if result is None:
                await deltas.close()
                await self._stopped_mid_answer(st, deltas.streamed)
                return Action.BREAK
            # A final answer's last text goes with the turn's closing commit (`_finalize`);
            # an answer with tool calls, or none, is stored now, before the tool round.
            final = not result.tool_calls and bool((result.text or deltas.streamed).strip())
            st.unsent += await deltas.close(hand_over=final)
            st.usage = _add(st.usage, result.usage)
            st.ledger.append(LedgerEntry(link.name, request.model, result.usage))
            self.compressor.observe(link.name, request, result.usage)
            if not result.text:
                result.text = deltas.streamed  # the stream is what people saw
            return result
        raise AssertionError("the last attempt always returns")

    async def _recover(
        self, st: TurnState, link: ConfiguredProvider, exc: ProviderError, n: int, streamed: str,
        stop: asyncio.Event,
    ) -> Action | None:
        """After attempt `n` failed: None to retry (after waiting), CONTINUE to fall back
        to the next provider, BREAK when the turn ends here."""
        if streamed:
            # People saw part of an answer: a retry would repeat or contradict it.
            st.text = streamed
            st.fail(f"{told(exc)} The answer broke off after it had started, so it was not "
                    "retried; the part shown is kept.", exc)
            return Action.BREAK
        rules = policy(exc)
        if rules.compress:
            # The provider proved the request too large: compress once and try again; if
            # that cannot help (or already happened), fail closed instead of resending.
            if not st.overflow_compressed:
                st.overflow_compressed = True
                tools = st.specs if link.cfg.tools else ()
                if await self._compress(st, link, tools, f"{link.name} refused the request as too "
                                        f"large ({exc.message})"):
                    return Action.CONTINUE
            st.fail("The conversation is too long for this model, even after compressing it, so "
                    "it was not sent again. Start a new session, or choose a model with a larger "
                    "context window.", exc)
            return Action.BREAK
        if rules.retryable and n < MAX_ATTEMPTS:
            delay = delay_for(exc, n)
            await self._event(st, ProviderRetry(
                attempt=n + 1, delay_s=delay, reason=told(exc), provider=link.name,
                detail=exc.message))
            log.info("turn %s: %s failed (%s); retry %d in %.1f s", st.turn.turn_id, link.name,
                     exc.kind, n + 1, delay)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), delay)
            return Action.BREAK if stop.is_set() else None
        if rules.fallback and st.chain_index + 1 < len(st.chain):
            nxt = st.chain[st.chain_index + 1]
            await self._event(st, ProviderFallback(
                from_=link.name, to=nxt.name, reason=told(exc), detail=exc.message))
            log.warning("turn %s: falling back from %s to %s (%s)", st.turn.turn_id, link.name,
                        nxt.name, exc.kind)
            st.chain_index += 1
            return Action.CONTINUE
        st.fail(told(exc), exc)
        return Action.BREAK

    async def _stopped_mid_answer(self, st: TurnState, streamed: str) -> None:
        if st.interrupted:
            st.text = streamed  # what was streamed of the last message
        elif streamed:
            # Budget spent mid-answer: keep what people saw, then ask for the summary.
            turn = st.turn

            def keep(tx: Tx) -> None:
                messages.insert(tx, turn.session_id, "assistant", streamed,
                                turn_id=turn.turn_id, status="interrupted")

            await st.fence.write(keep)

    def _normalize(self, st: TurnState, result: ModelCallResult) -> Action:
        """Normalize stage: tool calls go to the tool round; text ends the turn; an empty
        answer is retried once."""
        if result.tool_calls:
            return Action.PROCEED
        if result.text.strip():
            st.text = result.text
            return Action.BREAK
        st.empty_answers += 1
        if st.empty_answers >= MAX_EMPTY_ANSWERS:
            st.fail("the model returned an empty answer twice; try again or rephrase")
            return Action.BREAK
        return Action.CONTINUE

    async def _tool_round(self, st: TurnState, result: ModelCallResult, watch: LeaseWatch) -> Action:
        turn, cfg = st.turn, self.config.config
        prepared = prepare(result.tool_calls, st.offered, st.call_ids, turn.turn_id)
        batch_sig = signature(prepared)
        st.same_batches = st.same_batches + 1 if batch_sig == st.last_batch else 1
        st.last_batch = batch_sig
        if st.same_batches >= MAX_IDENTICAL_BATCHES:
            # A loop is a spent budget, not a failure: this batch does not run, and the
            # tool-free summary call tells the person what was done, as for any limit.
            st.spend(f"the same tool calls {MAX_IDENTICAL_BATCHES} times in a row, "
                     "stopped as a loop")
            return Action.BREAK
        st.empty_answers = 0

        def on_person(delta: int) -> None:
            watch.waiting_for_person += delta

        scope = BatchContext(
            session_id=turn.session_id, turn_id=turn.turn_id, admission_id=turn.admission_id,
            cwd=Path(turn.claim.cwd), env=tool_env(self.config), mode=cfg.approvals.mode,
            deadline_s=cfg.limits.tool_batch_deadline_s, spill_chars=cfg.limits.spill_chars,
            stop=st.halt, on_progress=watch.progress, on_person=on_person,
            why=lambda: for_model(turn.reason) if st.interrupted else
            f"the turn reached its limit ({st.budget_why})",
            fence=st.fence, hooks=st.hooks,
        )
        ledger, st.ledger = st.ledger, []
        outcome = await run_round(self.db, self.executor, scope, result.text, prepared,
                                  lambda tx: record_ledger(tx, turn.session_id, ledger))
        failure = outcome.failure or (outcome.batch.failure if outcome.batch else None)
        if failure is not None:
            st.fail(failure)
            return Action.BREAK
        if st.halt.is_set():
            if st.interrupted:  # the last message people saw is the tool-call one
                st.text, st.text_stored = result.text, True
            return Action.BREAK  # a spent budget goes on to the summary call
        return Action.CONTINUE

    async def _summarize(self, st: TurnState, watch: LeaseWatch) -> None:
        """The budget ran out without an answer: one tool-free call asks the model to say
        what it did and why it stopped; failing that, a plain note says so."""
        why = st.budget_why or "a limit"
        fallback = (f"I stopped because this turn reached its limit ({why}) before I finished. "
                    f"I made {st.iterations} model calls; what the tools did is in the transcript "
                    "above. Send a message to continue.")
        result: ModelCallResult | Action | None = None
        try:
            if not st.chain:
                st.chain = self._chain(st)
            request = await self._assemble(st, summary_for=why)
            if request is not None:
                stop = asyncio.Event()
                relay = asyncio.create_task(_relay(st.turn.stop, stop))
                timer = asyncio.get_running_loop().call_later(SUMMARY_TIMEOUT_S, stop.set)
                try:
                    result = await self._call(st, request, watch, stop)
                finally:
                    relay.cancel()
                    timer.cancel()
        except ProviderError as exc:
            log.warning("turn %s: the budget summary call failed: %s", st.turn.turn_id, exc.message)
        if st.interrupted:
            return  # interrupted during the summary: what streamed of it is the text
        st.status, st.reason = "completed", None  # a failed summary call is not the turn's failure
        answered = isinstance(result, ModelCallResult) and result.text.strip()
        st.text = result.text.strip() if isinstance(result, ModelCallResult) and answered else fallback
        st.text_stored = False  # the summary is a new assistant message

    # --- lease and finalize ------------------------------------------------------------------

    async def _wait_lease(self, st: TurnState) -> bool:
        """Waits for another holder's lease; False when the turn ended without it."""
        turn, cfg = st.turn, self.config.config

        async def waiting(lease: LeaseRecord) -> None:
            data = LeaseWaiting(turn_id=turn.turn_id, holder_pid=lease.holder.pid,
                                expires_at=lease.expires_at)
            await self.db.write(lambda tx: wire.emit(
                tx, turn.session_id, data, turn_id=turn.turn_id,
                admission_id=turn.admission_id))

        why = await wait_for_lease(
            self.db, lambda tx: take_session(tx, turn.session_id, turn.holder, cfg.lease.ttl_s,
                                             turn.turn_id, turn.claim.text,
                                             regenerates=turn.claim.regenerates,
                                             admission_id=turn.admission_id),
            wait_s=cfg.lease.wait_s, stop=turn.stop, on_waiting=waiting)
        if why is None:
            return True
        st.status, st.reason = "interrupted", (
            turn.reason if st.interrupted else why
        )
        # Without the lease the transcript is another process's to write: the input stays
        # in the admission's stored payload, and no row is added here.
        await self.db.write_patiently(lambda tx: close_turn(tx, TurnEnd(
            turn.session_id, turn.admission_id, turn.turn_id, st.status, "", Usage(),
            st.reason, transcript=False)), CLOSE_RETRY_S)
        return False

    async def _turn_end(self, st: TurnState) -> None:
        """The turn_end hooks, once its outcome is known; bounded by their own timeouts
        (the stop that ended the turn must not cut them short).  Nothing of theirs may keep
        the turn from closing."""
        assert st.hooks is not None
        try:
            await st.hooks.end(st.status)
        except StoreUnavailable as exc:
            log.warning("turn %s: turn_end hooks: %s", st.turn.turn_id, exc.message)

    async def _finalize(self, st: TurnState) -> None:
        """Closes the turn, retrying a while if the store fails; raises StoreUnavailable if
        it still cannot (the caller then settles the admission `unknown` in place)."""
        turn = st.turn
        outcome = TurnEnd(
            turn.session_id, turn.admission_id, turn.turn_id, st.status, st.text, st.usage,
            st.reason, holder=turn.holder, text_stored=st.text_stored, ledger=st.ledger,
            failure_detail=st.detail, failure_kind=st.failure_kind, unsent=st.unsent,
        )
        await st.fence.write_patiently(lambda tx: close_turn(tx, outcome), CLOSE_RETRY_S)

    async def _event(self, st: TurnState, data: ProviderRetry | ProviderFallback) -> None:
        turn = st.turn

        def job(tx: Tx) -> None:
            wire.emit(tx, turn.session_id, data, turn_id=turn.turn_id,
                      admission_id=turn.admission_id)

        await st.fence.write(job)

    async def _store_delta(self, st: TurnState, text: str) -> None:
        turn = st.turn

        def job(tx: Tx) -> None:
            wire.emit(tx, turn.session_id, TextDelta(text=text),
                      turn_id=turn.turn_id, admission_id=turn.admission_id)

        await st.fence.write(job)


def _with_files_in(request: ChatRequest) -> bool:
    """Whether a message of the request carries files: as its builder counted, else looked
    for (the look goes through every message)."""
    if request.files is not None:
        return request.files
    return any(m.files for m in request.messages)


async def _relay(source: asyncio.Event, target: asyncio.Event) -> None:
    await source.wait()
    target.set()


def _add(a: Usage, b: Usage) -> Usage:
    return Usage(
        input_tokens=a.input_tokens + b.input_tokens, output_tokens=a.output_tokens + b.output_tokens,
        cached_tokens=a.cached_tokens + b.cached_tokens, cost_usd=round(a.cost_usd + b.cost_usd, 8),
        estimated=a.estimated or b.estimated,
    )


def tool_env(config: ConfigFile) -> dict[str, str]:
    """The environment tools run with: an allowlist (plus `[sandbox] env`), never a variable
    that holds a provider key or one of Turnkey's own, so no command can print a key."""
    cfg = config.config
    keys = {p.api_key_env for p in cfg.providers.values() if p.api_key_env}
    return child_env(os.environ, cfg.sandbox.env, keys)


def _volatile(data_dir: Path, cwd: Path) -> str:
    """The block after the frozen prompt: the memory, then the index of the skills enabled in
    the person's folder and the session folder's; "" when both are empty."""
    return "\n\n".join(part for part in (memory.block(data_dir), skills.block(data_dir, cwd)) if part)
