"""The "always allow" rules as the settings dialog lists them: what each allows, in words,
and what revoking one means.  Qt-free."""

from __future__ import annotations

from dataclasses import dataclass

from desktop.state.sessions import local_time
from shared import protocol as p

TOOL_LABELS = {
    "terminal": "Terminal",
    "write_file": "Write a file",
    "patch": "Edit a file",
    "read_file": "Read a file",
    "search_files": "Search files",
    "list_dir": "List a folder",
}

EMPTY = ("No “always allow” rules. When you answer a request with “Always”, Turnkey stops "
         "asking for that kind of call and the rule shows here, so you can revoke it.")


@dataclass(frozen=True)
class RuleRow:
    rule_id: str
    tool: str  # for people ("Terminal")
    allows: str  # what it lets through without asking
    created: str  # local time, to the minute


def rows(rules: list[p.Rule]) -> list[RuleRow]:
    """The rules as listed, newest first."""
    ordered = sorted(rules, key=lambda r: (r.created_at, r.rule_id), reverse=True)
    return [RuleRow(r.rule_id, TOOL_LABELS.get(r.tool, r.tool), allows(r), local_minute(r.created_at))
            for r in ordered]


def allows(rule: p.Rule) -> str:
    """What a rule lets run without asking (patterns as backend/tools/policy.py reads them)."""
    if rule.tool == "terminal":
        if rule.pattern == "@network":
            return "commands that need the network (and nothing else risky)"
        if rule.pattern == "@unsandboxed":
            return "commands run outside the sandbox (and nothing else risky)"
        return f"commands starting with “{rule.pattern}”"
    if rule.pattern:
        return f"changes inside the folder {rule.pattern}"
    return rule.pattern or "(any)"


def revoke_question(row: RuleRow) -> tuple[str, str]:
    """The confirmation a revoke asks: the question, and what it means."""
    return (f"Revoke the rule for {row.tool.lower()}: {row.allows}?",
            "Turnkey will ask you again before such calls, in every session.")


def local_minute(stamp: str) -> str:
    """An RFC 3339 UTC time as local date and time to the minute ("2026-11-30 14:02")."""
    return local_time(stamp, "%Y-%m-%d %H:%M")
