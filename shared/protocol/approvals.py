"""Approvals and the rules that answer them: objects, params, results, approval.* events."""

from __future__ import annotations

from shared.literals import ApprovalStatus, DecidedBy, Decision
from shared.protocol.base import EventData, EventSpec, Id, Params, Wire


class Approval(Wire):
    approval_id: str
    session_id: str
    turn_id: str
    call_id: str
    tool: str
    summary: str
    reason: str
    status: ApprovalStatus
    created_at: str
    expires_at: str
    decision: Decision | None = None
    decided_at: str | None = None  # addition: when it stopped being pending
    decided_by: DecidedBy | None = None  # addition: who closed it (absent while pending)


class Rule(Wire):
    rule_id: str
    tool: str
    pattern: str
    created_at: str


class ApprovalListParams(Params):
    session_id: Id | None = None


class ApprovalRespondParams(Params):
    approval_id: Id
    decision: Decision


class RuleDeleteParams(Params):
    rule_id: Id


class ApprovalsResult(Wire):
    approvals: list[Approval]


class ApprovalResult(Wire):
    approval: Approval


class RulesResult(Wire):
    rules: list[Rule]


class ApprovalEvent(EventData):
    approval: Approval


class ApprovalRequested(ApprovalEvent):
    """`approval.request`: a tool call waits for a person's decision."""


class ApprovalResolved(ApprovalEvent):
    """`approval.resolved`: the approval was decided, expired or cancelled."""


APPROVAL_EVENTS = (
    EventSpec("approval.request", ApprovalRequested, "`approval`"),
    EventSpec("approval.resolved", ApprovalResolved, "`approval`"),
)
