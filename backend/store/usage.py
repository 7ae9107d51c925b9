"""The usage table: tokens and cost per (session, provider, model, task), and session totals."""

from __future__ import annotations

from backend.store import sessions
from backend.store.db import Tx
from backend.store.records import Record
from shared.literals import UsageTask


class UsageRecord(Record, frozen=True):
    """A usage row: one (session, provider, model, task)'s calls and their summed counters."""

    provider: str
    model: str
    task: UsageTask
    calls: int
    input_tokens: int
    output_tokens: int
    cached_tokens: int
    cost_usd: float
    estimated: bool


def record(tx: Tx, session_id: str, provider: str, model: str, task: str,
           usage: sessions.Counts) -> None:
    """Adds one call's usage to its ledger row and to the session's totals."""
    tx.execute(
        "INSERT INTO usage (session_id, provider, model, task, calls, input_tokens, "
        "output_tokens, cached_tokens, cost_usd, estimated) VALUES (?, ?, ?, ?, 1, ?, ?, ?, ?, ?) "
        "ON CONFLICT (session_id, provider, model, task) DO UPDATE SET calls = usage.calls + 1, "
        "input_tokens = usage.input_tokens + excluded.input_tokens, "
        "output_tokens = usage.output_tokens + excluded.output_tokens, "
        "cached_tokens = usage.cached_tokens + excluded.cached_tokens, "
        "cost_usd = usage.cost_usd + excluded.cost_usd, "
        "estimated = CASE WHEN excluded.estimated > usage.estimated THEN excluded.estimated "
        "ELSE usage.estimated END",
        (session_id, provider, model, task, usage.input_tokens, usage.output_tokens,
         usage.cached_tokens, usage.cost_usd, int(usage.estimated)),
    )
    sessions.add_usage(tx, session_id, usage)


def rows(tx: Tx, session_id: str) -> list[UsageRecord]:
    return UsageRecord.from_rows(tx.all(
        "SELECT * FROM usage WHERE session_id = ? ORDER BY task, provider, model", (session_id,)
    ))
