"""The file tools that look through folders: search_files and list_dir.

The folder is resolved once (see `beneath`) and read through its fd: a search
walks it with `os.fwalk`, which opens each subfolder relative to the one
before without following symlinks, and opens each file the same way.  The
data folder is skipped wherever it is met (say, under a session folder that
is the home folder), and so are sealed files (see `landing`).
"""

from __future__ import annotations

import asyncio
import os
import re
import stat
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

from backend.tools import fileio, policy
from backend.tools.base import Guard, ToolContext, ToolResult
from backend.tools.filetool import (
    FOLDER,
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
from backend.tools.landing import Seal
from shared.config import ApprovalMode

SEARCH_MAX_MATCHES = 200
SEARCH_MAX_CHARS = 50_000
SEARCH_MAX_FILE_BYTES = 2 * 1024 * 1024
SEARCH_SKIP_DIRS = frozenset({".git", "node_modules", "__pycache__", ".venv", ".hg", ".svn", ".mypy_cache"})
LIST_MAX_ENTRIES = 1_000
HIDDEN_NOTE = "[Turnkey's data folder is here too; not shown, since no tool reads it]"


class _FolderReader:
    """What the two folder tools share: they read (under the read guard of their `path`,
    the session folder by default) and change nothing; long output spills to a file."""

    spill = True
    changes_files = False

    def guard(self, args: dict[str, Any], cwd: Path, mode: ApprovalMode, data_dir: Path) -> Guard | None:
        return policy.read_guard(str(args.get("path") or "."), cwd, data_dir)


class SearchFiles(_FolderReader):
    name = "search_files"
    description = (
        "Search text files under a folder with a Python regular expression; returns "
        "`path:line: text` for each matching line (capped). Skips binary files, symlinks, .git, "
        "node_modules, __pycache__, .venv and files over 2 MB. " + SEALED_NOTE
    )
    parameters = schema({
        "pattern": text("Python regular expression, searched in each line."),
        "path": text("Folder (or file) to search, relative to the session folder. Default: the session "
                     "folder."),
        "glob": text("Only files whose name (or relative path, when it has a /) matches, e.g. *.py."),
    }, ["pattern"])

    def summary(self, args: dict[str, Any]) -> str:
        return f"search /{args.get('pattern', '')}/ in {args.get('path') or '.'}"

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        pattern = str(args["pattern"])
        try:
            regex = re.compile(pattern)
        except re.error as exc:
            return error(f"invalid regular expression {pattern!r}: {exc}")
        target = await asyncio.to_thread(resolve, str(args.get("path") or "."), ctx, reading=True)
        if isinstance(target, ToolResult):
            return target
        if target.place.missing:
            target.place.close()
            return error(f"no such file or folder: {target.label}")
        search = _Search(regex, target, ctx.cwd, args.get("glob") or None)
        try:
            await asyncio.to_thread(search.run)  # it closes the target's fd when done
        except asyncio.CancelledError:
            search.stop.set()  # the thread cannot be cancelled; it checks this between files
            raise
        label = target.label
        if search.failure is not None:
            return search.failure
        if not search.lines:
            return ok(f"no matches for {pattern!r} in {label}", f"no matches in {label}")
        body = "\n".join(search.lines)
        if search.capped:
            body += (f"\n[capped at {len(search.lines)} matches; narrow the pattern, path or glob "
                     "to see the rest]")
        return ok(body, f"{len(search.lines)}{'+' if search.capped else ''} matches in {label}")


@dataclass
class _Search:
    """One search, run in a worker thread; `stop` ends it between files."""

    regex: re.Pattern[str]
    target: Target
    cwd: Path
    glob: str | None
    lines: list[str] = field(default_factory=list)
    capped: bool = False
    failure: ToolResult | None = None
    stop: threading.Event = field(default_factory=threading.Event)
    _chars: int = 0

    def run(self) -> None:
        with self.target.place:
            if self.target.place.name:  # a file
                try:
                    self._search_fd(open_file(self.target), self.target.label)
                except OSError as exc:
                    self.failure = os_error(exc, self.target.label)
                return
            for fd, label in self._files():
                if self.stop.is_set() or self.capped:
                    os.close(fd)
                    return
                self._search_fd(fd, label)

    def _files(self) -> Iterator[tuple[int, str]]:
        """Each file to search, opened, and its label; the data folder and sealed files skipped."""
        place, seal = self.target.place, self.target.seal
        top = place.open(os.O_RDONLY | os.O_DIRECTORY)
        try:
            for folder, dirs, names, dir_fd in os.fwalk(".", dir_fd=top):
                if seal.hides(os.fstat(dir_fd)):  # the folder fwalk really opened
                    dirs[:] = []
                    continue
                dirs[:] = sorted(d for d in dirs if d not in SEARCH_SKIP_DIRS)
                for name in sorted(names):
                    rel = os.path.normpath(os.path.join(folder, name))
                    real = os.path.join(place.real, rel)
                    if seal.why(real, reading=True) is not None or not self._glob_matches(rel, real):
                        continue
                    fd = _open_at(dir_fd, name, seal)
                    if fd >= 0:
                        yield fd, fileio.display(Path(real), self.cwd)
        finally:
            os.close(top)

    def _glob_matches(self, rel: str, real: str) -> bool:
        if self.glob is None:
            return True
        if "/" not in self.glob:
            return fnmatch(os.path.basename(rel), self.glob)
        # A path pattern may be written from the searched folder or from the session folder.
        for path in (rel, fileio.display(Path(real), self.cwd)):
            if fnmatch(path, self.glob) or fnmatch(path, self.glob.replace("**/", "")):
                return True
        return False

    def _search_fd(self, fd: int, label: str) -> None:
        with os.fdopen(fd, "rb") as f:
            if os.fstat(fd).st_size > SEARCH_MAX_FILE_BYTES:
                return
            try:
                data = f.read()
            except OSError:
                return
        if fileio.is_binary(data):
            return
        for n, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
            if self.regex.search(line):
                row = f"{label}:{n}: {line[:500]}"
                if len(self.lines) >= SEARCH_MAX_MATCHES or self._chars + len(row) > SEARCH_MAX_CHARS:
                    self.capped = True
                    return
                self.lines.append(row)
                self._chars += len(row) + 1


def _open_at(dir_fd: int, name: str, seal: Seal) -> int:
    """A regular file of the folder, opened without following a symlink; -1 to skip it."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError:
        return -1  # a symlink, unreadable, gone
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or seal.linked(st):
        os.close(fd)
        return -1
    return fd


class ListDir(_FolderReader):
    name = "list_dir"
    description = (
        "List a folder: entries sorted with folders first, each with its kind and size. Turnkey's "
        "own data folder is left out wherever it is."
    )
    parameters = schema({"path": FOLDER}, [])

    def summary(self, args: dict[str, Any]) -> str:
        return f"list {args.get('path') or '.'}"

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return await asyncio.to_thread(_list_dir, str(args.get("path") or "."), ctx)


def _list_dir(path: str, ctx: ToolContext) -> ToolResult:
    target = resolve(path, ctx, reading=True)
    if isinstance(target, ToolResult):
        return target
    with target.place as place:
        try:
            fd = place.open(os.O_RDONLY | os.O_DIRECTORY)
        except NotADirectoryError:
            return error(f"{target.label} is a file, not a folder (read_file reads it)")
        except OSError as exc:
            return os_error(exc, target.label)
    try:
        rows, hidden = _list(fd, target.seal)
    except OSError as exc:
        return os_error(exc, target.label)
    finally:
        os.close(fd)
    total = len(rows)
    if total > LIST_MAX_ENTRIES:
        rows = [*rows[:LIST_MAX_ENTRIES], f"[... {total - LIST_MAX_ENTRIES:,} more entries not shown]"]
    if hidden:
        rows.append(HIDDEN_NOTE)
    return ok("\n".join(rows) or "(empty folder)", f"{total} entries in {target.label}")


def _list(fd: int, seal: Seal) -> tuple[list[str], bool]:
    """The folder's entries described and sorted, and whether the data folder was left out."""
    entries: list[tuple[bool, str, str]] = []
    hidden = False
    with os.scandir(fd) as it:
        for entry in it:
            is_dir = entry.is_dir(follow_symlinks=False)
            if is_dir and seal.hides(entry.stat(follow_symlinks=False)):
                hidden = True
                continue
            entries.append((not is_dir, entry.name.lower(), _describe(entry, fd)))
    return [row for _, _, row in sorted(entries)], hidden


def _describe(entry: os.DirEntry[str], fd: int) -> str:
    try:
        if entry.is_symlink():
            return f"link  {entry.name} -> {os.readlink(entry.name, dir_fd=fd)}"
        if entry.is_dir():
            return f"dir   {entry.name}/"
        if entry.is_file():
            return f"file  {entry.name}  ({entry.stat().st_size:,} bytes)"
    except OSError:
        pass
    return f"other {entry.name}"
