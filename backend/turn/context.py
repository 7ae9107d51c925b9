"""What the model sees this turn: the session's frozen system prompt and the wire copy.

The system prompt is built once per session, stored on the session row
before the first model call, and replayed byte-for-byte after that, so the
provider's prompt cache keeps its prefix.  The wire copy is built fresh for
every request from the transcript and never written back.
"""

from __future__ import annotations

import platform
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

from backend.providers.base import WireMessage
from shared.codec import clean_text

CONTEXT_FILES = ("AGENTS.md", "TURNKEY.md")
MAX_CONTEXT_FILE_CHARS = 20_000

IDENTITY = (
    "You are Turnkey, an AI assistant running on the user's own computer as a desktop app. "
    "Answer directly and precisely. Use Markdown for structure and fenced code blocks for code. "
    "When you are unsure, say so instead of guessing."
)


def build_system_prompt(cwd: str, model: str) -> str:
    """Three layers, most stable first: identity and environment, project context, volatile."""
    stable = [
        IDENTITY,
        f"Environment: {platform.system()} {platform.release()}; working folder: {cwd}; "
        f"model: {model}.",
    ]
    context = [_context_file(Path(cwd) / name) for name in CONTEXT_FILES]
    volatile = [f"The session started on {datetime.now(UTC):%A %Y-%m-%d} (UTC)."]
    return "\n\n".join(part for part in (*stable, *context, *volatile) if part)


def _context_file(path: Path) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    if len(text) > MAX_CONTEXT_FILE_CHARS:
        text = text[:MAX_CONTEXT_FILE_CHARS] + "\n[... truncated]"
    return f"Project instructions from {path.name}:\n{text.strip()}"


def wire_messages(system_prompt: str, rows: list[sqlite3.Row]) -> list[WireMessage]:
    """The request's messages: the stored prompt, then each visible row as it was sent.

    `api_content` replays the exact bytes sent before, where they differ from
    what people see.  Notes (interrupted, failed, recovered) are for people;
    the model sees only summaries among them.
    """
    out = [WireMessage("system", system_prompt)]
    for r in rows:
        role = r["role"]
        if role == "system_note":
            if r["note_kind"] != "summary":
                continue
            role = "user"
        content = r["api_content"] if r["api_content"] is not None else r["content"]
        if role in ("user", "assistant") and content:
            out.append(WireMessage(role, clean_text(content)))
    return out
