"""A conversation's shelves under the transcript: a card for each approval and each question
of the model's waiting (answered from it) and a row for each message queued (cancelled from
it), each shelf bounded to a share of the conversation's height.  The cards and rows
themselves are `shelves.py`'s and `question_card.py`'s."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from PySide6.QtCore import QObject, Qt, QTimer, Signal
from PySide6.QtWidgets import QPlainTextEdit, QWidget

from desktop.qt.aio import spawn
from desktop.qt.compat import emit
from desktop.qt.question_card import QuestionCard
from desktop.qt.shelves import ApprovalCard, QueuePanel, QueueRow, Shelf, change_preview
from desktop.state.session import SessionState
from desktop.state.transcript import ToolItem
from shared import protocol as p
from shared.client import ApprovalClosed, RpcError
from shared.errors import ErrorCode
from shared.methods import AdmissionCancel, ApprovalRespond, ClarifyRespond

if TYPE_CHECKING:
    from desktop.link import Link

# The approval cards under the transcript take at most this share of the conversation's height
# (they scroll beyond), and the queue, opened, a few rows: the transcript keeps half or more.
APPROVALS_SHARE = 0.2
QUEUE_SHARE = 0.15
QUEUE_ROWS_SHOWN = 3.5


class Host(Protocol):
    """What the shelves need of their conversation (`Conversation`)."""

    link: Link
    state: SessionState

    @property
    def composer(self) -> QPlainTextEdit: ...

    def height(self) -> int: ...


class ConversationShelves(QObject):
    """`error`: a call failed; `settled`: an approval or a queued message went (refresh)."""

    error = Signal(str)
    note = Signal(str)  # a passing note under the transcript, not an error
    settled = Signal()

    def __init__(self, host: Host, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.host = host
        self.cards: dict[str, ApprovalCard] = {}
        self.questions: dict[str, QuestionCard] = {}  # on the approvals' shelf, after them
        self.queue_rows: dict[str, QueueRow] = {}
        self.approvals_shelf = Shelf("approvalsShelf")
        self.queue_panel = QueuePanel()
        self.queue_panel.toggled.connect(lambda _on: self.bound())
        self._focus_card: str | None = None  # an approval to focus once its card is shown
        self._bound_timer = QTimer(self, singleShot=True, interval=0)
        self._bound_timer.timeout.connect(self.bound)

    def _failed(self, message: str) -> None:
        emit(self.error, message)

    def refresh(self) -> None:
        """The cards and rows for the session's approvals and queue as they are now."""
        self._refresh_cards()
        self._refresh_questions()
        self._refresh_queue()
        self.bound()

    def _refresh_cards(self) -> None:
        approvals = self.host.state.approvals
        for aid in [a for a in self.cards if a not in approvals]:
            card = self.cards.pop(aid)
            self._let_go(card)
            self.approvals_shelf.remove(card)
            card.deleteLater()
        for aid, approval in approvals.items():
            if aid not in self.cards:
                card = ApprovalCard(approval, self.answer, self._preview(approval))
                card.reflowed.connect(self._bound_timer.start)
                self.cards[aid] = card
                self.approvals_shelf.add(card)
                if aid == self._focus_card:  # (once it is laid out)
                    QTimer.singleShot(0, self, lambda a=aid: self.focus_approval(a))

    def _refresh_questions(self) -> None:
        """A card for each question waiting; a question that closed (answered here or
        elsewhere, expired, withdrawn) takes its card away: its tool card in the transcript
        keeps the answer."""
        waiting = self.host.state.questions.waiting
        for qid in [q for q in self.questions if q not in waiting]:
            card = self.questions.pop(qid)
            self._let_go(card)
            self.approvals_shelf.remove(card)
            card.deleteLater()
        for qid, question in waiting.items():
            if qid not in self.questions:
                card = QuestionCard(question, self.reply)
                card.reflowed.connect(self._bound_timer.start)
                self.questions[qid] = card
                self.approvals_shelf.add(card)
                if qid == self._focus_card:
                    QTimer.singleShot(0, self, lambda q=qid: self.focus_approval(q))

    def reply(self, question_id: str, choice: int | None, text: str | None) -> None:
        """Answers a question (a choice picked, or words sent) with `clarify.respond`; the
        card goes when its `clarify.resolved` arrives.  Answered otherwise first (-32014), the
        card says so."""
        card = self.questions.get(question_id)
        if card is not None:
            self._let_go(card)  # (its controls are disabled now, the card goes soon)
            card.busy(True)

        async def go() -> None:
            try:
                await self.host.link.call(ClarifyRespond(question_id=question_id, choice=choice,
                                                         answer=text))
            except Exception as exc:
                shown = self.questions.get(question_id)  # (gone if it closed meanwhile)
                if isinstance(exc, RpcError) and exc.code == ErrorCode.QUESTION_CLOSED:
                    if shown is not None:
                        shown.closed_elsewhere()
                    return
                if shown is not None:
                    shown.busy(False)
                raise

        spawn(go(), self._failed)

    def _refresh_queue(self) -> None:
        s = self.host.state
        for adm in [a for a in self.queue_rows if a not in s.queue]:
            row = self.queue_rows.pop(adm)
            self._let_go(row)
            self.queue_panel.remove(row)
            row.deleteLater()
        for adm, receipt in s.queue.items():
            if adm not in self.queue_rows:
                row = QueueRow(receipt, receipt.text or s.prompts.get(adm, ""), self.cancel)
                self.queue_rows[adm] = row
                self.queue_panel.add(row)

    def _preview(self, approval: p.Approval) -> tuple[str, str] | None:
        transcript = self.host.state.transcript
        row = transcript.find(f"call:{approval.call_id}")
        item = transcript.items[row] if row is not None else None
        if not isinstance(item, ToolItem):
            return None
        return change_preview(item.name or approval.tool, item.arguments)

    def tick(self) -> None:
        for card in self.cards.values():
            card.tick()

    def answer(self, approval_id: str, decision: p.Decision) -> None:
        card = self.cards.get(approval_id)
        if card is not None:
            self._let_go(card)  # (its buttons are disabled now, the card goes soon)
            card.busy(True)

        async def go() -> None:
            try:
                await self.host.link.call(ApprovalRespond(approval_id=approval_id, decision=decision))
            except Exception as exc:
                if isinstance(exc, ApprovalClosed):
                    self.host.state.approvals.pop(approval_id, None)  # answered elsewhere, or expired
                    emit(self.settled)
                    return
                if card is not None:
                    card.busy(False)
                raise

        spawn(go(), self._failed)

    def cancel(self, admission_id: str) -> None:
        async def go() -> None:
            try:
                await self.host.link.call(AdmissionCancel(admission_id=admission_id))
            except RpcError as exc:
                if exc.code != ErrorCode.ADMISSION_STATE:
                    raise
                # It left the queue meanwhile (its turn started, or it was cancelled
                # elsewhere): the row goes; the session's events show what became of it.
                emit(self.note, "Too late to cancel: that message had already left the queue.")
            self.host.state.queue.pop(admission_id, None)
            emit(self.settled)

        spawn(go(), self._failed)

    def focus_first_approval(self) -> None:
        """Ctrl+Shift+A: the focus on the first waiting approval's Allow once."""
        first = next(iter(self.cards), None) or next(iter(self.questions), None)
        if first is not None:
            self.focus_approval(first)

    def focus_approval(self, approval_id: str) -> None:
        """Puts the focus on the approval's Allow once (a question's first choice or its text
        field), scrolled into view (a notification was clicked): now, or when its card is
        shown (the session may still be loading)."""
        card = self.cards.get(approval_id)
        asked = self.questions.get(approval_id)
        if card is None and asked is None:
            self._focus_card = approval_id
            return
        self._focus_card = None
        shown: QWidget | None = card
        if card is not None:
            card.buttons["once"].setFocus(Qt.FocusReason.OtherFocusReason)
        elif asked is not None:
            control = asked.first_control()
            (control or asked).setFocus(Qt.FocusReason.OtherFocusReason)
            shown = asked
        if shown is not None:
            self.approvals_shelf.ensureWidgetVisible(shown, 0, 0)

    def bound(self) -> None:
        """The approvals take at most APPROVALS_SHARE of the height (or the first card's least
        height: its preview gives way first), the opened queue at most QUEUE_SHARE or a few
        rows: both scroll beyond, and the transcript keeps the rest."""
        height = self.host.height()
        limit = int(height * APPROVALS_SHARE)
        first = next(iter(self.cards.values()), None)
        if first is not None:  # (its answers are never scrolled out of view)
            limit = max(limit, first.least_height())
        asked = next(iter(self.questions.values()), None)
        if first is None and asked is not None:  # (nor a question's choices and field)
            limit = max(limit, asked.sizeHint().height())
        self.approvals_shelf.bound(limit)
        for card in self.cards.values():
            card.fit(self.approvals_shelf.maximumHeight())
        rows = int(self.queue_panel.row_height() * QUEUE_ROWS_SHOWN)
        self.queue_panel.shelf.bound(min(rows, int(height * QUEUE_SHARE)))

    def _let_go(self, going: QWidget) -> None:
        """A card or a queued row that goes (answered, cancelled, started): the focus it holds
        goes to the message box, so the person types on; left to Qt, it would move along the
        window's focus chain to its first control (the sidebar's New session button)."""
        focused = going.window().focusWidget()
        if focused is not None and going.isAncestorOf(focused):
            self.host.composer.setFocus(Qt.FocusReason.OtherFocusReason)
