"""Finding the process on the other end of a loopback connection, with real sockets and real
processes, and telling a tool call's process (a descendant of the backend, a member of a
recorded tool call, or a sandboxed one) from any other."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from backend.server import peer
from backend.tools.procs import ProcessTable

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

# argv: port, how.  The process that connects sends its pid, then holds on until the test
# closes the connection.
CLIENT = r"""
import os, socket, sys, time
port, how = int(sys.argv[1]), sys.argv[2]
if how == "setsid":  # leaves the session it was started in, but stays its leader's child
    if os.fork():
        os.wait()
        sys.exit()
    os.setsid()
elif how.startswith("orphan"):  # stays in the session, but its parent exits: re-parented away
    parent = os.getpid()
    if os.fork():
        os._exit(0)
    while os.getppid() == parent:
        time.sleep(0.01)
    if how == "orphan-own-group":
        os.setpgid(0, 0)
s = socket.create_connection(("127.0.0.1", port))
s.sendall(f"{os.getpid()}\n".encode())
while s.recv(1024):
    pass
"""
NO_BACKEND = -1  # no process has this pid: the "backend" is nobody's ancestor


@dataclass
class Peer:
    pid: int  # the process that connected
    client: peer.Address
    server: peer.Address


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    sock = socket.create_server(("127.0.0.1", 0))
    sock.settimeout(30)  # a guard against a child that never connects, not a measurement
    yield sock
    sock.close()


class Clients:
    """Starts CLIENT processes and accepts their connections; closes everything at the end."""

    def __init__(self, listener: socket.socket) -> None:
        self.listener = listener
        self.conns: list[socket.socket] = []
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, how: str = "plain", prefix: tuple[str, ...] = (),
              new_session: bool = False) -> tuple[subprocess.Popen[bytes], Peer]:
        port = str(self.listener.getsockname()[1])
        proc = subprocess.Popen([*prefix, sys.executable, "-c", CLIENT, port, how],
                                start_new_session=new_session)
        self.procs.append(proc)
        conn, _ = self.listener.accept()
        self.conns.append(conn)
        pid = int(conn.makefile("rb").readline())
        return proc, Peer(pid, conn.getpeername()[:2], conn.getsockname()[:2])

    def close(self) -> None:
        for conn in self.conns:
            conn.close()
        for proc in self.procs:
            proc.wait(timeout=30)


@pytest.fixture
def clients(listener: socket.socket) -> Iterator[Clients]:
    made = Clients(listener)
    yield made
    made.close()


def test_a_child_process_is_found_and_recognized_as_a_descendant(clients: Clients) -> None:
    proc, found = clients.start()
    assert found.pid == proc.pid
    assert peer.holders(found.client, found.server) == [proc.pid]
    reason = peer.tool_call_reason(proc.pid, os.getpid(), set())
    # A child of the "backend" (here: this test's process) counts as a tool call's.
    assert reason == f"process {proc.pid} was started by the backend (a tool call's command)"
    verdict = peer.judge(found.client, found.server, os.getpid(), set())
    assert verdict == peer.Verdict((proc.pid,), reason)
    assert peer.tool_call_reason(os.getpid(), os.getpid(), set()) == (
        f"process {os.getpid()} is the backend itself")


def test_a_process_the_backend_did_not_start_is_not_a_tool_call(
    clients: Clients, listener: socket.socket
) -> None:
    proc, _ = clients.start()  # stands for a backend that is not this test's ancestor
    with socket.create_connection(listener.getsockname()) as own:
        accepted, _ = listener.accept()
        with accepted:
            assert peer.holders(own.getsockname(), accepted.getsockname()) == [os.getpid()]
            verdict = peer.judge(own.getsockname(), accepted.getsockname(), proc.pid, set())
    assert verdict == peer.Verdict((os.getpid(),), None)


@pytest.mark.parametrize(
    ("how", "reason"),
    [
        ("plain", "process {pid} is the shell of a running tool call"),
        # left the session, but its parent is the recorded leader
        ("setsid", "process {pid} descends from process {leader}, which is the shell of a "
                   "running tool call"),
        # lost its parent, still in the recorded group
        ("orphan", "process {pid} is in the process group of a running tool call ({leader})"),
        # and left the group: still in the session
        ("orphan-own-group", "process {pid} is in the session of a running tool call ({leader})"),
    ],
)
def test_members_of_a_recorded_tool_call_are_recognized(
    clients: Clients, tmp_path: Path, how: str, reason: str
) -> None:
    leader, found = clients.start(how, new_session=True)
    table = ProcessTable(tmp_path)
    table.spawned(leader.pid)  # what the terminal tool records for its shell
    assert table.groups() == {leader.pid}
    if how == "plain":
        assert found.pid == leader.pid
    else:
        assert found.pid != leader.pid
    assert peer.holders(found.client, found.server) == [found.pid]

    said = peer.tool_call_reason(found.pid, NO_BACKEND, table.groups())
    assert said == reason.format(pid=found.pid, leader=leader.pid)
    assert peer.tool_call_reason(found.pid, NO_BACKEND, set()) is None, "unrecorded: not one"
    table.reaped(leader.pid)
    assert table.groups() == set()


def _unshare_works() -> bool:
    try:
        done = subprocess.run(["unshare", "-Urpf", "--mount-proc", "true"], capture_output=True,
                              timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


@pytest.mark.skipif(not _unshare_works(), reason="no unprivileged user/PID namespaces here")
def test_a_process_in_another_pid_namespace_is_recognized(clients: Clients) -> None:
    _, found = clients.start(prefix=("unshare", "-Urpf", "--mount-proc"))
    assert found.pid == 1, "inside its namespace the client is pid 1"
    [outside] = peer.holders(found.client, found.server)
    assert outside != 1
    reason = peer.tool_call_reason(outside, NO_BACKEND, set())
    assert reason == f"process {outside} runs in another PID namespace (a sandboxed command)"


def test_a_connection_that_does_not_exist_is_unknown(listener: socket.socket) -> None:
    server = listener.getsockname()
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        nobody = unused.getsockname()
        with pytest.raises(peer.PeerUnknown, match="no open TCP connection"):
            peer.holders(nobody, server)


def test_a_closed_connection_is_unknown(clients: Clients) -> None:
    proc, found = clients.start()
    for conn in clients.conns:
        conn.close()
    proc.wait(timeout=30)
    with pytest.raises(peer.PeerUnknown):
        peer.judge(found.client, found.server, os.getpid(), set())


def test_an_ipv6_connection_is_found(clients: Clients) -> None:
    if not socket.has_ipv6:
        pytest.skip("no IPv6")
    try:
        server = socket.create_server(("::1", 0), family=socket.AF_INET6)
    except OSError:
        pytest.skip("no IPv6 loopback")
    with server, socket.create_connection(server.getsockname()[:2]) as own:
        accepted, _ = server.accept()
        with accepted:
            assert peer.holders(own.getsockname()[:2], accepted.getsockname()[:2]) == [os.getpid()]


def test_a_process_that_went_away_is_unknown(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    with pytest.raises(peer.PeerUnknown):
        peer.tool_call_reason(int(done.stdout), NO_BACKEND, set())
