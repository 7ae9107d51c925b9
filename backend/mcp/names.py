"""The names MCP tools go by: `mcp__SERVER__TOOL`, the form providers accept for a function.

Providers take function names of 1-64 characters from `[A-Za-z0-9_-]`.  A
server's name is checked against a stricter pattern when it is configured
(no `_`, so the first `__` after the prefix ends it); a tool's own name is
the server's choice, so one that does not fit is rewritten, with a short
hash of the original so two rewritten names cannot meet.
"""

from __future__ import annotations

import hashlib
import re

PREFIX = "mcp__"
MAX_NAME = 64
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def model_name(server: str, tool: str) -> str:
    """What the model calls the server's tool `tool`."""
    safe = _UNSAFE.sub("_", tool) or "tool"
    name = f"{PREFIX}{server}__{safe}"
    if safe == tool and len(name) <= MAX_NAME:
        return name
    digest = hashlib.sha256(tool.encode()).hexdigest()[:8]
    return f"{name[:MAX_NAME - 9]}_{digest}"


def is_mcp(name: str) -> bool:
    return name.startswith(PREFIX)
