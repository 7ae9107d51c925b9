"""A server's state as its badge says it: words and a colour (a theme token), for the MCP page
and the sidebar's door strip alike.  Its own module: the badge is painted at start-up, and
desktop/state/mcp.py, the MCP page's state, loads the settings' words with it."""

from __future__ import annotations

from typing import Literal

BadgeTone = Literal["success", "accent", "danger", "muted"]

STATES: dict[str, tuple[str, BadgeTone]] = {
    "ready": ("Ready", "success"),
    "starting": ("Starting…", "accent"),
    "failed": ("Failed", "danger"),
    "stopped": ("Not running", "muted"),
    "disabled": ("Disabled", "muted"),
    "unknown": ("Not reported", "muted"),
}
