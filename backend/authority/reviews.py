"""`review.undo`: a background review's changes put back (turn/review.py writes them).

The review's note keeps, for each file it changed (a notebook, or a skill of the person's
folder), what the file held before and after.  Undo puts every file back to its "before" only
if each still holds the review's "after": a later change by anyone else is never overwritten
(refused, naming the file).  A notebook is put back compare-and-set under its lock; the note
then gets `undone: true` and `review.undone` is emitted, so undoing twice does nothing more.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from backend import wire
from backend.errors import InvalidParams, NotFound
from backend.ids import message_id, message_rowid
from backend.store import messages
from backend.store.db import Database, Tx
from backend.tools import memory, skill_writes, skills
from backend.tools.skills import SkillScope
from shared import protocol as p


class ChangedSince(Exception):
    """A file no longer holds what the review left there."""


class Reviews:
    def __init__(self, db: Database, data_dir: Path,
                 memory_changed: Callable[[memory.Target, memory.Usage], None] = lambda t, u: None,
                 skills_changed: Callable[[str, SkillScope, str], None] = lambda n, s, f: None,
                 ) -> None:
        self.db = db
        self.data_dir = data_dir
        # What undo put back is announced as any change is (memory.changed, skills.changed).
        self.memory_changed, self.skills_changed = memory_changed, skills_changed
        self._lock = asyncio.Lock()  # one undo at a time: its check and its writes together

    async def undo(self, session_id: str, message_id: str) -> p.ReviewUndoResult:
        try:
            rowid = message_rowid(message_id)
        except ValueError:
            raise InvalidParams("message_id", f"{message_id[:200]!r} is not a message_id") from None
        async with self._lock:
            row = await self.db.read(lambda tx: messages.by_rowid(tx, session_id, rowid))
            if row is None or row.role != "system_note" or row.note_kind != "review":
                raise NotFound("review note", message_id)
            meta: dict[str, Any] = json.loads(row.meta) if row.meta else {}
            if not meta.get("undone"):
                try:
                    await asyncio.to_thread(restore, self.data_dir, list(meta.get("files") or []))
                except ChangedSince as exc:
                    raise InvalidParams("message_id", f"not undone: {exc}") from None
                except (memory.MemoryRefused, skill_writes.SkillRefused) as exc:
                    raise InvalidParams("message_id", f"not undone: {exc}") from None
                await self.db.write(lambda tx: _mark_undone(tx, session_id, rowid, meta))
                await self._announce(list(meta.get("files") or []))
        return p.ReviewUndoResult(message_id=message_id, undone=True)

    async def _announce(self, files: list[dict[str, Any]]) -> None:
        for f in files:
            if f["kind"] == "memory":
                usage = await asyncio.to_thread(memory.read, self.data_dir, _target(f))
                self.memory_changed(_target(f), usage)
            else:
                self.skills_changed(str(f["target"]), "user",
                                    skills.folder_of("user", self.data_dir, self.data_dir))


def _mark_undone(tx: Tx, session_id: str, rowid: int, meta: dict[str, Any]) -> None:
    messages.set_meta(tx, rowid, {**meta, "undone": True})
    wire.emit(tx, session_id, p.ReviewUndone(message_id=message_id(rowid)))


def restore(data_dir: Path, files: list[dict[str, Any]]) -> None:
    """Every file back to its `before`, once each was checked to hold its `after`."""
    for f in files:
        if _current(data_dir, f) != f.get("after"):
            raise ChangedSince(f"{_name(f)} changed after the review; change it yourself "
                               "(Settings → Memory or Skills)")
    for f in files:
        before, after = f.get("before"), f.get("after")
        if f["kind"] == "memory":
            memory.update(data_dir, _target(f), _put_back(before or "", after or "", _name(f)))
        elif before is None:
            skill_writes.remove("user", str(f["target"]), data_dir, None)
        else:
            skill_writes.write_user(data_dir, str(f["target"]), str(before), create=False)


def _current(data_dir: Path, f: dict[str, Any]) -> str | None:
    if f["kind"] == "memory":
        return memory.read(data_dir, _target(f)).text
    return skill_writes.read_user(data_dir, str(f["target"]))


def _put_back(before: str, after: str, name: str) -> Any:
    def change(current: str) -> str:
        if current != after:  # written between the check and the lock
            raise ChangedSince(f"{name} changed after the review")
        return before
    return change


def _target(f: dict[str, Any]) -> memory.Target:
    return "user" if f["target"] == "user" else "environment"


def _name(f: dict[str, Any]) -> str:
    if f["kind"] == "memory":
        return f"memory/{memory.FILES[_target(f)]}"
    return f"skill {f['target']}"
