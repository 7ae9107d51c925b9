"""Blocking file helpers for the file tools: sniffing, bounded line reading, atomic writes, diffs.

Everything here blocks; the tools call it through `asyncio.to_thread`.  Files are
reached through open fds (see `beneath`), never by a path resolved again.
"""

from __future__ import annotations

import contextlib
import difflib
import errno
import os
import secrets
import stat
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


def write_at(dir_fd: int, name: str, data: bytes) -> bool:
    """Replaces `name` in the open folder `dir_fd` with data through a temporary file in the
    same folder (readers see the old or the new file, never half of one), keeping an
    existing file's permissions.  Nothing is resolved by path: a symlink put at `name` is
    replaced, never followed.  Returns True when no file was there before."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        st = None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), name)
    # A file keeps its permissions; a new one gets the user's umask, not the backend's private one.
    kept = st is not None and stat.S_ISREG(st.st_mode)
    mode = stat.S_IMODE(st.st_mode) if kept and st is not None else 0o666 & ~user_umask()
    tmp = f".{name[:200]}.{secrets.token_hex(4)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                 dir_fd=dir_fd)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
            os.fchmod(f.fileno(), mode)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise
    return st is None


def read_regular(fd: int, label: str, limit: int) -> bytes:
    """All of an open file that must be a regular file of at most `limit` bytes; closes fd."""
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        check_regular(st, label)
        if st.st_size > limit:
            raise TooLarge(errno.EFBIG, f"{label} is over {limit // 2**20} MiB", label)
        return f.read()


def check_regular(st: os.stat_result, label: str) -> None:
    """Raises unless `st` is a regular file: a folder, or a device, pipe or socket (which could
    block a read forever or never end)."""
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), label)
    if not stat.S_ISREG(st.st_mode):
        raise OSError(errno.EINVAL, "not a regular file (a device, pipe or socket)", label)


class TooLarge(OSError):
    """A file over the size a tool reads whole."""


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
