"""The running app's side of the single-instance hand-over: `InstanceServer` listens for later
launches (what they send, and the lock that proves no other app runs: desktop/instance.py)."""

from __future__ import annotations

import json
import logging
import sys
import time

from PySide6.QtCore import QObject, Signal
from PySide6.QtNetwork import QLocalServer, QLocalSocket

from desktop.instance import (  # re-exported: the launch's half, for the tests' peers
    HAND_OVER_TIMEOUT_S,
    MAX_LINE,
    FolderLock,
    Request,
    claim,
    endpoint_of,
    hand_over,
    not_ours,
    parse_reply,
    server_name,
    socket_path,
)
from desktop.qt.compat import emit

__all__ = ["HAND_OVER_TIMEOUT_S", "FolderLock", "InstanceServer", "Request", "claim",
           "endpoint_of", "hand_over", "hand_over_qt", "server_name", "socket_path"]

log = logging.getLogger("desktop")
_RETRY_S = 0.05


def hand_over_qt(
    name: str, request: Request, timeout_s: float = HAND_OVER_TIMEOUT_S
) -> dict[str, object] | None:
    """`hand_over` through `QLocalSocket`, where the server is no socket file (Windows' named
    pipes).  Blocking, and needs no QCoreApplication."""
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
    return parse_reply(answer)


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
        endpoint = self.lock.endpoint
        if sys.platform != "win32" and (why := not_ours(endpoint)) is not None:
            # Another user's file in a shared temp dir: neither removable nor to be replaced.
            raise OSError(f"cannot listen for later launches: {why}")
        QLocalServer.removeServer(endpoint)
        if not self.server.listen(endpoint):
            raise OSError(f"cannot listen on {endpoint}: {self.server.errorString()}")

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
            if len(buffer) > MAX_LINE:
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
