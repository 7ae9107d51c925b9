"""One desktop app per data folder and user: a later launch hands its request to the running one.

The first launch takes an exclusive `flock` on DIR/<name>.lock and then listens
on a `QLocalServer` called <name>, a short hash of the user and the data folder
(so two folders, or two users, never meet; Unix socket paths allow ~100 bytes).
A later launch finds the lock taken, connects, sends one JSON line
(`{"action": "raise"}` or `{"action": "open", "session_id": ...}`), waits for
the one-line answer and exits.

Why a lock as well as the socket: the kernel drops an `flock` when its process
dies, so a free lock means no app runs, and a socket left under the name is a
crashed app's (removed, then listened on again).  And of two launches at the
same moment exactly one gets the lock; the other connects, retrying until the
winner listens.  The socket alone cannot tell a stale socket from a winner that
has bound but not yet listened, and replacing the winner's socket would leave two
apps.

Where the socket lives (Unix): in `$XDG_RUNTIME_DIR` when that is this user's private
folder, else in the temp dir (`$TMPDIR`, else /tmp), which every local user can write to.
There another user could put a file under the name first: so a later launch connects only
to a socket this user owns (anything else is refused, with words saying so), and an app that
cannot listen still runs (later launches then say they could not hand over).  The path the
app listens on is written into its lock file when it claims the folder, so a later launch
started from another environment (no `XDG_RUNTIME_DIR`, another `TMPDIR`) still finds it.

This module imports no Qt: a later launch decides and hands over before loading it (that
is what keeps it well under a second).  A plain `socket` reaches the `QLocalServer`'s
socket file (`socket_path`); elsewhere (Windows' named pipes) the hand-over goes through
`QLocalSocket`.  The listening side is desktop/qt/instance.py.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import socket
import stat
import sys
import time
from pathlib import Path
from typing import IO, Literal, NamedTuple

log = logging.getLogger("desktop")

HAND_OVER_TIMEOUT_S = 15.0  # a winner of a simultaneous launch answers once its event loop runs
MAX_LINE = 4096  # a request or an answer longer than this is not one
_RETRY_S = 0.05


class Request(NamedTuple):  # not a dataclass: `dataclasses` costs a later launch ~6 ms to load
    """What a later launch asks the running app to do."""

    action: Literal["raise", "open"] = "raise"
    session_id: str = ""

    def encode(self) -> bytes:
        body: dict[str, str] = {"action": self.action}
        if self.action == "open":
            body["session_id"] = self.session_id
        return json.dumps(body).encode() + b"\n"

    @classmethod
    def decode(cls, line: bytes) -> Request:
        """Raises ValueError for anything but a well-formed request."""
        body = json.loads(line)
        if not isinstance(body, dict):
            raise ValueError("not an object")
        action = body.get("action")
        session_id = body.get("session_id", "")
        if action == "raise":
            return cls("raise")
        if action == "open" and isinstance(session_id, str) and session_id:
            return cls("open", session_id)
        raise ValueError(f"unknown request: {body!r}")


def server_name(data_dir: Path, user: str | None = None) -> str:
    """The local server's name for this folder and user: short, and the same on every launch."""
    if user is None:
        user = str(os.getuid()) if hasattr(os, "getuid") else os.environ.get("USERNAME", "")
    key = f"{user}\0{data_dir.expanduser().resolve()}"
    return "turnkey-" + hashlib.sha256(key.encode()).hexdigest()[:16]


class FolderLock:
    """The exclusive lock the running app holds on its data folder (released when it exits).
    `endpoint` is where it listens for later launches: a socket path on Unix, a pipe's name
    on Windows."""

    def __init__(self, name: str, path: Path, file: IO[bytes], endpoint: str = "") -> None:
        self.name = name
        self.path = path
        self.endpoint = endpoint or default_endpoint(name)
        self._file: IO[bytes] | None = file

    def release(self) -> None:
        if self._file is not None:
            self._file.close()  # closing the descriptor drops the flock
            self._file = None


def claim(data_dir: Path) -> FolderLock | None:
    """The folder's lock when no app holds it (this launch is the app), else None: hand over."""
    data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    name = server_name(data_dir)
    path = data_dir / f"{name}.lock"
    file = os.fdopen(os.open(path, os.O_RDWR | os.O_CREAT, 0o600), "r+b")  # held while the app runs
    if not _try_lock(file):
        file.close()
        return None
    endpoint = default_endpoint(name)
    file.seek(0)
    file.truncate()
    file.write(f"{os.getpid()}\n{endpoint}\n".encode())  # (read by later launches: `endpoint_of`)
    file.flush()
    return FolderLock(name, path, file, endpoint)


def endpoint_of(data_dir: Path) -> str:
    """Where the app holding `data_dir`'s lock listens, as its lock file says (the folder
    is this user's own); this launch's own idea of it when the file does not say."""
    name = server_name(data_dir)
    try:
        lines = (data_dir / f"{name}.lock").read_text(errors="replace").splitlines()
    except OSError:
        lines = []
    recorded = lines[1].strip() if len(lines) > 1 else ""
    if recorded and (sys.platform == "win32" or os.path.isabs(recorded)):
        return recorded
    return default_endpoint(name)


def default_endpoint(name: str) -> str:
    return name if sys.platform == "win32" else str(socket_path(name))


def _try_lock(file: IO[bytes]) -> bool:
    if sys.platform == "win32":
        import msvcrt

        try:
            msvcrt.locking(file.fileno(), msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True
    import fcntl

    try:
        fcntl.flock(file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


MAX_SOCKET_PATH = 100  # bytes: sun_path holds 108 on Linux, 104 on the BSDs and macOS


def socket_path(name: str) -> Path:
    """Where this launch would listen on Unix: the user's private runtime folder when there
    is one (and the path fits a socket address), else where `QLocalServer.listen(name)` puts
    a bare name, `QDir::tempPath()/name`."""
    runtime = private_runtime_dir()
    if runtime is not None and len(os.fsencode(runtime / name)) <= MAX_SOCKET_PATH:
        return runtime / name
    return Path(os.path.normpath(os.environ.get("TMPDIR") or "/tmp")) / name


def private_runtime_dir() -> Path | None:
    """`$XDG_RUNTIME_DIR` when it is an absolute path to a folder this user owns and no one
    else may enter (as the XDG spec requires of it); None otherwise."""
    value = os.environ.get("XDG_RUNTIME_DIR", "")
    if not value or not os.path.isabs(value):
        return None
    try:
        st = os.lstat(value)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        return None
    return Path(os.path.normpath(value))


def not_ours(path: str) -> str | None:
    """Why the file at `path` is no socket of this user's (None when it is one, or when
    nothing is there yet, or `path` is a pipe's name): another user may have put it in a
    shared temp dir first."""
    if not os.path.isabs(path):
        return None
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISSOCK(st.st_mode):
        return f"{path} is not a socket"
    if st.st_uid != os.getuid():
        return f"{path} belongs to another user (uid {st.st_uid})"
    return None


def hand_over(
    endpoint: str, request: Request, timeout_s: float = HAND_OVER_TIMEOUT_S
) -> dict[str, object] | None:
    """Sends `request` to the app listening at `endpoint` (`endpoint_of`; a bare server name
    means its `socket_path`); its answer, or None when none came in time or the socket there
    is not this user's.

    Blocking, and needs neither Qt nor a QCoreApplication: a second launch calls it first."""
    if sys.platform == "win32":  # a named pipe, not a socket file
        from desktop.qt.instance import hand_over_qt

        return hand_over_qt(endpoint, request, timeout_s)
    deadline = time.monotonic() + timeout_s
    path = endpoint if os.path.isabs(endpoint) else str(socket_path(endpoint))
    while True:
        why = not_ours(path)
        if why is not None:
            log.warning("not handing over to %s", why)
            return None
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(max(0.001, deadline - time.monotonic()))
        try:
            sock.connect(path)
            break
        except OSError as exc:
            sock.close()
            # The lock's holder may not listen yet (it won a simultaneous launch a moment ago).
            if time.monotonic() + _RETRY_S >= deadline:
                log.warning("no answer from the running app on %s: %s", path, exc)
                return None
            time.sleep(_RETRY_S)
    with sock:
        peer = peer_uid(sock)  # (the file checked above may have been swapped since)
        if peer is not None and peer != os.getuid():
            log.warning("not handing over to %s: another user (uid %d) listens there", path, peer)
            return None
        try:
            sock.sendall(request.encode())
            answer = _read_line(sock, deadline)
        except OSError as exc:
            log.warning("the running app on %s did not answer: %s", path, exc)
            return None
    return parse_reply(answer)


def peer_uid(sock: socket.socket) -> int | None:
    """The user id of the process at the other end of a connected Unix socket, where the
    system tells (Linux's SO_PEERCRED); None elsewhere."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return None
    import struct

    _pid, uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, option,
                                                          struct.calcsize("3i")))
    return int(uid)


def _read_line(sock: socket.socket, deadline: float) -> bytes:
    answer = b""
    while b"\n" not in answer and len(answer) <= MAX_LINE:
        sock.settimeout(max(0.001, deadline - time.monotonic()))
        chunk = sock.recv(MAX_LINE)
        if not chunk:
            break
        answer += chunk
    return answer


def parse_reply(answer: bytes) -> dict[str, object] | None:
    try:
        reply = json.loads(answer.split(b"\n", 1)[0])
    except ValueError:
        return None
    return reply if isinstance(reply, dict) else None
