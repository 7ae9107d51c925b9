"""Spilling: a tool result too large for the context goes to DIR/spill/, the model gets a preview."""

from __future__ import annotations

import re
from pathlib import Path

from backend.config import write_atomic

PREVIEW_CHARS = 4_000
_SAFE = re.compile(r"[^A-Za-z0-9_.-]")


def spill(
    spill_dir: Path, session_id: str, call_id: str, content: str, limit: int
) -> tuple[str, str | None]:
    """Returns (what the model sees, the file's path or None when nothing was spilled)."""
    if len(content) <= limit:
        return content, None
    folder = spill_dir / _SAFE.sub("_", session_id)
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = folder / f"{_SAFE.sub('_', call_id)}.txt"
    write_atomic(path, content.encode("utf-8", "replace"))
    preview = content[: min(PREVIEW_CHARS, limit)]
    note = (
        f"\n\n[Output truncated: {len(content):,} characters in total. The full output is in "
        f"{path}; read it in parts with read_file (offset, limit) or search it with search_files.]"
    )
    return preview + note, str(path)
