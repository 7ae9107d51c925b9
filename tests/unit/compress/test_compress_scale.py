"""A 1M-token transcript: pruning, planning and summarizing stay correct (run with -s for the timings).

Only correctness is asserted; tests/bench owns the numbers.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import TypeVar

import pytest

from backend.compress.model import Call, Entry
from backend.compress.plan import TAIL_SOFT_CEILING, assemble, plan
from backend.compress.prune import prune
from backend.compress.summary import fallback_summary, summary_messages
from backend.compress.tokens import entry_tokens, request_tokens, tail_budget

T = TypeVar("T")
WINDOW = 1_000_000


def many_small(groups: int) -> list[Entry]:
    """Short turns: a user line, a call with small arguments, its result, an answer."""
    out: list[Entry] = []
    for g in range(groups):
        n = 4 * g
        args = json.dumps({"command": f"ls dir{g}"})
        out += [
            Entry(n + 1, "user", f"step {g}"),
            Entry(n + 2, "assistant", "", calls=(Call(f"c{g}", "terminal", args),)),
            Entry(n + 3, "tool", f"file{g}.txt", call_id=f"c{g}", name="terminal"),
            Entry(n + 4, "assistant", "done"),
        ]
    return out


def few_large(groups: int) -> list[Entry]:
    """Heavy turns: a long request, a file written whole, a long tool output, an answer."""
    out: list[Entry] = []
    for g in range(groups):
        n = 4 * g
        args = json.dumps({"path": f"src/mod{g % 50}.py", "content": "x = 1\n" * 200})
        out += [
            Entry(n + 1, "user", f"request {g} " + "please " * 60),
            Entry(n + 2, "assistant", "Writing it.", calls=(Call(f"c{g}", "write_file", args),)),
            Entry(n + 3, "tool", "ok\n" * 350, call_id=f"c{g}", name="write_file"),
            Entry(n + 4, "assistant", "Done: " + "explained " * 20),
        ]
    return out


def timed(label: str, fn: Callable[[], T]) -> T:
    start = time.perf_counter()
    value = fn()
    print(f"  {label}: {(time.perf_counter() - start) * 1000:.1f} ms")
    return value


@pytest.mark.parametrize(
    ("build", "groups", "low", "high"),
    [
        (many_small, 31_250, 900_000, 1_300_000),
        (many_small, 62_500, 1_800_000, 2_300_000),  # the entry count doubled: 250k entries
        (few_large, 1_500, 900_000, 1_300_000),
    ],
    ids=["125k-small-entries", "250k-small-entries", "6k-large-entries"],
)
def test_a_million_token_transcript(
    build: Callable[[int], list[Entry]], groups: int, low: int, high: int
) -> None:
    entries = [Entry(0, "summary", "an earlier summary"), *build(groups)]
    total = request_tokens("", entries)
    print(f"\n{build.__name__}: {len(entries):,} entries, ~{total:,} tokens")
    assert low <= total <= high
    budget = tail_budget(WINDOW)

    p = timed("plan", lambda: plan(entries, 3, budget))
    assert p is not None
    keep_from = len(entries) - len(p.tail)
    pruned = timed("prune", lambda: prune(entries, keep_from))
    again = timed("prune again (idempotent)", lambda: prune(pruned, keep_from))
    assert again == pruned
    assert pruned[keep_from:] == entries[keep_from:]
    p = timed("plan the pruned transcript", lambda: plan(pruned, 3, budget))
    assert p is not None
    out = timed("assemble + repair", lambda: assemble(p, Entry(-100, "summary", "S")))
    timed("request_tokens (all entries)", lambda: request_tokens("", pruned))
    wire = timed("summary_messages", lambda: summary_messages("previous", p.middle))
    fallback = timed("fallback_summary", lambda: fallback_summary("previous", p.middle))
    after = request_tokens("", out)
    print(f"  after: {len(out):,} entries, ~{after:,} tokens (tail {len(p.tail):,} entries)")

    assert p.previous_summary is entries[0]
    assert [e.id for e in p.head] == [1, 2, 3]
    assert p.tail[-1] is pruned[-1]
    assert any(e.role == "user" for e in p.tail)
    assert sum(entry_tokens(e) for e in p.tail) <= TAIL_SOFT_CEILING * budget
    assert len(out) == len(p.head) + 1 + len(p.tail)  # nothing to repair: no pair was split
    assert len(wire[1].content) <= 160_000 + 200
    assert len(fallback) <= 8000
    assert after < 0.05 * total
