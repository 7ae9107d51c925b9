"""The closed sets of words (and the one bound) that both the wire and the store speak.

`shared.protocol` re-exports each name, so clients read them there; the store imports
them from here, because the store never imports `shared.protocol` (docs/ARCHITECTURE.md,
"Module map and the import rule"): a status or a scope is a column's value before it is a
field of a wire struct.
"""

from __future__ import annotations

from typing import Literal

Scope = Literal["read", "submit", "approve", "admin"]
ALL_SCOPES: tuple[Scope, ...] = ("read", "submit", "approve", "admin")

SessionStatus = Literal["idle", "queued", "running", "waiting_approval", "waiting_answer", "unknown"]
AdmissionStatus = Literal["queued", "started", "unknown", "terminal"]
AdmissionOutcome = Literal["completed", "failed", "interrupted", "cancelled", "rejected"]
Role = Literal["user", "assistant", "tool", "system_note"]

ApprovalStatus = Literal["pending", "allowed", "denied", "expired"]
Decision = Literal["once", "session", "always", "deny"]
# Who closed an approval: a person's answer; nobody within approvals.timeout_s; or nobody,
# because its turn stopped (interrupted, or the backend restarted) before the time ran out.
DecidedBy = Literal["user", "timeout", "stopped"]
# A `clarify` question: waiting; answered by a person; nobody answered within
# clarify.timeout_s; or withdrawn (its turn was interrupted before an answer was needed).
QuestionStatus = Literal["pending", "answered", "expired", "cancelled"]

UsageTask = Literal["turn", "compression", "title", "review"]  # what a cost ledger row paid for
MissedPolicy = Literal["run_once", "skip"]  # a schedule's firings missed while no backend ran
# A backend on a shared store: beating its heartbeat; silent for longer than
# `lease.dead_after_s` but not yet declared dead; declared dead by a peer; stopped cleanly.
BackendState = Literal["live", "silent", "dead", "stopped"]

SNIPPET_MAX = 160  # characters of a SearchMatch.snippet, the `…` included
