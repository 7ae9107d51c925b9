"""Attachments' service: `attachment.upload` (chunked, idempotent, resumable, checked when
whole), `attachment.get` (a session's files read back), and the hourly garbage collection.

Uploads of one file are serialized in this process (a lock per SHA-256); with PostgreSQL a
chunk is appended under a transaction-scoped lock, so backends sharing the store agree
too.  Decoding and hashing run in a thread: a 32 MiB image does not stall the event loop.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import hashlib
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path

from backend.authority import filecheck
from backend.errors import InvalidParams, NotFound, StoreUnavailable
from backend.store import attachments as store
from backend.store.attachments import FileRecord
from backend.store.db import SQLITE, Database, Tx
from shared import logs
from shared.protocol import (
    MAX_ATTACHMENT_BYTES,
    MAX_CHUNK_BYTES,
    AttachmentGetParams,
    AttachmentGetResult,
    AttachmentUploadParams,
    AttachmentUploadResult,
    StoredFile,
    attachment_kind,
)

log = logging.getLogger("attachments")

COLLECT_EVERY_S = 3600.0


class Attachments:
    def __init__(self, db: Database, root: Path) -> None:
        self.db = db
        self.root = root  # DIR/attachments: the SQLite store's files
        self._locks: dict[str, asyncio.Lock] = {}
        self._storing = asyncio.Lock()  # a file's bytes and row, against the collection
        self._task: asyncio.Task[None] | None = None

    @property
    def on_disk(self) -> bool:
        return self.db.dialect == SQLITE

    # --- attachment.upload -------------------------------------------------------------

    async def upload(self, params: AttachmentUploadParams) -> AttachmentUploadResult:
        """One chunk (or, without data, where the upload stands); the file as held once
        its last byte arrived and it passed its check."""
        if attachment_kind(params.mime_type) is None:
            raise InvalidParams("mime_type", f"{params.mime_type!r} is not a type taken: "
                                "images (PNG, JPEG, GIF, WebP), PDF, or text")
        if params.size > MAX_ATTACHMENT_BYTES:
            raise InvalidParams("size", f"a file may have at most {_mib(MAX_ATTACHMENT_BYTES)}; "
                                f"this one has {params.size} bytes")
        data = _decoded(params.data) if params.data is not None else None
        sha, size = params.sha256, params.size
        async with self._lock(sha):
            found = await self._held(sha)
            if found is not None:
                await self.db.write(lambda tx: store.touch(tx, sha))
                return _complete(found)
            received = await self._received(sha)
            if received > size:
                raise InvalidParams("size", f"{received} bytes of this file are held already: "
                                    f"it is larger than size {size}")
            if data is None:
                return AttachmentUploadResult(sha256=sha, received=received, complete=False)
            if params.offset > received:
                raise InvalidParams("offset", f"{received} bytes of this file are held; "
                                    f"resume at offset {received}")
            end = params.offset + len(data)
            if end > size:
                await self._drop_partial(sha)
                raise InvalidParams("data", f"the chunk ends at byte {end}, past size {size}; "
                                    "nothing of this upload was kept")
            if end > received:
                received = await self._append(sha, received, data[received - params.offset:])
            if received < size:
                return AttachmentUploadResult(sha256=sha, received=received, complete=False)
            return _complete(await self._finish(sha, params.mime_type))

    async def _held(self, sha: str) -> FileRecord | None:
        found = await self.db.read(lambda tx: store.held(tx, sha))
        if found is not None and self.on_disk and not store.file_path(self.root, sha).exists():
            return None  # its file is gone (removed by hand): uploaded again, it is rewritten
        return found

    async def _received(self, sha: str) -> int:
        if self.on_disk:
            return await asyncio.to_thread(store.partial_size, self.root, sha)
        return await self.db.read(lambda tx: store.pg_received(tx, sha))

    async def _append(self, sha: str, at: int, data: bytes) -> int:
        if self.on_disk:
            return await asyncio.to_thread(store.append_partial, self.root, sha, at, data)
        return await self.db.write(lambda tx: store.pg_append(tx, sha, at, data))

    async def _drop_partial(self, sha: str) -> None:
        if self.on_disk:
            await asyncio.to_thread(store.drop_partial, self.root, sha)
        else:
            await self.db.write(lambda tx: store.pg_drop_partial(tx, sha))

    async def store_bytes(self, data: bytes, mime_type: str) -> StoredFile:
        """A whole file the backend received itself (a door's download), checked and held
        as an upload is; raises InvalidParams as `attachment.upload` would."""
        if attachment_kind(mime_type) is None:
            raise InvalidParams("mime_type", f"{mime_type!r} is not a type taken: "
                                "images (PNG, JPEG, GIF, WebP), PDF, or text")
        if len(data) > MAX_ATTACHMENT_BYTES:
            raise InvalidParams("size", f"a file may have at most {_mib(MAX_ATTACHMENT_BYTES)}; "
                                f"this one has {len(data)} bytes")
        sha = await asyncio.to_thread(lambda: hashlib.sha256(data).hexdigest())
        async with self._lock(sha):
            found = await self._held(sha)
            if found is not None:
                await self.db.write(lambda tx: store.touch(tx, sha))
                return stored_file(found)
            checked = await asyncio.to_thread(filecheck.check, data, sha, mime_type)
            return stored_file(await self._keep(sha, mime_type, data, checked))

    async def _finish(self, sha: str, mime_type: str) -> FileRecord:
        """The whole upload, checked and stored, its partial dropped; a file that fails
        its check leaves nothing behind."""
        if self.on_disk:
            blob = await asyncio.to_thread(store.read_partial, self.root, sha)
        else:
            blob = await self.db.read(lambda tx: store.pg_partial(tx, sha))
        try:
            checked = await asyncio.to_thread(filecheck.check, blob, sha, mime_type)
        except InvalidParams:
            await self._drop_partial(sha)
            raise
        return await self._keep(sha, mime_type, blob, checked)

    async def _keep(self, sha: str, mime_type: str, blob: bytes,
                    checked: filecheck.Checked) -> FileRecord:
        """A checked file (and its thumbnail) stored and recorded; its upload, if any, dropped."""
        now = time.time()
        files: list[tuple[FileRecord, bytes]] = []
        thumb: str | None = None
        if checked.thumbnail is not None:
            thumb = hashlib.sha256(checked.thumbnail).hexdigest()
            w, h = _png_size(checked.thumbnail)
            files.append((FileRecord(thumb, "image/png", len(checked.thumbnail), "image", w, h,
                                     None, None, now), checked.thumbnail))
        files.append((FileRecord(sha, mime_type, len(blob), checked.kind, checked.width,
                                 checked.height, checked.pages, thumb, now), blob))
        async with self._storing:
            if self.on_disk:
                def write() -> None:
                    for f, data in files:
                        store.write_file(self.root, f.sha256, data)
                await asyncio.to_thread(write)
                await self.db.write(lambda tx: store.record(tx, [f for f, _ in files]))
                await asyncio.to_thread(store.drop_partial, self.root, sha)
            else:
                await self.db.write(lambda tx: store.pg_store(tx, files, sha))
        log.info("attachment %s stored (%s, %d bytes)", sha[:12], mime_type, len(blob))
        return files[-1][0]

    @contextlib.asynccontextmanager
    async def _lock(self, sha: str) -> AsyncIterator[None]:
        lock = self._locks.setdefault(sha, asyncio.Lock())
        try:
            async with lock:
                yield
        finally:
            if not lock.locked() and self._locks.get(sha) is lock:
                del self._locks[sha]

    # --- attachment.get ----------------------------------------------------------------

    async def get(self, params: AttachmentGetParams) -> AttachmentGetResult:
        """Bytes of a file (or thumbnail) a prompt of the session carries; -32004 for any
        other, held or not."""
        sid, sha, offset, limit = params.session_id, params.sha256, params.offset, params.limit

        def look(tx: Tx) -> tuple[FileRecord | None, bytes]:
            f = store.readable(tx, sid, sha)
            if f is None or self.on_disk or offset >= f.bytes:
                return f, b""
            return f, store.pg_read(tx, sha, offset, limit)

        found, data = await self.db.read(look)
        if found is None:
            raise NotFound("attachment", sha)
        if self.on_disk and offset < found.bytes:
            try:
                data = await asyncio.to_thread(store.read_file, self.root, sha, offset, limit)
            except FileNotFoundError:
                raise NotFound("attachment", sha) from None
        return AttachmentGetResult(sha256=sha, mime_type=found.mime_type, bytes=found.bytes,
                                   offset=offset, data=base64.b64encode(data).decode("ascii"),
                                   eof=offset + len(data) >= found.bytes)

    # --- garbage -----------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.create_task(self._collecting(), name="attachments-gc")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _collecting(self) -> None:
        while True:
            try:
                await self.collect()
            except StoreUnavailable as exc:  # the database is away (a restart): next round
                log.warning("attachments could not be collected: %s", exc.message)
            except Exception:
                logs.internal(log, "collecting attachments failed")
            await asyncio.sleep(COLLECT_EVERY_S)

    async def collect(self, now: float | None = None) -> int:
        """Removes files no admission names a day after they came, and uploads left as
        long; returns how many files and uploads went."""
        at = time.time() if now is None else now
        async with self._storing:
            gone = await self.db.write(lambda tx: store.collect(tx, at))
            if not self.on_disk:
                return len(gone) + await self.db.write(
                    lambda tx: store.pg_collect_partial(tx, at))
            await asyncio.to_thread(store.remove_files, self.root, gone)
            held_now = set(await self.db.read(
                lambda tx: [r[0] for r in tx.all("SELECT sha256 FROM attachments")]))
            strays = await asyncio.to_thread(store.stray_files, self.root, held_now, at)
            for path in strays:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
        if gone or strays:
            log.info("attachments: removed %d unused file(s), %d left upload(s)", len(gone),
                     len(strays))
        return len(gone) + len(strays)


def stored_file(f: FileRecord) -> StoredFile:
    return StoredFile(sha256=f.sha256, mime_type=f.mime_type, bytes=f.bytes,
                      kind=f.kind,  # type: ignore[arg-type]  # the table's CHECK holds it
                      width=f.width, height=f.height, pages=f.pages, thumbnail=f.thumbnail)


def _complete(f: FileRecord) -> AttachmentUploadResult:
    return AttachmentUploadResult(sha256=f.sha256, received=f.bytes, complete=True,
                                  file=stored_file(f))


def _decoded(data: str) -> bytes:
    too_big = InvalidParams("data", f"a chunk may have at most {_mib(MAX_CHUNK_BYTES)} "
                            "(decoded); send the file in more chunks")
    if len(data) > (MAX_CHUNK_BYTES + 2) // 3 * 4:  # before decoding it
        raise too_big
    try:
        chunk = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidParams("data", "data is not base64 (standard alphabet, padded)") from None
    if len(chunk) > MAX_CHUNK_BYTES:
        raise too_big
    return chunk


def _png_size(png: bytes) -> tuple[int, int]:
    """A PNG's width and height, from its IHDR chunk."""
    return int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")


def _mib(n: int) -> str:
    return f"{n // (1024 * 1024)} MiB"
