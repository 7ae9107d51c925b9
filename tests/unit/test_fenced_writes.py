"""Every write of a running turn goes through its fence (backend/store/fenced.py).

The modules a turn runs through may not reach the store's write methods any other way:
a new write there that forgets the lease check fails this test.  The few writes that are
not a running turn's (taking the lease, a person's answer, session.compress and
session.undo) are named below, each with why.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# The turn's modules: every write of a running turn starts in one of them.
TURN_MODULES = (
    *sorted((ROOT / "backend" / "turn").glob("*.py")),
    ROOT / "backend" / "tools" / "executor.py",
    ROOT / "backend" / "tools" / "approvals.py",
    ROOT / "backend" / "tools" / "checkpoints.py",
    ROOT / "backend" / "authority" / "questions.py",
    ROOT / "backend" / "compress" / "compressor.py",
)
WRITES = {"write", "write_patiently", "enqueue"}

# (module, function) -> why its write is not fenced on a lease it holds.
NOT_A_TURNS_WRITE: dict[tuple[str, str], str] = {
    ("backend/turn/lease.py", "LeaseWatch._run"):
        "the lease refresh itself, an UPDATE fenced on the holder (leases.refresh)",
    ("backend/turn/lease.py", "wait_for_lease"): "takes the lease; the turn holds none yet",
    ("backend/turn/runner.py", "TurnRunner._wait_lease.waiting"):
        "lease.waiting, from a turn that holds no lease yet",
    ("backend/turn/runner.py", "TurnRunner._wait_lease"):
        "the end of a turn that never got the lease: close_turn checks its admission",
    ("backend/tools/approvals.py", "Approvals.respond"): "a person's answer, through any backend",
    ("backend/authority/questions.py", "Questions.respond"):
        "a person's answer, through any backend (and, after a restart, its follow-up prompt)",
    ("backend/authority/questions.py", "Questions.sweep_once"):
        "expires questions past due whose turn may be long gone (fenced on `pending`) and admits "
        "answers no turn read once that turn was marked lost (serializable: once)",
    ("backend/tools/checkpoints.py", "Checkpoints.undo"): "session.undo, between turns",
    ("backend/tools/checkpoints.py", "Checkpoints.rewind"):
        "session.fork's restore_files, between turns",
    ("backend/compress/compressor.py", "Compressor.compress"):
        "the compression lock (its own table and holder), not the transcript",
    ("backend/compress/compressor.py", "Compressor._compress"):
        "session.compress, with no turn: a turn's compression passes its fence instead",
}


def _unfenced(path: Path) -> list[tuple[str, str, int]]:
    """(module, function, line) of each use of a store's write method in `path`."""
    found: list[tuple[str, str, int]] = []
    rel = path.relative_to(ROOT).as_posix()

    def visit(node: ast.AST, scope: list[str]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                visit(child, [*scope, child.name])
                continue
            if isinstance(child, ast.Attribute) and child.attr in WRITES \
                    and _names_store(child.value):
                found.append((rel, ".".join(scope), child.lineno))
            visit(child, scope)

    visit(ast.parse(path.read_text()), [])
    return found


def _names_store(node: ast.expr) -> bool:
    """`db`, `self.db`, `self.ex.db`, ...: a store, not a fence."""
    return (isinstance(node, ast.Name) and node.id == "db") or (
        isinstance(node, ast.Attribute) and node.attr == "db")


def test_a_running_turn_writes_only_through_its_fence() -> None:
    found = [hit for path in TURN_MODULES for hit in _unfenced(path)]
    bad = [f"{m}:{line} in {fn}" for m, fn, line in found if (m, fn) not in NOT_A_TURNS_WRITE]
    assert bad == [], ("a turn's module writes to the store directly; write through the "
                       "turn's TurnFence (store/fenced.py) or say here why it is not the "
                       "turn's write:\n" + "\n".join(bad))


def test_the_exceptions_are_not_stale() -> None:
    used = {(m, fn) for path in TURN_MODULES for m, fn, _ in _unfenced(path)}
    assert sorted(set(NOT_A_TURNS_WRITE) - used) == []


def test_the_rule_sees_a_direct_write() -> None:
    """The checker itself: a write through the store, however reached, is found."""
    tree = ast.parse("async def f(self, db):\n    await self.ex.db.write(job)\n"
                     "    await db.enqueue(job)\n    await self.fence.write(job)\n")
    hits = [n.lineno for n in ast.walk(tree)
            if isinstance(n, ast.Attribute) and n.attr in WRITES and _names_store(n.value)]
    assert hits == [2, 3]
