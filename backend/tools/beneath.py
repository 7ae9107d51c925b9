"""Resolving a file tool's path once, into an open folder fd, so that no symlink redirects it later.

A path string handed to `open()` twice may lead to two places: a process can
swap a symlink in between.  So the file tools resolve a path exactly once,
here, into a `Place`: an O_PATH fd of the folder the path lands in, the name
in that folder, and the folder's real path.  Callers judge the real path
(inside the session folder? the data folder?) and then touch the file only
through the fd (`openat`, `mkdirat`, `renameat`), so what was judged is what
is touched, whatever happens to the path meanwhile.

Folders are opened with the kernel's openat2 (Linux 5.6+): first with
RESOLVE_BENEATH from the session folder when the path lies under it, then,
if that leaves it, from / with RESOLVE_NO_MAGICLINKS; the fd's real path
comes from /proc/self/fd.  Without openat2 (or /proc) a walk opens one
component at a time with O_NOFOLLOW from a held folder fd, reading each
symlink itself.  The last component is never followed blindly: a symlink
there is read and its target resolved the same way.

Links below /proc/<pid>/ (cwd, root, exe, fd/N, ...) are "magic": they lead
into another process's view of the files, bypassing any check on the path,
and are refused.  Linux only (O_PATH).
"""

from __future__ import annotations

import ctypes
import errno
import os
import re
import stat
from dataclasses import dataclass
from types import TracebackType

MAX_HOPS = 40  # symlinks followed in one resolution, as the kernel allows
AT_FDCWD = -100
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_BENEATH = 0x08
_SYS_OPENAT2 = 437  # the same number on every architecture Linux added it to at once
_DIR = os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC
_EAGAIN_TRIES = 20
_PROC_PID = re.compile(r"/proc/\d+(/.*)?")


class MagicLink(OSError):
    """The path goes through a link below /proc/<pid>/; refused, never followed."""


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


_libc = ctypes.CDLL(None, use_errno=True)
_kernel: bool | None = None  # openat2 and /proc/self/fd work here; None: not probed yet


def openat2(dir_fd: int, path: str, flags: int, resolve: int) -> int:
    """The openat2 system call; raises OSError like os.open (ENOSYS before Linux 5.6)."""
    how = _OpenHow(flags, 0, resolve)
    for _ in range(_EAGAIN_TRIES):  # EAGAIN: a rename or mount raced a `..`; the kernel asks to retry
        fd = int(_libc.syscall(ctypes.c_long(_SYS_OPENAT2), ctypes.c_long(dir_fd), os.fsencode(path),
                               ctypes.byref(how), ctypes.c_size_t(ctypes.sizeof(how))))
        if fd >= 0:
            return fd
        err = ctypes.get_errno()
        if err != errno.EAGAIN:
            break
    raise OSError(err, os.strerror(err), path)


def kernel_resolves() -> bool:
    """Whether openat2 and /proc/self/fd are there (probed once); tests may set `_kernel`."""
    global _kernel
    if _kernel is None:
        try:
            os.close(openat2(AT_FDCWD, "/", _DIR, RESOLVE_NO_MAGICLINKS))
            _kernel = os.path.isdir("/proc/self/fd")
        except OSError:  # ENOSYS on old kernels; EPERM under some seccomp filters
            _kernel = False
    return _kernel


@dataclass
class Place:
    """Where a path leads, resolved once.  `dir_fd` (owned: close it, or use `with`) is the
    deepest existing folder on the way, `real_dir` its real path; `missing` are folders below
    it that do not exist yet; `name` is the last component, never a symlink when resolved
    and perhaps not existing ("" when the path is the folder itself).  `asked` is the path as
    given, made absolute."""

    dir_fd: int
    real_dir: str
    missing: tuple[str, ...]
    name: str
    asked: str

    @property
    def folder(self) -> str:
        """The real path of the folder the file is (or will be) in."""
        return os.path.join(self.real_dir, *self.missing)

    @property
    def real(self) -> str:
        return os.path.join(self.folder, self.name) if self.name else self.folder

    def open(self, flags: int, mode: int = 0o600) -> int:
        """Opens the name in the folder, never through a symlink put there since."""
        if self.missing:
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", self.real)
        if not self.name:
            return os.open(".", flags | os.O_CLOEXEC, mode, dir_fd=self.dir_fd)
        return os.open(self.name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=self.dir_fd)

    def make_folders(self) -> None:
        """Creates the missing folders, each inside the one before (a symlink that appears at
        one of their names meanwhile fails the call rather than being followed)."""
        for name in self.missing:
            try:
                os.mkdir(name, 0o777, dir_fd=self.dir_fd)
            except FileExistsError:
                pass  # made meanwhile: opened without following below, so it must be a folder
            try:
                fd = os.open(name, _DIR | os.O_NOFOLLOW, dir_fd=self.dir_fd)
            except (NotADirectoryError, OSError) as exc:
                if exc.errno not in (errno.ENOTDIR, errno.ELOOP):
                    raise
                raise OSError(errno.ELOOP, f"{name} became a symlink or a file while its folder was "
                              "being made; not followed", self.real) from exc
            os.close(self.dir_fd)
            self.dir_fd, self.real_dir = fd, os.path.join(self.real_dir, name)
        self.missing = ()

    def close(self) -> None:
        if self.dir_fd >= 0:
            os.close(self.dir_fd)
            self.dir_fd = -1

    def __enter__(self) -> Place:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def locate(path: str, cwd: str, *, follow: bool = True) -> Place:
    """Resolves `path` (absolute, or relative to the folder `cwd`) once.  `follow=False`
    refuses every symlink on the way (ELOOP), for a path that was already real."""
    cwd = os.path.abspath(cwd)
    target = asked = os.path.join(cwd, path)
    for _ in range(MAX_HOPS + 1):
        head, name = os.path.split(target)
        if name in ("", ".", ".."):
            fd, real = open_dir(target, cwd, follow=follow)
            return Place(fd, real, (), "", asked)
        fd, real, missing = _open_deepest(head, cwd, follow)
        try:
            found = _look(fd, real, missing[0] if missing else name)
        except BaseException:
            os.close(fd)
            raise
        if isinstance(found, int):
            os.close(fd)
            if not missing:  # the path names a folder
                return Place(found, os.path.join(real, name), (), "", asked)
            os.close(found)  # a missing folder was made meanwhile: resolve again
            continue
        if found is None:
            if ".." in missing:
                os.close(fd)
                raise FileNotFoundError(errno.ENOENT, "No such file or directory", target)
            return Place(fd, real, tuple(m for m in missing if m != "."), name, asked)
        os.close(fd)
        if not follow:
            raise OSError(errno.ELOOP, "a part of the path is a symbolic link", target)
        rest = (*missing[1:], name) if missing else ()
        target = os.path.join(real, found, *rest)
    raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), path)


def _look(dir_fd: int, real_dir: str, name: str) -> str | int | None:
    """What `name` is in the folder: None (absent, or not a folder nor a link: a file),
    a symlink's target, or an O_PATH fd of the folder it is."""
    try:
        fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISLNK(mode):
            _refuse_magic(real_dir)
            return os.readlink("", dir_fd=fd)  # this link, the one just opened
        if stat.S_ISDIR(mode):
            keep, fd = fd, -1
            return keep
        return None
    finally:
        if fd >= 0:
            os.close(fd)


def _open_deepest(head: str, cwd: str, follow: bool) -> tuple[int, str, tuple[str, ...]]:
    """The deepest existing folder of `head` and the components below it that are missing."""
    missing: list[str] = []
    while True:
        try:
            fd, real = open_dir(head, cwd, follow=follow)
            return fd, real, tuple(reversed(missing))
        except FileNotFoundError:
            parent, last = os.path.split(head)
            if parent == head:
                raise
            if last:
                missing.append(last)
            head = parent


def open_dir(path: str, cwd: str, *, follow: bool = True) -> tuple[int, str]:
    """An O_PATH fd of the folder the absolute `path` leads to, and its real path."""
    if kernel_resolves():
        try:
            return _open_dir_kernel(path, cwd, follow)
        except OSError as exc:
            if exc.errno != errno.ELOOP:
                raise
            # A loop, a magic link or (follow=False) any link: the walk says which; it never
            # opens a magic link, so it is safe to let it try.
            fd, _ = _walk(path, follow)
            os.close(fd)
            raise
    return _walk(path, follow)


def _open_dir_kernel(path: str, cwd: str, follow: bool) -> tuple[int, str]:
    fd = -1
    if not follow:
        fd = openat2(AT_FDCWD, path, _DIR, RESOLVE_NO_SYMLINKS)
    elif path == cwd or path.startswith(cwd.rstrip("/") + "/"):
        # Under the session folder the kernel keeps the lookup inside it; a path that
        # leaves (a symlink out, `..`) is resolved again from / below, and judged by where it lands.
        base = os.open(cwd, _DIR)
        try:
            rel = path[len(cwd):].lstrip("/") or "."  # not relpath: `..` must stay for the kernel
            fd = openat2(base, rel, _DIR, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)
        except OSError as exc:
            if exc.errno != errno.EXDEV:
                raise
        finally:
            os.close(base)
    if fd < 0:
        fd = openat2(AT_FDCWD, path, _DIR, RESOLVE_NO_MAGICLINKS)
    try:
        return fd, fd_path(fd)
    except BaseException:
        os.close(fd)
        raise


def fd_path(fd: int) -> str:
    """The kernel's name for what `fd` is open on, now (it follows renames)."""
    real = os.readlink(f"/proc/self/fd/{fd}")
    if real.endswith(" (deleted)") or not real.startswith("/"):
        raise FileNotFoundError(errno.ENOENT, "the folder was deleted", real)
    return real


def _walk(path: str, follow: bool) -> tuple[int, str]:
    """The fallback of `open_dir`: a component at a time from /, each opened with O_NOFOLLOW
    relative to the folder before it, symlinks read and resolved here."""
    todo = list(reversed(path.split("/")))
    stack: list[tuple[int, str]] = [(os.open("/", _DIR), "")]
    hops = 0
    try:
        while todo:
            part = todo.pop()
            if part in ("", "."):
                continue
            if part == "..":
                if len(stack) > 1:
                    os.close(stack.pop()[0])
                continue
            fd = os.open(part, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=stack[-1][0])
            mode = os.fstat(fd).st_mode
            if stat.S_ISDIR(mode):
                stack.append((fd, part))
                continue
            try:
                if not stat.S_ISLNK(mode):
                    raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), path)
                if not follow:
                    raise OSError(errno.ELOOP, "a part of the path is a symbolic link", path)
                _refuse_magic(_real(stack))
                link = os.readlink("", dir_fd=fd)
            finally:
                os.close(fd)
            hops += 1
            if hops > MAX_HOPS:
                raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), path)
            if link.startswith("/"):
                while len(stack) > 1:
                    os.close(stack.pop()[0])
            todo.extend(reversed(link.split("/")))
        real = _real(stack)
        return stack.pop()[0], real
    finally:
        for fd, _ in stack:
            os.close(fd)


def _real(stack: list[tuple[int, str]]) -> str:
    return "/" + "/".join(name for _, name in stack[1:])


def _refuse_magic(real_dir: str) -> None:
    """Every symlink below /proc/<pid>/ is a magic link (cwd, root, exe, fd/N, ns/...)."""
    if _PROC_PID.fullmatch(real_dir):
        raise MagicLink(errno.ELOOP, "it goes through a /proc/<pid>/ link (cwd, root, fd/...) into "
                        "another process's view of the files, which file tools never follow")


class NotPlain(OSError):
    """A file the backend would read into a prompt is not a plain file of its folder: `what`
    says what it is instead (a symbolic link and where to, a pipe, a device, a hard link)."""

    def __init__(self, name: str, what: str) -> None:
        super().__init__(errno.EPERM, f"{name} is {what}")
        self.name, self.what = name, what


def read_plain(folder: str, name: str, max_bytes: int) -> bytes | None:
    """The first `max_bytes` of the file `name` right in `folder`, read by the backend itself
    (project instructions for the system prompt): None when there is no such file; NotPlain
    when it is anything but a plain file with one name.

    Whatever a command in the folder did, this never reads outside it: the name is opened
    without following a symbolic link (AGENTS.md -> /proc/self/environ would hand the
    backend's own environment, keys included, to the model), without blocking (a FIFO
    would hang the backend), and a file with a second hard link is refused, since the other
    name may lie anywhere on the same file system."""
    if "/" in name or name in ("", ".", ".."):
        raise ValueError(f"not a name inside a folder: {name!r}")
    try:
        dir_fd = os.open(folder, _DIR)
    except OSError:
        return None  # no folder: nothing to read
    try:
        return read_plain_at(dir_fd, name, max_bytes)
    finally:
        os.close(dir_fd)


def read_plain_at(dir_fd: int, name: str, max_bytes: int) -> bytes | None:
    """`read_plain` in a folder already open (`dir_fd`, which the caller keeps and closes):
    the same refusals (NotPlain) for a link, a pipe or device, or a second hard link."""
    if "/" in name or name in ("", ".", ".."):
        raise ValueError(f"not a name inside a folder: {name!r}")
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY
                     | os.O_CLOEXEC, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            return None  # unreadable (permissions, a folder's name): as if absent
        try:
            target = os.readlink(name, dir_fd=dir_fd)
        except OSError:
            target = "?"
        raise NotPlain(name, f"a symbolic link (to {target})") from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotPlain(name, "not a plain file (a pipe, socket or device)")
        if info.st_nlink > 1:
            raise NotPlain(name, f"a file with {info.st_nlink} names (a hard link)")
        chunks, left = [], max_bytes
        while left > 0:
            chunk = os.read(fd, min(left, 65536))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)
