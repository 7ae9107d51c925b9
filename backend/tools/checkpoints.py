"""File checkpoints: a file's old content saved before a tool changes it, and undo from them.

Blobs are content-addressed files under DIR/checkpoints/; the row that
points at one is committed before the tool writes, so after any crash the
old content is recoverable.  The old content is what the tool read through
the fd it then writes through (never the path read again), and undo puts it
back through an fd too, refusing a path that now goes through a symlink.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
from pathlib import Path

from backend import wire
from backend.config import write_atomic
from backend.store import checkpoints, messages
from backend.store.db import Database, Tx
from backend.store.fenced import TurnFence
from backend.tools import beneath, fileio
from shared import protocol as p

log = logging.getLogger("tools")

MAX_CHECKPOINT_BYTES = 50 * 1024 * 1024


class Checkpoints:
    def __init__(self, db: Database, data_dir: Path) -> None:
        self.db = db
        self.dir = data_dir / "checkpoints"

    async def save(
        self, fence: TurnFence, turn_id: str, call_id: str, path: Path, old: bytes | None
    ) -> None:
        """Stores the real `path`'s content `old` (None: it does not exist); durable on return.
        Fenced on the turn's lease: a turn taken over cannot record (and so cannot make) a
        change to a file."""
        blob = await asyncio.to_thread(self._store_blob, old)
        existed = blob is not None
        digest, blob_path = blob if blob is not None else (None, None)
        await fence.write(lambda tx: checkpoints.insert(
            tx, fence.session_id, turn_id, call_id, str(path), existed=existed,
            content_hash=digest, blob_path=blob_path,
        ))

    def _store_blob(self, data: bytes | None) -> tuple[str, str] | None:
        if data is None:
            return None
        digest = hashlib.sha256(data).hexdigest()
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        blob = self.dir / digest
        if not blob.exists():
            write_atomic(blob, data)
        return digest, str(blob)

    async def undo(self, session_id: str, turn_id: str | None,
                   paths: list[str] | None = None) -> tuple[str | None, list[str]]:
        """Puts back every file the turn (default: the last one that changed files) changed,
        or only `paths` of it, as it was before the turn; returns the turn and the restored
        paths.  Nothing left to put back changes nothing and tells no one."""
        def pick(tx: Tx) -> tuple[str | None, list[tuple[str, bool, str | None]]]:
            chosen = turn_id or checkpoints.last_turn(tx, session_id)
            if chosen is None:
                return None, []
            rows = checkpoints.earliest_per_path(tx, session_id, chosen, paths)
            return chosen, [(r.path, r.existed, r.blob_path) for r in rows]

        chosen, rows = await self.db.read(pick)
        if chosen is None or not rows:
            return chosen if turn_id is not None else None, []
        restored = await asyncio.to_thread(_restore_all, rows)
        picked = [path for path, _, _ in rows] if paths is not None else None

        def mark(tx: Tx) -> None:
            # Stored with the mark: every window of the session stops offering this undo, and
            # the calls' rows say so to a window opened later.
            calls = checkpoints.mark_restored(tx, session_id, chosen, picked)
            messages.mark_undone(tx, session_id, calls)
            wire.emit(tx, session_id, p.FilesRestored(turn_id=chosen, paths=restored, call_ids=calls),
                      turn_id=chosen)

        await self.db.write(mark)
        return chosen, restored


    async def rewind(self, session_id: str, from_rowid: int) -> list[str]:
        """Puts back every file the session's turns changed from its row `from_rowid` on (a
        prompt a branch starts at) as it was before the first of those changes; marks those
        turns undone as `undo` does, each with its `files.restored`.  Returns the paths."""
        def pick(tx: Tx) -> tuple[list[str], list[tuple[str, bool, str | None]]]:
            turns = messages.turns_from(tx, session_id, from_rowid)
            rows = checkpoints.first_per_path_of(tx, session_id, turns)
            return turns, [(r.path, r.existed, r.blob_path) for r in rows]

        turns, rows = await self.db.read(pick)
        if not rows:
            return []
        restored = await asyncio.to_thread(_restore_all, rows)

        def mark(tx: Tx) -> None:
            for turn in turns:
                paths = checkpoints.paths_of(tx, session_id, turn)
                calls = checkpoints.mark_restored(tx, session_id, turn)
                if not calls:
                    continue
                messages.mark_undone(tx, session_id, calls)
                wire.emit(tx, session_id, p.FilesRestored(
                    turn_id=turn, paths=[x for x in restored if x in paths], call_ids=calls),
                    turn_id=turn)

        await self.db.write(mark)
        return restored


def _restore_all(rows: list[tuple[str, bool, str | None]]) -> list[str]:
    restored = []
    for path, existed, blob in rows:
        try:
            _restore(path, Path(blob).read_bytes() if existed and blob is not None else None)
        except OSError as exc:  # a symlink now on the way, permissions: the others still go back
            log.warning("undo left %s as it is: %s", path, exc.strerror or exc)
            continue
        restored.append(path)
    return restored


def _restore(path: str, data: bytes | None) -> None:
    """Puts `data` at the real path `path` (None: removes what the turn created there)."""
    with beneath.locate(path, "/", follow=False) as place:  # it was real: a symlink now is refused
        if data is not None:
            # Keeps the file's permissions (the tools' writes kept them too); creates parents.
            place.make_folders()
            fileio.write_at(place.dir_fd, place.name, data)
        elif place.name and not place.missing:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(place.name, dir_fd=place.dir_fd)  # the turn created it
