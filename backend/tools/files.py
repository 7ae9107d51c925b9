"""The file tools that read and change a file: read_file, write_file and patch.

Paths are relative to the session folder.  Each call resolves its path once,
into an open folder fd (see `beneath`), and reads and writes only through it:
a symlink swapped in meanwhile cannot redirect it.  Reads may go anywhere but
the sealed places (see `landing`); changes are guarded by `policy.file_guard`,
re-checked where they really land, checkpointed with the content read through
the same fd, and written atomically.  Disk work runs in a thread so the event
loop never waits on it.
"""

from __future__ import annotations

import asyncio
import io
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from backend.tools import fileio, policy
from backend.tools.base import Guard, ToolContext, ToolResult
from backend.tools.checkpoints import MAX_CHECKPOINT_BYTES
from backend.tools.filetool import (
    PATH,
    SEALED_NOTE,
    Target,
    error,
    ok,
    open_file,
    os_error,
    resolve,
    schema,
    text,
)
from shared.config import ApprovalMode

LINE_MAX_CHARS = 2_000
READ_MAX_CHARS = 100_000
DEFAULT_READ_LIMIT = 2_000

# What a change makes of the old content (None: no file yet): the new bytes and a few words
# on it for the summary, or the error that explains why not.
Edit = Callable[[bytes | None, str], tuple[bytes, str] | ToolResult]


class ReadFile:
    name = "read_file"
    description = (
        "Read a text file as numbered lines. Long files come in pages: pass offset (1-based line) "
        "and limit to read on. Lines longer than 2,000 characters are cut. Files outside the "
        "session folder may be read too. " + SEALED_NOTE
    )
    parameters = schema({
        "path": PATH,
        "offset": {"type": "integer", "description": "First line to show (1-based).", "default": 1},
        "limit": {"type": "integer", "description": "Most lines to show.", "default": DEFAULT_READ_LIMIT},
    }, ["path"])
    spill = False  # pages itself instead
    changes_files = False

    def summary(self, args: dict[str, Any]) -> str:
        return f"read {args.get('path', '')}"

    def guard(self, args: dict[str, Any], cwd: Path, mode: ApprovalMode, data_dir: Path) -> Guard | None:
        return policy.read_guard(str(args.get("path", "")), cwd, data_dir)  # never asks

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        offset = max(int(args.get("offset", 1)), 1)
        limit = max(int(args.get("limit", DEFAULT_READ_LIMIT)), 1)
        return await asyncio.to_thread(_read, str(args["path"]), ctx, offset, limit)


def _read(path: str, ctx: ToolContext, offset: int, limit: int) -> ToolResult:
    target = resolve(path, ctx, reading=True)
    if isinstance(target, ToolResult):
        return target
    with target.place:
        try:
            fd = open_file(target)
        except OSError as exc:
            return os_error(exc, target.label)
    with os.fdopen(fd, "rb") as f:
        try:
            head = f.read(fileio.SNIFF_BYTES)
            if fileio.is_binary(head):
                return error(f"binary file ({os.fstat(fd).st_size:,} bytes); not shown")
            f.seek(0)
            return _numbered(io.TextIOWrapper(f, encoding="utf-8", errors="replace"), target.label,
                             offset, limit)
        except OSError as exc:
            return os_error(exc, target.label)


def _numbered(f: io.TextIOWrapper, label: str, offset: int, limit: int) -> ToolResult:
    rows: list[str] = []
    size, seen, more = 0, 0, False
    for seen, (line, length) in enumerate(fileio.lines(f, LINE_MAX_CHARS), 1):
        if seen < offset:
            continue
        row = f"{seen:>6}\t{line}"
        if length > LINE_MAX_CHARS:
            row += f" [... line cut: {length:,} characters in all]"
        if len(rows) >= limit or (rows and size + len(row) + 1 > READ_MAX_CHARS):
            more = True
            break
        rows.append(row)
        size += len(row) + 1
    if not rows:
        note = f"(offset {offset} is past the end: the file has {seen} lines)" if seen else "(empty file)"
        return ok(note, f"read {label} ({seen} lines)")
    last = offset + len(rows) - 1
    if more:
        rows.append(f"[... more lines follow: call read_file with offset={last + 1} to read on]")
    return ok("\n".join(rows), f"read {label} (lines {offset}–{last})")


class _FileChange:
    """A tool that changes a file: asks by where the file really lands, checkpointed first."""

    spill = True
    changes_files = True
    name = ""
    verb = ""

    def summary(self, args: dict[str, Any]) -> str:
        return f"{self.verb} {args.get('path', '')}"

    def guard(self, args: dict[str, Any], cwd: Path, mode: ApprovalMode, data_dir: Path) -> Guard | None:
        return policy.file_guard(self.name, str(args.get("path", "")), cwd, mode, data_dir)

    async def change(self, path: str, ctx: ToolContext, edit: Edit, verb: str | None = None) -> ToolResult:
        """Resolve once, judge, read the old content, checkpoint it, then write atomically,
        all through one open folder fd; the result carries the diff."""
        opened = await asyncio.to_thread(_open_change, self.name, path, ctx)
        if isinstance(opened, ToolResult):
            return opened
        target, old = opened
        handed = False  # once a thread has the fd, it alone closes it (no reuse under its feet)
        try:
            planned = edit(old, target.label)
            if isinstance(planned, ToolResult):
                return planned
            data, what = planned
            if ctx.checkpoint is not None:
                try:  # before the write: the old content must be recoverable
                    await ctx.checkpoint(Path(target.landing.real), old)
                except OSError as exc:
                    return error(f"{os_error(exc, target.label).content}; not changed, since its old "
                                 "content could not be saved")
            handed = True
            created, diff = await asyncio.to_thread(_write, target, old, data)
        except OSError as exc:
            return os_error(exc, target.label)
        finally:
            if not handed:
                target.place.close()
        summary = f"{verb or ('created' if created else 'wrote')} {target.label} ({what})"
        return ok(summary, summary, diff=diff, created=created)

    async def remove(self, path: str, ctx: ToolContext) -> ToolResult:
        """Deletes a file as `change` writes one: resolved once, judged, its old content
        checkpointed (undo brings it back), then unlinked through the same folder fd."""
        opened = await asyncio.to_thread(_open_change, self.name, path, ctx)
        if isinstance(opened, ToolResult):
            return opened
        target, old = opened
        try:
            if old is None:
                return error(f"no such file or folder: {target.label}")
            if ctx.checkpoint is not None:
                await ctx.checkpoint(Path(target.landing.real), old)
            await asyncio.to_thread(os.unlink, target.place.name, dir_fd=target.place.dir_fd)
        except OSError as exc:
            return os_error(exc, target.label)
        finally:
            target.place.close()
        return ok(f"deleted {target.label}", f"deleted {target.label}",
                  diff=fileio.unified_diff(old, b"", target.label), created=False)


def _open_change(tool_name: str, path: str, ctx: ToolContext) -> tuple[Target, bytes | None] | ToolResult:
    """The target, judged again where it really lands now, and its old content."""
    target = resolve(path, ctx, reading=False)
    if isinstance(target, ToolResult):
        return target
    try:
        now = policy.change_guard(tool_name, target.landing, ctx.mode)
        if policy.still_allowed(now, ctx.approved):
            return target, _old_content(target)
        failed = error(_moved(target, ctx))
    except fileio.TooLarge as exc:
        failed = error(f"{exc.strerror} and was not checkpointed; not changed, since its old "
                       "content could not be saved")
    except OSError as exc:
        failed = os_error(exc, target.label)
    target.place.close()
    return failed


def _moved(target: Target, ctx: ToolContext) -> str:
    asked, where = fileio.display(Path(target.place.asked), ctx.cwd), target.landing.folder
    if ctx.approved is None:
        return (f"not changed: {asked} now leads outside the session folder (to {where}), "
                "which it did not when the call was checked (a symlink on the way changed)")
    return (f"not changed: {asked} now leads to {where}, not to {ctx.approved.rule_key} as "
            "when the call was approved (a symlink on the way changed)")


def _old_content(target: Target) -> bytes | None:
    try:
        fd = target.place.open(os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    return fileio.read_regular(fd, target.label, MAX_CHECKPOINT_BYTES)


def _write(target: Target, old: bytes | None, data: bytes) -> tuple[bool, str]:
    with target.place as place:
        place.make_folders()
        created = fileio.write_at(place.dir_fd, place.name, data)
    return created, fileio.unified_diff(old or b"", data, target.label)


def _count_lines(content: str) -> str:
    n = content.count("\n") + (1 if content and not content.endswith("\n") else 0)
    return f"{n} line{'s' if n != 1 else ''}"


class WriteFile(_FileChange):
    name = "write_file"
    verb = "write"
    description = (
        "Create a file or replace its whole content (parent folders are created). To change part "
        "of an existing file, prefer patch. Outside the session folder (also through a symlink) "
        "it asks the user first. " + SEALED_NOTE
    )
    parameters = schema({"path": PATH, "content": text("The complete new content.")}, ["path", "content"])

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        content = str(args["content"])

        def edit(old: bytes | None, label: str) -> tuple[bytes, str]:
            return content.encode("utf-8", "replace"), _count_lines(content)

        return await self.change(str(args["path"]), ctx, edit)


class Patch(_FileChange):
    name = "patch"
    verb = "patch"
    description = (
        "Replace an exact piece of text in a file. `old` must match the file exactly (whitespace "
        "and indentation included) and occur once, unless replace_all is true. Outside the "
        "session folder (also through a symlink) it asks the user first."
    )
    parameters = schema({
        "path": PATH,
        "old": text("The exact text to replace."),
        "new": text("The text to put in its place."),
        "replace_all": {"type": "boolean", "description": "Replace every occurrence.", "default": False},
    }, ["path", "old", "new"])

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        old, new = str(args["old"]), str(args["new"])
        if not old:
            return error("'old' must not be empty (write_file creates or replaces a whole file)")
        if old == new:
            return error("'old' and 'new' are the same; nothing to change")
        replace_all = bool(args.get("replace_all", False))

        def edit(data: bytes | None, label: str) -> tuple[bytes, str] | ToolResult:
            if data is None:
                return error(f"no such file or folder: {label}")
            if fileio.is_binary(data):
                return error(f"{label} is a binary file; patch edits text files only")
            content = data.decode("utf-8", "surrogateescape")  # bytes not UTF-8 survive untouched
            planned = _plan(content, old, new, replace_all, label)
            if isinstance(planned, ToolResult):
                return planned
            new_text, count = planned
            try:
                encoded = new_text.encode("utf-8", "surrogateescape")
            except UnicodeEncodeError:
                return error("'new' holds characters that cannot be written as UTF-8")
            return encoded, f"{count} replacement{'s' if count != 1 else ''}"

        return await self.change(str(args["path"]), ctx, edit, verb="patched")


def _plan(text: str, old: str, new: str, replace_all: bool, label: str) -> tuple[str, int] | ToolResult:
    """The new text and how many replacements, or the error that explains why not."""
    count = text.count(old)
    if count == 0 and "\r\n" in text and "\n" in old and "\r\n" not in old:
        old, new = old.replace("\n", "\r\n"), new.replace("\n", "\r\n")  # a CRLF file, LF text
        count = text.count(old)
    if count == 0:
        return error(
            f"'old' was not found in {label}; it must match exactly, whitespace and indentation "
            "included (read_file shows the current text)"
        )
    if count > 1 and not replace_all:
        return error(
            f"'old' occurs {count} times in {label}; include more surrounding lines to make it "
            f"unique, or set replace_all=true to replace all {count}"
        )
    return (text.replace(old, new) if replace_all else text.replace(old, new, 1)), count
