"""The names the model calls MCP tools by: `mcp__SERVER__TOOL`.

A server's name is 1 to 32 letters, digits and '-' (no '_'), so the first `__` after the
prefix ends it; the tool's own name is everything after (it may hold `__` itself).
Front-ends show such a call as TOOL, labelled "SERVER · MCP", instead of the raw name.  The
backend makes these names (`backend/mcp/names.py`), so TOOL is the server's own name for
the tool unless the backend had to rewrite one a provider would refuse.
"""

from __future__ import annotations

import re

from shared.protocol import McpToolInfo

_MODEL_NAME = re.compile(r"^mcp__([A-Za-z0-9][A-Za-z0-9-]{0,31})__(.+)$", re.DOTALL)


def split_model_name(name: str) -> tuple[str, str] | None:
    """(server, tool) of an MCP tool's model name; None for any other tool's name."""
    match = _MODEL_NAME.match(name)
    return (match.group(1), match.group(2)) if match else None


def shown_name(name: str) -> tuple[str, str]:
    """How a tool's name reads: (the name to show, a label for where it comes from: "SERVER ·
    MCP" for an MCP tool, "" for a built-in one)."""
    split = split_model_name(name)
    if split is None:
        return name, ""
    return split[1], f"{split[0]} · MCP"


def shown_summary(name: str, summary: str) -> str:
    """A call's one-line summary without a leading "SERVER · TOOL" (the backend's summary of an
    MCP call starts so; a card showing the name and "SERVER · MCP" would say it twice)."""
    split = split_model_name(name)
    if split is None:
        return summary
    lead = f"{split[0]} · {split[1]}"
    return summary[len(lead):].lstrip() if summary.startswith(lead) else summary


def count_words(tools: list[McpToolInfo]) -> str:
    """"2 tools", or "2 tools (1 hidden)" when some are switched off in the settings."""
    offered = sum(1 for t in tools if t.enabled)
    hidden = len(tools) - offered
    words = f"{offered} tool{'' if offered == 1 else 's'}"
    return f"{words} ({hidden} hidden)" if hidden else words
