"""One open session as a window sees it: snapshot, live events, queue, approvals, notices.

Qt-free.  A window loads a snapshot (`session.resume`) and then applies the
session's events.  Events can reach it before the snapshot does (the shared
client dispatches them as they arrive, the snapshot's reply resumes a
coroutine later), so until `load` they are buffered, and afterwards anything
at or below the snapshot's `latest_seq` is dropped: each event counts once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from desktop.state.transcript import Listener, Transcript


@dataclass
class Notice:
    """A transient line above the composer: a retry countdown, a fallback, a compression."""

    kind: str
    text: str
    until: float | None = None  # monotonic deadline of a countdown

    def render(self, now: float | None = None) -> str:
        if self.until is None:
            return self.text
        left = max(0.0, self.until - (now if now is not None else time.monotonic()))
        return self.text.replace("{left}", f"{left:.0f}")


@dataclass
class SessionState:
    session_id: str
    transcript: Transcript = field(default_factory=Transcript)
    session: dict[str, Any] = field(default_factory=dict)
    status: str = "idle"
    usage: dict[str, Any] = field(default_factory=dict)
    turn_usage: dict[str, Any] = field(default_factory=dict)
    queue: dict[str, dict[str, Any]] = field(default_factory=dict)  # admission_id -> receipt
    approvals: dict[str, dict[str, Any]] = field(default_factory=dict)  # pending, by approval_id
    notice: Notice | None = None
    mark: int | None = None  # the snapshot's latest_seq, then the highest seq applied
    loaded: bool = False
    prompts: dict[str, str] = field(default_factory=dict)  # admission_id -> text, for turn.started
    on_turn_done: Callable[[str], None] = lambda turn_id: None
    on_change: Callable[[], None] = lambda: None
    _early: list[dict[str, Any]] = field(default_factory=list)

    def bind(self, listener: Listener) -> None:
        self.transcript.listener = listener

    # --- snapshot ----------------------------------------------------------------

    def load(self, resume: dict[str, Any]) -> None:
        """Takes a `session.resume` result as the new truth, then applies buffered later events."""
        self.session = resume["session"]
        self.status = resume.get("status") or self.session.get("status", "idle")
        self.usage = dict(self.session.get("usage") or {})
        self.queue = {r["admission_id"]: r for r in resume.get("queue", [])}
        for r in self.queue.values():
            if r.get("text"):
                self.prompts[r["admission_id"]] = r["text"]
        self.approvals = {a["approval_id"]: a for a in resume.get("pending_approvals", [])}
        self.notice = None
        self.mark = int(resume["latest_seq"])
        self.transcript.load(resume.get("messages", []), bool(resume.get("has_more")),
                             resume.get("active_turn"))
        self.loaded = True
        early, self._early = self._early, []
        for event in early:
            self.apply(event)
        self.on_change()

    def reset(self) -> None:
        """Forget the snapshot (a resync): events buffer again until the next `load`."""
        self.loaded = False
        self.mark = None

    # --- events ------------------------------------------------------------------

    def apply(self, event: dict[str, Any]) -> None:
        if event.get("session_id") != self.session_id:
            return
        kind = event.get("type", "")
        seq = event.get("seq")
        if seq is None:
            # Broadcast copies (approvals for the tray, session summaries for the browser):
            # the stored copies carry the same news in order; only summaries are taken here.
            if kind == "session.updated":
                self._summary(event["data"]["session"])
            return
        if not self.loaded:
            self._early.append(event)
            return
        if self.mark is not None and seq <= self.mark:
            return
        self.mark = seq
        self._apply(kind, event.get("data") or {}, event)
        self.on_change()

    def _apply(self, kind: str, data: dict[str, Any], event: dict[str, Any]) -> None:
        if kind == "admission.queued":
            receipt = data["receipt"]
            if receipt.get("text"):
                self.prompts[receipt["admission_id"]] = receipt["text"]
            if receipt.get("status") == "queued":
                self.queue[receipt["admission_id"]] = receipt
                if self.status == "idle":
                    self.status = "queued"
        elif kind == "turn.started":
            aid = data.get("admission_id") or event.get("admission_id") or ""
            self.queue.pop(aid, None)
            self.status = "running"
            self.notice = None
            self.transcript.apply(event)
            self.transcript.add_user(aid, data.get("turn_id") or event.get("turn_id"),
                                     self.prompts.get(aid, ""))
        elif kind == "admission.settled":
            receipt = data["receipt"]
            self.queue.pop(receipt["admission_id"], None)
            self.prompts.pop(receipt["admission_id"], None)
            # A turn still running (or waiting for a person's approval) keeps its status.
            if not self.queue and self.status not in ("running", "waiting_approval"):
                self.status = "idle"
        elif kind == "approval.request":
            approval = data["approval"]
            self.approvals[approval["approval_id"]] = approval
            self.status = "waiting_approval"
            self.transcript.apply(event)
        elif kind == "approval.resolved":
            approval = data["approval"]
            self.approvals.pop(approval["approval_id"], None)
            if self.status == "waiting_approval" and not self.approvals:
                self.status = "running"
            self.transcript.apply(event)
        elif kind == "provider.retry":
            delay = float(data.get("delay_s") or 0)
            self.notice = Notice("retry", f"Retrying in {{left}} s (attempt {data.get('attempt')}): "
                                 f"{data.get('reason', '')}", time.monotonic() + delay)
        elif kind == "provider.fallback":
            self.notice = Notice("fallback", f"Switched from {data.get('from')} to {data.get('to')}: "
                                 f"{data.get('reason', '')}")
        elif kind == "compression.start":
            self.notice = Notice("compression",
                                 f"Compressing the context ({data.get('tokens', '?')} tokens)…")
        elif kind == "compression.complete":
            self.notice = Notice("compression", f"Context compressed: {data.get('before_tokens')} → "
                                 f"{data.get('after_tokens')} tokens")
        elif kind == "lease.waiting":
            self.notice = Notice("lease", "Waiting: another Turnkey process is running this session")
        elif kind == "usage.update":
            self.usage = dict(data.get("usage") or {})
        elif kind == "session.updated":
            self._summary(data["session"])
        elif kind == "message.complete":
            self.turn_usage = dict(data.get("usage") or {})
            if self.notice is not None and self.notice.kind in ("retry", "lease"):
                self.notice = None
            if data.get("status") == "failed" and data.get("failure_reason"):
                self.notice = Notice("failed", f"The turn failed: {data['failure_reason']}")
            self.status = "queued" if self.queue else "idle"
            done = self.transcript.apply(event)
            if done:
                self.on_turn_done(done)
        else:
            self.transcript.apply(event)

    def _summary(self, session: dict[str, Any]) -> None:
        self.session = {**self.session, **session}
        self.status = session.get("status", self.status)
        if session.get("usage"):
            self.usage = dict(session["usage"])
        self.on_change()

    # --- views -------------------------------------------------------------------

    @property
    def title(self) -> str:
        return str(self.session.get("title") or "New session")

    @property
    def busy(self) -> bool:
        return self.status in ("running", "waiting_approval", "queued")

    def usage_line(self) -> str:
        u = self.usage
        if not u:
            return ""
        est = "~" if u.get("estimated") else ""
        cost = float(u.get("cost_usd") or 0)
        return (f"{est}{int(u.get('input_tokens') or 0):,} in · {int(u.get('output_tokens') or 0):,} out"
                f" · {int(u.get('cached_tokens') or 0):,} cached · ${cost:.4f}")
