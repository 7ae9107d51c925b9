"""Runs one claimed turn through its stages: prepare context, call the model, finalize.

The admission is already `started` and the user's message is already in the
transcript when a turn reaches this module (the claim wrote both in one
transaction).  Whatever happens here — success, provider failure, interrupt,
timeout, a store that cannot write — the turn ends through `close_turn`, so
no admission is left `started` by a live process.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field

from backend.config import ConfigFile, ProviderConfig
from backend.errors import ProviderError, StoreUnavailable
from backend.providers.base import ChatProvider, ChatRequest
from backend.providers.registry import Providers
from backend.store import events, messages, sessions
from backend.store.db import Database, Tx
from backend.turn.call import CallResult, call_model
from backend.turn.context import build_system_prompt, wire_messages
from backend.turn.finalize import TurnOutcome, close_turn
from backend.turn.stream import DeltaWriter
from shared.protocol import TurnStatus, Usage

log = logging.getLogger("turn")


@dataclass(frozen=True)
class Claim:
    """A turn the drainer has claimed: its admission is `started`, its user row stored."""

    session_id: str
    admission_id: str
    turn_id: str
    text: str


@dataclass
class Interrupt:
    """Set by turn.interrupt or shutdown; the reason becomes the turn's closing note."""

    event: asyncio.Event = field(default_factory=asyncio.Event)
    reason: str = "Interrupted by the user."

    def set(self, reason: str) -> None:
        if not self.event.is_set():
            self.reason = reason
            self.event.set()


class TurnRunner:
    def __init__(self, db: Database, config: ConfigFile, providers: Providers) -> None:
        self.db = db
        self.config = config
        self.providers = providers

    async def run(self, claim: Claim, interrupt: Interrupt) -> TurnStatus:
        started = time.monotonic()
        deltas = DeltaWriter(lambda text: self._store_delta(claim, text))
        status: TurnStatus = "completed"
        reason: str | None = None
        result = CallResult("", Usage(), None)
        try:
            provider, prices = self.providers.primary(self.config.config, self.config.path)
            request = await self._prepare(claim, provider)
            status, reason, result = await self._call(provider, request, deltas, prices, interrupt)
        except ProviderError as exc:
            status, reason = "failed", exc.message
        except StoreUnavailable as exc:
            status, reason = "failed", exc.message
        try:
            await deltas.close()
        except StoreUnavailable as exc:
            status, reason = "failed", exc.message
        # What the user saw streamed is the answer when the call itself gave none.
        text = result.text or deltas.streamed
        if status == "completed" and not text.strip():
            status, reason = "failed", "the model returned an empty answer; try again or rephrase"
        outcome = TurnOutcome(
            claim.session_id, claim.admission_id, claim.turn_id, status, text, result.usage, reason
        )
        await self.db.write(lambda tx: close_turn(tx, outcome))
        log.info(
            "turn %s session %s %s in %.0f ms (%d chars)%s",
            claim.turn_id, claim.session_id, status, (time.monotonic() - started) * 1000,
            len(text), f": {reason}" if reason else "",
        )
        return status

    def default_model(self) -> str:
        chosen = self.config.config.provider()
        return chosen[1].model if chosen else ""

    async def _prepare(self, claim: Claim, provider: ChatProvider) -> ChatRequest:
        """Context stage: the frozen system prompt (built and stored once) and the wire copy."""
        sid = claim.session_id
        row, history = await self.db.read(
            lambda tx: (sessions.row(tx, sid), messages.for_model(tx, sid))
        )
        assert row is not None, "a claimed turn's session exists (deletion interrupts it first)"
        model = row["model"] or provider.model
        prompt = row["system_prompt"]
        if prompt is None:
            built = build_system_prompt(row["cwd"], model)
            # Stored before the first model call; every later turn replays these bytes.
            prompt = await self.db.write(
                lambda tx: sessions.store_system_prompt(tx, claim.session_id, built)
            )
        return ChatRequest(model=model, messages=wire_messages(prompt, history))

    async def _call(
        self, provider: ChatProvider, request: ChatRequest, deltas: DeltaWriter,
        prices: ProviderConfig, interrupt: Interrupt,
    ) -> tuple[TurnStatus, str | None, CallResult]:
        """Call stage: the model call races the interrupt and the turn's time budget."""
        budget = self.config.config.limits.turn_timeout_s
        call = asyncio.create_task(call_model(provider, request, deltas, prices))
        stop = asyncio.create_task(interrupt.event.wait())
        try:
            done, _ = await asyncio.wait({call, stop}, timeout=budget,
                                         return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
        if call in done:
            return "completed", None, call.result()
        call.cancel()
        try:
            await call
        except (asyncio.CancelledError, ProviderError):
            pass
        if stop in done:
            return "interrupted", interrupt.reason, CallResult("", Usage(), None)
        return "failed", f"the turn ran past limits.turn_timeout_s ({budget} s)", CallResult(
            "", Usage(), None
        )

    async def _store_delta(self, claim: Claim, text: str) -> None:
        def job(tx: Tx) -> None:
            events.append(tx, claim.session_id, "message.delta", {"text": text},
                          turn_id=claim.turn_id, admission_id=claim.admission_id)

        await self.db.write(job)
