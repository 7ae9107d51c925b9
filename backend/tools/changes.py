"""What a session's turns did to files, for `session.changes`: per turn and per file, one diff
from the file before the turn (its first checkpoint in the turn) to the file as the turn left
it (the next turn's checkpoint of it, else the file as it is now).

The files are read as undo writes them: through the real path with no symlink on the way, and
a file with a second name (a hard link, which may lie anywhere on the file system) is not
read. Reading and diffing run in a thread; the store is read in one transaction first.
"""

from __future__ import annotations

import asyncio
import errno
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from backend.errors import NotFound
from backend.store import checkpoints, messages, sessions
from backend.store.checkpoints import CheckpointRecord
from backend.store.db import Database, Tx
from backend.tools import beneath, fileio
from shared import protocol as p

DIFF_BUDGET = 2_000_000  # characters of diffs in one answer; older turns' beyond it are left out
PROMPT_MAX = 200


@dataclass(frozen=True)
class Unshown:
    """A side of a change that cannot be shown, and why (for people)."""

    reason: str


Side = bytes | None | Unshown  # None: no file there


@dataclass
class _File:
    path: str
    before: CheckpointRecord  # the turn's first checkpoint of the path
    call_ids: list[str] = field(default_factory=list)
    restored: bool = True  # every checkpoint of the path in the turn was restored
    after: CheckpointRecord | None = None  # the next turn's first checkpoint of the path


@dataclass
class _Turn:
    turn_id: str
    prompt: str
    at: str
    files: dict[str, _File]
    metas: dict[str, dict[str, Any]]  # of the turn's tool rows, by call_id (when one is restored)


async def of_session(db: Database, session_id: str, limit: int) -> p.ChangesResult:
    """The newest `limit` turns that changed files, each with its files and their diffs."""
    cwd, turns, more = await db.read(lambda tx: _gather(tx, session_id, limit))
    built = await asyncio.to_thread(_build, cwd, turns)
    return p.ChangesResult(turns=built, has_more=more)


def _gather(tx: Tx, session_id: str, limit: int) -> tuple[str, list[_Turn], bool]:
    session = sessions.get(tx, session_id)
    if session is None:
        raise NotFound("session", session_id)
    turn_ids, more = checkpoints.newest_turns(tx, session_id, limit)
    prompts = messages.prompts_of_turns(tx, session_id, turn_ids)
    turns: dict[str, _Turn] = {}
    for t in turn_ids:
        text, at = prompts.get(t, ("", ""))
        turns[t] = _Turn(t, _first_line(text), at, {}, {})
    latest: dict[str, _File] = {}  # a path's entry in the latest turn seen that changed it
    for row in checkpoints.of_turns(tx, session_id, turn_ids):
        turn = turns[row.turn_id]
        entry = turn.files.get(row.path)
        if entry is None:
            entry = turn.files[row.path] = _File(row.path, row)
            earlier = latest.get(row.path)
            if earlier is not None:
                earlier.after = row  # how the earlier turn left it: as this one found it
            latest[row.path] = entry
        if row.call_id not in entry.call_ids:
            entry.call_ids.append(row.call_id)
        entry.restored = entry.restored and row.restored_at is not None
    for turn in turns.values():
        if not turn.at and turn.files:  # (no prompt row: when its first change was saved)
            turn.at = next(iter(turn.files.values())).before.created_at
        if any(f.restored for f in turn.files.values()):
            turn.metas = messages.tool_metas(tx, session_id, turn.turn_id)
    return session.cwd, list(turns.values()), more


def _first_line(text: str) -> str:
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return line if len(line) <= PROMPT_MAX else line[:PROMPT_MAX - 1] + "…"


def _build(cwd: str, turns: list[_Turn]) -> list[p.TurnChanges]:
    left = DIFF_BUDGET
    out: list[p.TurnChanges] = []
    for turn in reversed(turns):  # the newest first: the budget leaves out the oldest diffs
        files = []
        for f in turn.files.values():
            change = _change(f, fileio.display(Path(f.path), Path(cwd)), turn.metas)
            if len(change.diff) > left:
                change.diff = "(diff left out: this answer already holds 2 MB of diffs)"
            left -= len(change.diff)
            files.append(change)
        out.append(p.TurnChanges(turn_id=turn.turn_id, prompt=turn.prompt, at=turn.at, files=files))
    out.reverse()
    return out


def _change(f: _File, label: str, metas: dict[str, dict[str, Any]]) -> p.FileChange:
    created = not f.before.existed
    if f.restored:  # as it is now is as before the turn: the calls' own diffs say what it did
        diffs = [str(metas.get(c, {}).get("diff") or "") for c in f.call_ids]
        return p.FileChange(path=f.path, label=label, call_ids=f.call_ids, created=created,
                            deleted=False, restored=True,
                            diff="".join(d if d.endswith("\n") else d + "\n" for d in diffs if d))
    before = _saved(f.before)
    after = _saved(f.after) if f.after is not None else _current(f.path)
    return p.FileChange(path=f.path, label=label, call_ids=f.call_ids, created=created,
                        deleted=after is None, restored=False, diff=_diff(before, after, label))


def _diff(before: Side, after: Side, label: str) -> str:
    if isinstance(before, Unshown):
        return f"(no diff: {before.reason})"
    if isinstance(after, Unshown):
        return f"(no diff: {after.reason})"
    if before is None and after is None:
        return ""  # made and removed within the turn
    return fileio.unified_diff(before or b"", after or b"", label)


def _saved(row: CheckpointRecord) -> Side:
    """A checkpoint's content: the file as it was before the row's call."""
    if not row.existed:
        return None
    if row.blob_path is None:
        return Unshown("its saved copy is missing")
    try:
        with open(row.blob_path, "rb") as f:
            return _bounded(f.fileno(), f.read)
    except OSError:
        return Unshown("its saved copy could not be read")


def _current(path: str) -> Side:
    """The file at the real path `path` now (None: there is none)."""
    try:
        with beneath.locate(path, "/", follow=False) as place:
            fd = place.open(os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
            with os.fdopen(fd, "rb") as f:
                info = os.fstat(f.fileno())
                if not stat.S_ISREG(info.st_mode):
                    return Unshown("it is no longer a plain file")
                if info.st_nlink > 1:
                    return Unshown("it now has a second name (a hard link), so it is not read")
                return _bounded(f.fileno(), f.read)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return Unshown("a symbolic link now leads to it, so it is not read")
        return Unshown(f"it cannot be read now ({exc.strerror or exc})")


def _bounded(fd: int, read: Any) -> Side:
    if os.fstat(fd).st_size > fileio.DIFF_INPUT_MAX_BYTES:
        return Unshown("the file is larger than 2 MB")
    data: bytes = read(fileio.DIFF_INPUT_MAX_BYTES + 1)
    return data if len(data) <= fileio.DIFF_INPUT_MAX_BYTES else Unshown("the file is larger than 2 MB")
