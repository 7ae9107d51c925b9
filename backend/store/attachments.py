"""Attachments' storage: the files held (content-addressed by SHA-256), uploads in progress,
the files each admission names, and the garbage no admission names.

Two places for the bytes, one table for what is held (`attachments`): with SQLite, files in
`DIR/attachments/<sha[:2]>/<sha>` (written to a temporary name, fsynced, renamed, the folder
fsynced) and uploads in progress in `DIR/attachments/partial/<sha>` (appended and fsynced
per chunk: its size is what was received); with PostgreSQL, `attachment_data`'s parts and
`attachment_partial`'s chunks, so every backend on the store serves them.  A file's row is
written only once its bytes are durable, so a row always means a whole, checked file.

The file functions (`*_file`, `*_partial`) block: callers run them in a thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import time
from pathlib import Path
from typing import Any

from backend.store.db import SQLITE, Database, Tx
from backend.store.records import Record

PART_BYTES = 1024 * 1024  # PostgreSQL: a file's bytes in parts of this size
GARBAGE_AFTER_S = 24 * 3600  # a file no admission names, or an upload left, is removed then
TOUCH_AFTER_S = 3600  # a held file asked for again counts from then (at most this stale)


class FileRecord(Record, frozen=True):
    """An `attachments` row: a file held, whole and checked."""

    sha256: str
    mime_type: str
    bytes: int
    kind: str
    width: int | None
    height: int | None
    pages: int | None
    thumbnail: str | None
    created_at: float


_MESSAGE_FIELDS = ("sha256", "name", "mime_type", "bytes", "kind", "width", "height", "pages",
                   "thumbnail")
_COLUMNS = "sha256, mime_type, bytes, kind, width, height, pages, thumbnail, created_at"


# --- rows -------------------------------------------------------------------------------


def held(tx: Tx, sha256: str) -> FileRecord | None:
    row = tx.one(f"SELECT {_COLUMNS} FROM attachments WHERE sha256 = ?", (sha256,))
    return FileRecord.from_row(row) if row is not None else None


def record(tx: Tx, files: list[FileRecord]) -> None:
    """Records files whose bytes are durable (a thumbnail before its image)."""
    for f in files:
        tx.execute(
            f"INSERT INTO attachments ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (sha256) DO UPDATE SET created_at = excluded.created_at",
            (f.sha256, f.mime_type, f.bytes, f.kind, f.width, f.height, f.pages, f.thumbnail,
             f.created_at))


def touch(tx: Tx, sha256: str) -> None:
    """A held file asked for again: the day before it is garbage starts now."""
    tx.execute("UPDATE attachments SET created_at = ? WHERE sha256 = ? AND created_at < ?",
               (time.time(), sha256, time.time() - TOUCH_AFTER_S))


def admit(tx: Tx, admission_id: str, named: list[tuple[str, str]]) -> list[FileRecord]:
    """Records the files (sha256, name) an admission names, in order, inside its
    transaction; returns them.  Raises LookupError(position) for one not held whole."""
    out: list[FileRecord] = []
    for position, (sha, name) in enumerate(named):
        f = held(tx, sha)
        if f is None:
            raise LookupError(position)
        tx.execute("INSERT INTO admission_attachments (admission_id, position, sha256, name) "
                   "VALUES (?, ?, ?, ?)", (admission_id, position, sha, name))
        out.append(f)
    return out


def of_admission(tx: Tx, admission_id: str) -> list[dict[str, Any]]:
    """The files an admission names, in order, as messages carry them (MessageAttachment's
    fields, those without a value left out)."""
    rows = tx.all(
        "SELECT a.sha256, x.name, a.mime_type, a.bytes, a.kind, a.width, a.height, a.pages, "
        "a.thumbnail FROM admission_attachments x JOIN attachments a ON a.sha256 = x.sha256 "
        "WHERE x.admission_id = ? ORDER BY x.position", (admission_id,))
    return [{k: v for k, v in zip(_MESSAGE_FIELDS, row, strict=True) if v is not None}
            for row in rows]


def readable(tx: Tx, session_id: str, sha256: str) -> FileRecord | None:
    """The file (or thumbnail) `sha256` if a prompt of the session, or of a session it
    continues (a rotation's parent, a branch's original), carries it; else None."""
    f = held(tx, sha256)
    if f is None:
        return None
    carriers = [sha256, *(r[0] for r in tx.all(
        "SELECT sha256 FROM attachments WHERE thumbnail = ?", (sha256,)))]
    for sid in _lineage(tx, session_id):
        for sha in carriers:
            if tx.one("SELECT 1 FROM admission_attachments x JOIN admissions a "
                      "ON a.admission_id = x.admission_id WHERE x.sha256 = ? AND "
                      "a.session_id = ?", (sha, sid)) is not None:
                return f
            # A branch's copied prompts carry their files in their rows' meta.
            if tx.one("SELECT 1 FROM messages WHERE session_id = ? AND role = 'user' AND "
                      "meta LIKE ?", (sid, f"%{sha}%")) is not None:
                return f
    return None


def _lineage(tx: Tx, session_id: str) -> list[str]:
    """The session and those it continues, nearest first (a bounded walk: no cycles)."""
    out: list[str] = []
    todo = [session_id]
    while todo and len(out) < 64:
        sid = todo.pop(0)
        if sid in out:
            continue
        row = tx.one("SELECT parent_session_id, forked_from FROM sessions WHERE session_id = ?",
                     (sid,))
        if row is None:
            continue
        out.append(sid)
        todo.extend(s for s in (row[0], row[1]) if s)
    return out


def collect(tx: Tx, now: float) -> list[str]:
    """Deletes the rows of files no admission and no prompt names, held for more than
    GARBAGE_AFTER_S, and then of thumbnails no remaining file names; returns their
    sha256s (the caller removes their bytes after the commit).  A write job: an admission
    naming a file commits before or after it, never between the check and the delete."""
    gone: list[str] = []
    while True:
        rows = tx.all(
            "SELECT sha256 FROM attachments f WHERE created_at < ? AND NOT EXISTS "
            "(SELECT 1 FROM admission_attachments x WHERE x.sha256 = f.sha256) AND NOT EXISTS "
            "(SELECT 1 FROM attachments t WHERE t.thumbnail = f.sha256) LIMIT 500",
            (now - GARBAGE_AFTER_S,))
        batch = [r[0] for r in rows if not _in_a_prompt(tx, r[0])]
        batch = [s for s in batch if s not in gone]
        if not batch:
            return gone
        for sha in batch:
            tx.execute("DELETE FROM attachments WHERE sha256 = ?", (sha,))
            if tx.dialect != SQLITE:
                tx.execute("DELETE FROM attachment_data WHERE sha256 = ?", (sha,))
        gone.extend(batch)


def _in_a_prompt(tx: Tx, sha256: str) -> bool:
    """A branch's copied prompt (its admission may be gone with its original session)."""
    return tx.one("SELECT 1 FROM messages WHERE role = 'user' AND meta LIKE ? LIMIT 1",
                  (f"%{sha256}%",)) is not None


# --- PostgreSQL: bytes in the store --------------------------------------------------------


def pg_received(tx: Tx, sha256: str) -> int:
    row = tx.one("SELECT COALESCE(SUM(octet_length(data)), 0) FROM attachment_partial "
                 "WHERE sha256 = ?", (sha256,))
    return int(row[0]) if row is not None else 0


def pg_append(tx: Tx, sha256: str, at: int, data: bytes) -> int:
    """Appends a chunk starting at `at` when that is where the upload stands; returns where
    it stands after (a chunk raced by another backend is stored once)."""
    tx.execute("SELECT pg_advisory_xact_lock(hashtext(?))", (sha256,))
    received = pg_received(tx, sha256)
    if at == received and data:
        tx.execute("INSERT INTO attachment_partial (sha256, at, data, received_at) "
                   "VALUES (?, ?, ?, ?)", (sha256, at, data, time.time()))
        received += len(data)
    return received


def pg_partial(tx: Tx, sha256: str) -> bytes:
    return b"".join(bytes(r[0]) for r in tx.all(
        "SELECT data FROM attachment_partial WHERE sha256 = ? ORDER BY at", (sha256,)))


def pg_drop_partial(tx: Tx, sha256: str) -> None:
    tx.execute("DELETE FROM attachment_partial WHERE sha256 = ?", (sha256,))


def pg_store(tx: Tx, files: list[tuple[FileRecord, bytes]], partial: str) -> None:
    """Stores whole files' bytes and rows, and drops the upload they came from, at once."""
    for f, data in files:
        tx.execute("DELETE FROM attachment_data WHERE sha256 = ?", (f.sha256,))
        for part, at in enumerate(range(0, len(data), PART_BYTES)):
            tx.execute("INSERT INTO attachment_data (sha256, part, data) VALUES (?, ?, ?)",
                       (f.sha256, part, data[at:at + PART_BYTES]))
    record(tx, [f for f, _ in files])
    pg_drop_partial(tx, partial)


def pg_read(tx: Tx, sha256: str, offset: int, limit: int) -> bytes:
    first, last = offset // PART_BYTES, (offset + limit - 1) // PART_BYTES
    parts = tx.all("SELECT part, data FROM attachment_data WHERE sha256 = ? AND part >= ? "
                   "AND part <= ? ORDER BY part", (sha256, first, last))
    blob = b"".join(bytes(r[1]) for r in parts)
    start = offset - first * PART_BYTES
    return blob[start:start + limit]


def pg_collect_partial(tx: Tx, now: float) -> int:
    """Drops uploads whose last chunk came more than GARBAGE_AFTER_S ago; returns how many."""
    rows = tx.all("SELECT sha256 FROM attachment_partial GROUP BY sha256 "
                  "HAVING MAX(received_at) < ?", (now - GARBAGE_AFTER_S,))
    for r in rows:
        pg_drop_partial(tx, r[0])
    return len(rows)


# --- SQLite: bytes in files --------------------------------------------------------------


def file_path(root: Path, sha256: str) -> Path:
    return root / sha256[:2] / sha256


def partial_path(root: Path, sha256: str) -> Path:
    return root / "partial" / sha256


def partial_size(root: Path, sha256: str) -> int:
    try:
        return partial_path(root, sha256).stat().st_size
    except FileNotFoundError:
        return 0


def append_partial(root: Path, sha256: str, at: int, data: bytes) -> int:
    """Appends a chunk starting at `at` when that is where the upload stands, durably;
    returns where it stands after."""
    path = partial_path(root, sha256)
    _folder(root, path.parent)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW,
                 0o600)
    try:
        size = os.fstat(fd).st_size
        if size == 0:
            _fsync_dir(path.parent)  # the name survives a crash too
        if at != size or not data:
            return size
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
        return size + len(data)
    finally:
        os.close(fd)


def read_partial(root: Path, sha256: str) -> bytes:
    return _read(root, partial_path(root, sha256))


def drop_partial(root: Path, sha256: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        partial_path(root, sha256).unlink()


def write_file(root: Path, sha256: str, data: bytes) -> None:
    """Writes a whole file under its name, durably: a temporary name, fsync, rename, and
    the folder's fsync."""
    path = file_path(root, sha256)
    _folder(root, path.parent)
    tmp = path.with_name(f".{sha256}.{os.getpid()}.tmp")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()  # a temporary name left by a crash (or a link put there): never written through
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def read_file(root: Path, sha256: str, offset: int = 0, limit: int | None = None) -> bytes:
    return _read(root, file_path(root, sha256), offset, limit)


def _read(root: Path, path: Path, offset: int = 0, limit: int | None = None) -> bytes:
    """A file of the store, never through a link (a file or folder below `root` swapped for
    one would make attachment.get serve whatever it points at)."""
    _no_links(root, path.parent)
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as f:
        f.seek(offset)
        return f.read() if limit is None else f.read(limit)


def _folder(root: Path, folder: Path) -> None:
    """Makes `folder` (below `root`) if need be, and refuses one that is, or lies through, a
    link: every write of the store lands in its own folders only."""
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    _no_links(root, folder)


def _no_links(root: Path, folder: Path) -> None:
    here = root
    for part in folder.relative_to(root).parts:
        here = here / part
        if here.is_symlink():
            raise OSError(errno.ELOOP, "a folder of the attachment store is a symbolic link",
                          str(here))


def remove_files(root: Path, sha256s: list[str]) -> None:
    for sha in sha256s:
        with contextlib.suppress(FileNotFoundError):
            file_path(root, sha).unlink()


def stray_files(root: Path, held_now: set[str], now: float) -> list[Path]:
    """Files on disk older than GARBAGE_AFTER_S that no row records (a crash between the
    rename and the row), and uploads in progress untouched as long."""
    out: list[Path] = []
    if not root.is_dir():
        return out
    for folder in root.iterdir():
        if not folder.is_dir():
            continue
        for path in folder.iterdir():
            with contextlib.suppress(FileNotFoundError):
                old = path.stat().st_mtime < now - GARBAGE_AFTER_S
                if old and (folder.name == "partial" or path.name not in held_now):
                    out.append(path)
    return out


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# --- for the turn ------------------------------------------------------------------------


async def read_bytes(db: Database, root: Path, sha256: str) -> bytes:
    """A held file's whole bytes, for the turn (root: DIR/attachments); raises
    FileNotFoundError when the store does not hold it."""
    if db.dialect == SQLITE:
        return await asyncio.to_thread(read_file, root, sha256)

    def read(tx: Tx) -> bytes | None:
        if held(tx, sha256) is None:
            return None
        return b"".join(bytes(r[0]) for r in tx.all(
            "SELECT data FROM attachment_data WHERE sha256 = ? ORDER BY part", (sha256,)))

    data = await db.read(read)
    if data is None:
        raise FileNotFoundError(f"attachment {sha256} is not held")
    return data
