"""The usage table: tokens and cost per (session, provider, model, task), and session totals."""

from __future__ import annotations

from backend.store import sessions
from backend.store.db import Tx
from shared.protocol import Usage, UsageRow


def record(tx: Tx, session_id: str, provider: str, model: str, task: str, usage: Usage) -> None:
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


def rows(tx: Tx, session_id: str) -> list[UsageRow]:
    return [
        UsageRow(
            provider=r["provider"], model=r["model"], task=r["task"], calls=r["calls"],
            input_tokens=r["input_tokens"], output_tokens=r["output_tokens"],
            cached_tokens=r["cached_tokens"], cost_usd=round(r["cost_usd"], 8),
            estimated=bool(r["estimated"]),
        )
        for r in tx.all(
            "SELECT * FROM usage WHERE session_id = ? ORDER BY task, provider, model", (session_id,)
        )
    ]
