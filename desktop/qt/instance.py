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
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal

from PySide6.QtCore import QObject, Signal
from PySide6.QtNetwork import QLocalServer, QLocalSocket

from desktop.qt.compat import emit

log = logging.getLogger("desktop")

HAND_OVER_TIMEOUT_S = 15.0  # a winner of a simultaneous launch answers once its event loop runs
_MAX_LINE = 4096
_RETRY_S = 0.05


@dataclass(frozen=True)
class Request:
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
    """The exclusive lock the running app holds on its data folder (released when it exits)."""

    def __init__(self, name: str, path: Path, file: IO[bytes]) -> None:
        self.name = name
        self.path = path
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
    file.seek(0)
    file.truncate()
    file.write(f"{os.getpid()}\n".encode())
    file.flush()
    return FolderLock(name, path, file)


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


def hand_over(
    name: str, request: Request, timeout_s: float = HAND_OVER_TIMEOUT_S
) -> dict[str, object] | None:
    """Sends `request` to the app serving `name`; its answer, or None when none came in time.

    Blocking, and needs no QCoreApplication: a second launch calls it before building one."""
    deadline = time.monotonic() + timeout_s

    def left_ms() -> int:
        return max(1, int((deadline - time.monotonic()) * 1000))

    sock = QLocalSocket()
    while True:
        sock.connectToServer(name)
        if sock.waitForConnected(left_ms()):
            break
        # The lock's holder may not listen yet (it won a simultaneous launch a moment ago).
        if time.monotonic() + _RETRY_S >= deadline:
            log.warning("no answer from the running app on %s: %s", name, sock.errorString())
            return None
        sock.abort()
        time.sleep(_RETRY_S)
    sock.write(request.encode())
    sock.waitForBytesWritten(left_ms())
    answer = b""
    while b"\n" not in answer and time.monotonic() < deadline:
        if not sock.waitForReadyRead(left_ms()) and sock.bytesAvailable() == 0:
            break
        answer += bytes(sock.readAll().data())
    sock.abort()
    try:
        reply = json.loads(answer.split(b"\n", 1)[0])
    except ValueError:
        return None
    return reply if isinstance(reply, dict) else None


class InstanceServer(QObject):
    """Listens for later launches of the app that holds `lock`; emits each valid request."""

    requested = Signal(object)  # Request

    def __init__(self, lock: FolderLock, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.lock = lock
        self.server = QLocalServer(self)
        self.server.setSocketOptions(QLocalServer.SocketOption.UserAccessOption)  # this user only
        self.server.newConnection.connect(self._accept)
        self._buffers: dict[QLocalSocket, bytes] = {}

    def listen(self) -> None:
        """Call with a QCoreApplication alive; raises OSError when the name cannot be taken."""
        # Holding the lock proves no app listens: a socket under the name is a crashed one's.
        # (With UserAccessOption, Qt 6.12's listen renames its socket over whatever file has
        # the name, even a live server's, so only the lock keeps a second app out; without
        # the option a leftover file fails listen with AddressInUseError.)
        QLocalServer.removeServer(self.lock.name)
        if not self.server.listen(self.lock.name):
            raise OSError(f"cannot listen on {self.lock.name}: {self.server.errorString()}")

    def close(self) -> None:
        self.server.close()
        self.lock.release()

    def _accept(self) -> None:
        while self.server.hasPendingConnections():
            sock = self.server.nextPendingConnection()
            self._buffers[sock] = b""
            sock.readyRead.connect(lambda s=sock: self._read(s))
            sock.disconnected.connect(lambda s=sock: self._drop(s))

    def _read(self, sock: QLocalSocket) -> None:
        buffer = self._buffers.get(sock, b"") + bytes(sock.readAll().data())
        if b"\n" not in buffer:
            if len(buffer) > _MAX_LINE:
                sock.abort()
            else:
                self._buffers[sock] = buffer
            return
        self._buffers[sock] = b""
        try:
            request = Request.decode(buffer.split(b"\n", 1)[0])
        except ValueError as exc:
            sock.write(json.dumps({"ok": False, "error": str(exc)}).encode() + b"\n")
        else:
            log.info("a later launch asked to %s %s", request.action, request.session_id)
            emit(self.requested, request)
            sock.write(b'{"ok": true}\n')
        sock.flush()  # out now: the app may be quitting in response to the request
        sock.disconnectFromServer()

    def _drop(self, sock: QLocalSocket) -> None:
        self._buffers.pop(sock, None)
        sock.deleteLater()
