"""One open session as a window sees it: snapshot, live events, queue, approvals, questions,
notices.

Qt-free.  A window loads a snapshot (`session.resume`) and then applies the
session's events.  Events can reach it before the snapshot does (the shared
client dispatches them as they arrive, the snapshot's reply resumes a
coroutine later), so until `load` they are buffered, and afterwards anything
at or below the snapshot's `latest_seq` is dropped: each event counts once.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from desktop.state.questions import WAITING, Pending
from desktop.state.transcript import Listener, Transcript
from shared import protocol as p
from shared.client import Incoming


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
    session: p.Session | None = None
    status: p.SessionStatus = "idle"
    usage: p.Usage | None = None
    turn_usage: p.Usage | None = None
    queue: dict[str, p.Receipt] = field(default_factory=dict)  # by admission_id
    approvals: dict[str, p.Approval] = field(default_factory=dict)  # pending, by approval_id
    questions: Pending = field(default_factory=Pending)  # the model's questions waiting
    notice: Notice | None = None
    mark: int | None = None  # the snapshot's latest_seq, then the highest seq applied
    loaded: bool = False
    prompts: dict[str, str] = field(default_factory=dict)  # admission_id -> text, for turn.started
    # admission_id -> the files sent with it (its receipt's), for turn.started too
    files: dict[str, list[p.MessageAttachment]] = field(default_factory=dict)
    gone: set[str] = field(default_factory=set)  # admissions seen started or settled: never queued again
    on_turn_done: Callable[[str], None] = lambda turn_id: None
    on_change: Callable[[], None] = lambda: None
    _early: list[Incoming] = field(default_factory=list)
    # The streaming answer (key, text) when the last usage.update came: its text was counted.
    _counted: tuple[str, str] = ("", "")

    def bind(self, listener: Listener) -> None:
        self.transcript.listener = listener

    # --- snapshot ----------------------------------------------------------------

    def load(self, resume: p.ResumeResult) -> None:
        """Takes a `session.resume` result as the new truth, then applies buffered later events."""
        self.session = resume.session
        self.status = resume.status
        self.usage = resume.session.usage
        self.queue = {r.admission_id: r for r in resume.queue}
        for r in self.queue.values():
            self._remember(r)
        self.approvals = {a.approval_id: a for a in resume.pending_approvals}
        self.questions.load(resume.pending_questions)
        self.notice = None
        self.mark = resume.latest_seq
        self.transcript.load(resume.messages, resume.has_more, resume.active_turn,
                             frozenset(a.call_id for a in resume.pending_approvals),
                             frozenset(q.call_id for q in resume.pending_questions))
        self.loaded = True
        early, self._early = self._early, []
        for event in early:
            self.apply(event)
        self.on_change()

    def submitted(self, receipt: p.Receipt, text: str,
                  files: Sequence[p.MessageAttachment] = ()) -> None:
        """This window's own prompt was admitted (with `files`, as the receipt names them when
        it does).  The receipt can arrive after the events of its turn (they come on the same
        connection, but the reply resumes a coroutine later), so a prompt whose turn already
        started or settled is not put back in the queue."""
        self.prompts.setdefault(receipt.admission_id, text)
        sent = list(receipt.attachments or files)
        if sent and receipt.admission_id not in self.gone:
            self.files.setdefault(receipt.admission_id, sent)
        if receipt.status == "queued" and self.busy and receipt.admission_id not in self.gone:
            self.queue.setdefault(receipt.admission_id, receipt)
            self.on_change()

    def reset(self) -> None:
        """Forget the snapshot (a resync): events buffer again until the next `load`."""
        self.loaded = False
        self.mark = None

    # --- events ------------------------------------------------------------------

    def apply(self, event: Incoming) -> None:
        if event.session_id != self.session_id:
            return
        if event.seq is None:
            # Broadcast copies (approvals for the tray, session summaries for the browser):
            # the stored copies carry the same news in order; only summaries are taken here.
            if isinstance(event.data, p.SessionUpdated):
                self._summary(event.data.session)
            return
        if not self.loaded:
            self._early.append(event)
            return
        if self.mark is not None and event.seq <= self.mark:
            return
        self.mark = event.seq
        self._apply(event)
        self.on_change()

    def _apply(self, event: Incoming) -> None:
        data = event.data
        if isinstance(data, p.AdmissionQueued):
            receipt = data.receipt
            self._remember(receipt)
            if receipt.status == "queued":
                self.queue[receipt.admission_id] = receipt
                if self.status == "idle":
                    self.status = "queued"
        elif isinstance(data, p.TurnStarted):
            aid = data.admission_id
            self.gone.add(aid)
            self.queue.pop(aid, None)
            self.status = "running"
            self.notice = None
            self.transcript.apply(event)
            if data.regenerates is None:  # (a regeneration answers its prompt again: no row)
                self.transcript.add_user(aid, data.turn_id, self.prompts.get(aid, ""),
                                         attachments=self.files.pop(aid, []))
        elif isinstance(data, p.TurnSteered):
            # A steer joined the running turn: it leaves the queue, and its words show where
            # the model read them (the stored row replaces this when the turn reconciles).
            self.gone.add(data.admission_id)
            self.queue.pop(data.admission_id, None)
            self.transcript.add_user(data.admission_id, data.turn_id, data.text, steer=True,
                                     attachments=self.files.pop(data.admission_id, []))
        elif isinstance(data, p.AdmissionSettled):
            receipt = data.receipt
            self.gone.add(receipt.admission_id)
            self.queue.pop(receipt.admission_id, None)
            self.prompts.pop(receipt.admission_id, None)
            self.files.pop(receipt.admission_id, None)
            # A turn still running (or waiting for a person's approval or answer) keeps its status.
            if not self.queue and self.status != "running" and self.status not in WAITING:
                self.status = "idle"
        elif isinstance(data, p.ApprovalRequested):
            self.approvals[data.approval.approval_id] = data.approval
            self.status = "waiting_approval"
            self.transcript.apply(event)
        elif isinstance(data, p.ApprovalResolved):
            self.approvals.pop(data.approval.approval_id, None)
            if self.status == "waiting_approval" and not self.approvals:
                self.status = "waiting_answer" if self.questions.waiting else "running"
            self.transcript.apply(event)
        elif isinstance(data, p.QuestionEvent):
            self._question(event, data)
        elif isinstance(data, p.ProviderRetry):
            self.notice = Notice("retry", f"Retrying in {{left}} s (attempt {data.attempt}): "
                                 f"{data.reason}", time.monotonic() + data.delay_s)
        elif isinstance(data, p.ProviderFallback):
            self.notice = Notice("fallback", f"Switched from {data.from_} to {data.to}: {data.reason}")
        elif isinstance(data, p.CompressionStart):
            self.notice = Notice("compression", f"Compressing the context ({data.tokens} tokens)…")
        elif isinstance(data, p.CompressionComplete):
            self.notice = Notice("compression", f"Context compressed: {data.before_tokens} → "
                                 f"{data.after_tokens} tokens")
        elif isinstance(data, p.LeaseWaiting):
            self.notice = Notice("lease", "Waiting: another Turnkey process is running this session")
        elif isinstance(data, p.UsageUpdate):
            self.usage = data.usage
            self._counted = self.transcript.streaming()  # that model call's text is in it now
        elif isinstance(data, p.SessionUpdated):
            self._summary(data.session)
        elif isinstance(data, p.MessageComplete):
            self.turn_usage = data.usage
            if self.notice is not None and self.notice.kind in ("retry", "lease"):
                self.notice = None
            # A failure is not repeated in a notice: the turn's closing note in the transcript
            # says it once (with its detail a click away), next to the Retry it offers.
            self.status = "queued" if self.queue else "idle"
            done = self.transcript.apply(event)
            if done:
                self.on_turn_done(done)
        else:
            self.transcript.apply(event)

    def _question(self, event: Incoming, data: p.QuestionEvent) -> None:
        """A question asked or closed: the status says whether the turn waits for the person
        (a question whose turn had ended waits too, but its session is not running)."""
        self.questions.apply(data)
        if self.questions.waiting and data.question.status == "pending" and self.status == "running":
            self.status = "waiting_answer"
        elif self.status == "waiting_answer" and not self.questions.waiting:
            self.status = "waiting_approval" if self.approvals else "running"
        self.transcript.apply(event)

    def _remember(self, receipt: p.Receipt) -> None:
        """A queued prompt's words and files, for the row its turn shows when it starts."""
        if receipt.text:
            self.prompts[receipt.admission_id] = receipt.text
        if receipt.attachments:
            self.files[receipt.admission_id] = list(receipt.attachments)

    def _summary(self, session: p.Session) -> None:
        self.session = session
        self.status = session.status
        self.usage = session.usage
        self.on_change()

    # --- views -------------------------------------------------------------------

    @property
    def title(self) -> str:
        """"" until the first page has loaded: a saved session opening at start-up must not
        say "New session" for a moment."""
        if self.session is None and not self.loaded:
            return ""
        return (self.session.title if self.session else "") or "New session"

    @property
    def busy(self) -> bool:
        return self.status in ("running", "queued") or self.status in WAITING

    def usage_line(self) -> str:
        """The session's tokens and cost; while an answer streams, its words so far are
        counted in as an estimate (`~`, about four characters a token) until the provider's
        count for that model call arrives (usage.update): the line moves as the text does,
        instead of standing at its old numbers for the whole of a first answer."""
        u = self.usage
        if u is None:
            return ""
        key, text = self.transcript.streaming()
        counted_key, counted = self._counted
        uncounted = len(text) - (len(counted) if key == counted_key else 0)
        live = (uncounted + 3) // 4 if self.busy and uncounted > 0 else 0
        est = "~" if u.estimated or live else ""
        return (f"{est}{u.input_tokens:,} in · {u.output_tokens + live:,} out"
                f" · {u.cached_tokens:,} cached · ${u.cost_usd:.4f}")
