"""Blocking file helpers for the file tools: sniffing, bounded line reading, atomic writes, diffs.

Everything here blocks; the tools call it through `asyncio.to_thread`.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from backend.host import user_umask

SNIFF_BYTES = 8192
DIFF_MAX_CHARS = 20_000
DIFF_INPUT_MAX_BYTES = 2 * 1024 * 1024




def is_binary(head: bytes) -> bool:
    """A NUL byte in the first bytes: what git and grep call binary."""
    return b"\0" in head[:SNIFF_BYTES]


def sniff(path: Path) -> bytes:
    with path.open("rb") as f:
        return f.read(SNIFF_BYTES)


def lines(f: IO[str], keep: int) -> Iterator[tuple[str, int]]:
    """Each line's first `keep` characters (without its newline) and its full length, reading
    at most a chunk at a time, so one enormous line never sits in memory."""
    while True:
        piece = f.readline(keep + 1)
        if not piece:
            return
        shown = _chomp(piece)[:keep]
        length = len(_chomp(piece))
        while not piece.endswith("\n"):
            piece = f.readline(1024 * 1024)
            if not piece:
                break
            length += len(_chomp(piece))
        yield shown, length


def _chomp(text: str) -> str:
    return text[:-1] if text.endswith("\n") else text


def write_atomic(target: Path, data: bytes) -> bool:
    """Replaces target with data through a temporary file in the same folder (readers see the
    old or the new file, never half of one), keeping an existing file's permissions and
    creating missing parent folders.  Returns True when the file did not exist before."""
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = stat.S_IMODE(target.stat().st_mode)
        created = False
    except FileNotFoundError:
        mode = 0o666 & ~user_umask()  # the user's umask, not the backend's private one
        created = True
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return created


def read_old(target: Path) -> bytes | None:
    """The file's bytes, None when it does not exist (a folder raises IsADirectoryError)."""
    try:
        return target.read_bytes()
    except FileNotFoundError:
        return None


def unified_diff(old: bytes, new: bytes, label: str) -> str:
    """A unified diff for people (decoding errors replaced), cut at DIFF_MAX_CHARS."""
    if len(old) + len(new) > DIFF_INPUT_MAX_BYTES:
        return "(no diff: the file is larger than 2 MB)"
    if is_binary(old) or is_binary(new):
        return "(no diff: binary content)"
    before = old.decode("utf-8", "replace").splitlines(keepends=True)
    after = new.decode("utf-8", "replace").splitlines(keepends=True)
    out: list[str] = []
    size = 0
    for line in difflib.unified_diff(before, after, f"a/{label}", f"b/{label}"):
        if not line.endswith("\n"):
            line += "\n\\ No newline at end of file\n"
        if size + len(line) > DIFF_MAX_CHARS:
            out.append("[... diff cut ...]\n")
            break
        out.append(line)
        size += len(line)
    return "".join(out)


def display(path: Path, cwd: Path) -> str:
    """The path relative to the session folder when inside it, else absolute."""
    try:
        return str(path.relative_to(cwd.resolve())) or "."
    except ValueError:
        return str(path)
