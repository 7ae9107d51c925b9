"""The file tools: read_file, write_file, patch, search_files and list_dir.

Paths are relative to the session folder.  Reads may go anywhere; changes are
guarded by `policy.file_guard`, checkpointed before they happen, and written
atomically.  Disk work runs in a thread so the event loop never waits on it.
"""

from __future__ import annotations

import asyncio
import os
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

from backend.tools import fileio, policy
from backend.tools.base import ApprovalMode, Guard, ToolContext, ToolResult

LINE_MAX_CHARS = 2_000
READ_MAX_CHARS = 100_000
DEFAULT_READ_LIMIT = 2_000
SEARCH_MAX_MATCHES = 200
SEARCH_MAX_CHARS = 50_000
SEARCH_MAX_FILE_BYTES = 2 * 1024 * 1024
SEARCH_SKIP_DIRS = frozenset({".git", "node_modules", "__pycache__", ".venv", ".hg", ".svn", ".mypy_cache"})
LIST_MAX_ENTRIES = 1_000


def _schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


def _str(description: str) -> dict[str, Any]:
    return {"type": "string", "description": description}


_PATH = _str("File path, relative to the session folder or absolute.")
_FOLDER = _str("Folder, relative to the session folder or absolute (default: the session folder).")


def _ok(content: str, summary: str, **meta: Any) -> ToolResult:
    return ToolResult("ok", content, summary, meta)


def _error(message: str) -> ToolResult:
    return ToolResult("error", message, message)


def _os_error(exc: OSError, label: str) -> ToolResult:
    """The failure in words the model can act on."""
    if isinstance(exc, FileNotFoundError):
        return _error(f"no such file or folder: {label}")
    if isinstance(exc, IsADirectoryError):
        return _error(f"{label} is a folder, not a file (list_dir shows what it holds)")
    if isinstance(exc, NotADirectoryError):
        return _error(f"{label}: a part of the path is a file, not a folder")
    if isinstance(exc, PermissionError):
        return _error(f"permission denied: {label}")
    return _error(f"{label}: {exc.strerror or exc}")


class _PathTool:
    """What the file tools share: a `path` argument resolved against the session folder."""

    verb = ""

    def summary(self, args: dict[str, Any]) -> str:
        return f"{self.verb} {args.get('path', '')}"

    def _target(self, args: dict[str, Any], ctx: ToolContext) -> tuple[Path, str] | ToolResult:
        """The resolved path and its label for messages, or the error result for a bad path."""
        try:
            target = policy.resolve_path(str(args["path"]), ctx.cwd)
        except policy.BadPath as exc:
            return _error(str(exc))
        return target, fileio.display(target, ctx.cwd)


class _FileChange(_PathTool):
    """A tool that changes a file: checkpointed first, and asks by where the file lands."""

    spill = True
    changes_files = True
    name = ""

    def guard(self, args: dict[str, Any], cwd: Path, mode: ApprovalMode) -> Guard | None:
        return policy.file_guard(self.name, str(args.get("path", "")), cwd, mode)


class ReadFile(_PathTool):
    name = "read_file"
    description = (
        "Read a text file as numbered lines. Long files come in pages: pass offset (1-based line) "
        "and limit to read on. Lines longer than 2,000 characters are cut."
    )
    parameters = _schema({
        "path": _PATH,
        "offset": {"type": "integer", "description": "First line to show (1-based).", "default": 1},
        "limit": {"type": "integer", "description": "Most lines to show.", "default": DEFAULT_READ_LIMIT},
    }, ["path"])
    spill = False  # pages itself instead
    changes_files = False
    verb = "read"

    def guard(self, args: dict[str, Any], cwd: Path, mode: ApprovalMode) -> Guard | None:
        return None  # reading never asks, inside or outside the session folder

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        resolved = self._target(args, ctx)
        if isinstance(resolved, ToolResult):
            return resolved
        target, label = resolved
        offset = max(int(args.get("offset", 1)), 1)
        limit = max(int(args.get("limit", DEFAULT_READ_LIMIT)), 1)
        try:
            return await asyncio.to_thread(_read_numbered, target, label, offset, limit)
        except OSError as exc:
            return _os_error(exc, label)


def _read_numbered(target: Path, label: str, offset: int, limit: int) -> ToolResult:
    if target.is_dir():
        raise IsADirectoryError(target)
    if fileio.is_binary(fileio.sniff(target)):
        return _error(f"binary file ({target.stat().st_size:,} bytes); not shown")
    rows: list[str] = []
    size, seen, more = 0, 0, False
    with target.open(encoding="utf-8", errors="replace") as f:
        for seen, (text, length) in enumerate(fileio.lines(f, LINE_MAX_CHARS), 1):
            if seen < offset:
                continue
            row = f"{seen:>6}\t{text}"
            if length > LINE_MAX_CHARS:
                row += f" [... line cut: {length:,} characters in all]"
            if len(rows) >= limit or (rows and size + len(row) + 1 > READ_MAX_CHARS):
                more = True
                break
            rows.append(row)
            size += len(row) + 1
    if not rows:
        note = f"(offset {offset} is past the end: the file has {seen} lines)" if seen else "(empty file)"
        return _ok(note, f"read {label} ({seen} lines)")
    last = offset + len(rows) - 1
    if more:
        rows.append(f"[... more lines follow: call read_file with offset={last + 1} to read on]")
    return _ok("\n".join(rows), f"read {label} (lines {offset}–{last})")


class WriteFile(_FileChange):
    name = "write_file"
    verb = "write"
    description = (
        "Create a file or replace its whole content (parent folders are created). To change part "
        "of an existing file, prefer patch."
    )
    parameters = _schema({"path": _PATH, "content": _str("The complete new content.")}, ["path", "content"])

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        resolved = self._target(args, ctx)
        if isinstance(resolved, ToolResult):
            return resolved
        target, label = resolved
        content = str(args["content"])
        if await asyncio.to_thread(target.is_dir):
            return _os_error(IsADirectoryError(), label)
        return await _change(ctx, target, label, content.encode("utf-8", "replace"), _count_lines(content))


async def _change(
    ctx: ToolContext, target: Path, label: str, data: bytes, what: str, verb: str | None = None
) -> ToolResult:
    """Checkpoint, then write atomically; the result carries the diff."""
    if ctx.checkpoint is not None:
        try:
            await ctx.checkpoint(target)  # before the write: the old content must be recoverable
        except OSError as exc:  # unreadable (a symlink loop, permissions) or too large to keep
            failed = _os_error(exc, label)
            return _error(f"{failed.content}; not changed, since its old content could not be saved")
    try:
        created, diff = await asyncio.to_thread(_write_with_diff, target, label, data)
    except OSError as exc:
        return _os_error(exc, label)
    summary = f"{verb or ('created' if created else 'wrote')} {label} ({what})"
    return _ok(summary, summary, diff=diff, created=created)


def _write_with_diff(target: Path, label: str, data: bytes) -> tuple[bool, str]:
    old = fileio.read_old(target)
    created = fileio.write_atomic(target, data)
    return created, fileio.unified_diff(old or b"", data, label)


def _count_lines(text: str) -> str:
    n = text.count("\n") + (1 if text and not text.endswith("\n") else 0)
    return f"{n} line{'s' if n != 1 else ''}"


class Patch(_FileChange):
    name = "patch"
    verb = "patch"
    description = (
        "Replace an exact piece of text in a file. `old` must match the file exactly (whitespace "
        "and indentation included) and occur once, unless replace_all is true."
    )
    parameters = _schema({
        "path": _PATH,
        "old": _str("The exact text to replace."),
        "new": _str("The text to put in its place."),
        "replace_all": {"type": "boolean", "description": "Replace every occurrence.", "default": False},
    }, ["path", "old", "new"])

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        resolved = self._target(args, ctx)
        if isinstance(resolved, ToolResult):
            return resolved
        target, label = resolved
        old, new = str(args["old"]), str(args["new"])
        if not old:
            return _error("'old' must not be empty (write_file creates or replaces a whole file)")
        if old == new:
            return _error("'old' and 'new' are the same; nothing to change")
        try:
            data = await asyncio.to_thread(target.read_bytes)
        except OSError as exc:
            return _os_error(exc, label)
        if fileio.is_binary(data):
            return _error(f"{label} is a binary file; patch edits text files only")
        text = data.decode("utf-8", "surrogateescape")  # bytes that are not UTF-8 survive untouched
        planned = _plan(text, old, new, bool(args.get("replace_all", False)), label)
        if isinstance(planned, ToolResult):
            return planned
        new_text, count = planned
        try:
            encoded = new_text.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:
            return _error("'new' holds characters that cannot be written as UTF-8")
        what = f"{count} replacement{'s' if count != 1 else ''}"
        return await _change(ctx, target, label, encoded, what, verb="patched")


def _plan(text: str, old: str, new: str, replace_all: bool, label: str) -> tuple[str, int] | ToolResult:
    """The new text and how many replacements, or the error that explains why not."""
    count = text.count(old)
    if count == 0 and "\r\n" in text and "\n" in old and "\r\n" not in old:
        old, new = old.replace("\n", "\r\n"), new.replace("\n", "\r\n")  # a CRLF file, LF text
        count = text.count(old)
    if count == 0:
        return _error(
            f"'old' was not found in {label}; it must match exactly, whitespace and indentation "
            "included (read_file shows the current text)"
        )
    if count > 1 and not replace_all:
        return _error(
            f"'old' occurs {count} times in {label}; include more surrounding lines to make it "
            f"unique, or set replace_all=true to replace all {count}"
        )
    return (text.replace(old, new) if replace_all else text.replace(old, new, 1)), count


class SearchFiles:
    name = "search_files"
    description = (
        "Search text files under a folder with a Python regular expression; returns "
        "`path:line: text` for each matching line (capped). Skips binary files, .git, "
        "node_modules, __pycache__, .venv and files over 2 MB."
    )
    parameters = _schema({
        "pattern": _str("Python regular expression, searched in each line."),
        "path": _str("Folder (or file) to search, relative to the session folder. Default: the session "
                     "folder."),
        "glob": _str("Only files whose name (or relative path, when it has a /) matches, e.g. *.py."),
    }, ["pattern"])
    spill = True
    changes_files = False

    def summary(self, args: dict[str, Any]) -> str:
        return f"search /{args.get('pattern', '')}/ in {args.get('path') or '.'}"

    def guard(self, args: dict[str, Any], cwd: Path, mode: ApprovalMode) -> Guard | None:
        return None

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        pattern = str(args["pattern"])
        try:
            regex = re.compile(pattern)
        except re.error as exc:
            return _error(f"invalid regular expression {pattern!r}: {exc}")
        try:
            root = policy.resolve_path(str(args.get("path") or "."), ctx.cwd)
        except policy.BadPath as exc:
            return _error(str(exc))
        label = fileio.display(root, ctx.cwd)
        if not await asyncio.to_thread(root.exists):
            return _error(f"no such file or folder: {label}")
        search = _Search(regex, root, ctx.cwd, args.get("glob") or None)
        try:
            await asyncio.to_thread(search.run)
        except asyncio.CancelledError:
            search.stop.set()  # the thread cannot be cancelled; it checks this between files
            raise
        if not search.lines:
            return _ok(f"no matches for {pattern!r} in {label}", f"no matches in {label}")
        body = "\n".join(search.lines)
        if search.capped:
            body += (f"\n[capped at {len(search.lines)} matches; narrow the pattern, path or glob "
                     "to see the rest]")
        return _ok(body, f"{len(search.lines)}{'+' if search.capped else ''} matches in {label}")


@dataclass
class _Search:
    """One search, run in a worker thread; `stop` ends it between files."""

    regex: re.Pattern[str]
    root: Path
    cwd: Path
    glob: str | None
    lines: list[str] = field(default_factory=list)
    capped: bool = False
    stop: threading.Event = field(default_factory=threading.Event)
    _chars: int = 0

    def run(self) -> None:
        for path in self._files():
            if self.stop.is_set() or self.capped:
                return
            self._search_file(path)

    def _files(self) -> Iterator[Path]:
        if self.root.is_file():
            yield self.root
            return
        for folder, dirs, names in os.walk(self.root):
            dirs[:] = sorted(d for d in dirs if d not in SEARCH_SKIP_DIRS)
            for name in sorted(names):
                path = Path(folder, name)
                if self.glob is None or self._glob_matches(path):
                    yield path

    def _glob_matches(self, path: Path) -> bool:
        assert self.glob is not None
        if "/" not in self.glob:
            return fnmatch(path.name, self.glob)
        # A path pattern may be written from the searched folder or from the session folder.
        for rel in (path.relative_to(self.root).as_posix(), fileio.display(path, self.cwd)):
            if fnmatch(rel, self.glob) or fnmatch(rel, self.glob.replace("**/", "")):
                return True
        return False

    def _search_file(self, path: Path) -> None:
        try:
            if not path.is_file() or path.stat().st_size > SEARCH_MAX_FILE_BYTES:
                return
            data = path.read_bytes()
        except OSError:
            return
        if fileio.is_binary(data):
            return
        label = fileio.display(path, self.cwd)
        for n, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
            if self.regex.search(line):
                row = f"{label}:{n}: {line[:500]}"
                if len(self.lines) >= SEARCH_MAX_MATCHES or self._chars + len(row) > SEARCH_MAX_CHARS:
                    self.capped = True
                    return
                self.lines.append(row)
                self._chars += len(row) + 1


class ListDir:
    name = "list_dir"
    description = "List a folder: entries sorted with folders first, each with its kind and size."
    parameters = _schema({"path": _FOLDER}, [])
    spill = True
    changes_files = False

    def summary(self, args: dict[str, Any]) -> str:
        return f"list {args.get('path') or '.'}"

    def guard(self, args: dict[str, Any], cwd: Path, mode: ApprovalMode) -> Guard | None:
        return None

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        try:
            root = policy.resolve_path(str(args.get("path") or "."), ctx.cwd)
        except policy.BadPath as exc:
            return _error(str(exc))
        label = fileio.display(root, ctx.cwd)
        try:
            rows = await asyncio.to_thread(_list, root)
        except OSError as exc:
            return _os_error(exc, label)
        total = len(rows)
        if total > LIST_MAX_ENTRIES:
            rows = [*rows[:LIST_MAX_ENTRIES], f"[... {total - LIST_MAX_ENTRIES:,} more entries not shown]"]
        return _ok("\n".join(rows) or "(empty folder)", f"{total} entries in {label}")


def _list(root: Path) -> list[str]:
    entries: list[tuple[bool, str, str]] = []
    with os.scandir(root) as it:
        for entry in it:
            entries.append((not _is_real_dir(entry), entry.name.lower(), _describe(entry)))
    return [row for _, _, row in sorted(entries)]


def _is_real_dir(entry: os.DirEntry[str]) -> bool:
    return entry.is_dir(follow_symlinks=False)


def _describe(entry: os.DirEntry[str]) -> str:
    try:
        if entry.is_symlink():
            return f"link  {entry.name} -> {os.readlink(entry.path)}"
        if entry.is_dir():
            return f"dir   {entry.name}/"
        if entry.is_file():
            return f"file  {entry.name}  ({entry.stat().st_size:,} bytes)"
    except OSError:
        pass
    return f"other {entry.name}"
