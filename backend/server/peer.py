"""Which local process holds the other end of a loopback TCP connection, and whether a tool
call started it (Linux, from /proc).

The client's socket is the one in /proc/net/tcp (or tcp6) whose local address
is the client's and whose remote address is ours; its inode names the socket,
and the processes holding it have a /proc/PID/fd link to `socket:[inode]`.
A holder is a tool call's process when it runs in another PID namespace (the
sandbox gives commands their own), or when it or an ancestor (following
PPid) is the backend itself, or leads, or belongs to the process group or
session of, a tool call the backend recorded as running (tools/procs.py).

Whatever cannot be read makes the answer unknown (`PeerUnknown`), never
"not a tool call": callers must fail closed.  The ancestry test is only as
strong as the process tree: without the sandbox, a command that leaves its
session and gets re-parented away from the backend is not recognized.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from backend.errors import Forbidden
from backend.host import stat_fields
from backend.server.connection import Connection

log = logging.getLogger("rpc")  # its refusals are config.set's, logged with the method's

PROC = Path("/proc")
MAX_DEPTH = 4096  # ancestry is a tree; this only bounds a walk through a corrupt view
Address = tuple[str, int]


class PeerUnknown(Exception):
    """The peer process could not be found or judged; the message says what failed."""


@dataclass(frozen=True)
class Verdict:
    pids: tuple[int, ...]  # every process holding the client's end (usually one)
    tool_call: str | None  # why one of them counts as a tool call's process; None: none does


def judge(client: Address, server: Address, backend_pid: int, tool_groups: set[int]) -> Verdict:
    """Finds the processes holding the client's end of the connection client -> server and
    says whether any is a tool call's.  Reads /proc: call it off the event loop."""
    pids = holders(client, server)
    for pid in pids:
        reason = tool_call_reason(pid, backend_pid, tool_groups)
        if reason is not None:
            return Verdict(tuple(pids), reason)
    return Verdict(tuple(pids), None)


def holders(client: Address, server: Address) -> list[int]:
    """The pids whose open files include the client's socket of the connection client -> server."""
    inode = socket_inode(client, server)
    link = f"socket:[{inode}]"
    found = []
    for entry in _listdir(PROC, "the process list"):
        if not entry.isdigit():
            continue
        try:
            fds = os.listdir(PROC / entry / "fd")
        except OSError:
            continue  # gone, or another user's: not ours to attribute
        for fd in fds:
            with contextlib.suppress(OSError):
                if os.readlink(PROC / entry / "fd" / fd) == link:
                    found.append(int(entry))
                    break
    if not found:
        raise PeerUnknown(f"no process of this user holds the socket of {_show(client)}")
    return sorted(found)


def socket_inode(client: Address, server: Address) -> int:
    """The inode of the socket whose local address is `client` and remote address `server`."""
    want_local, want_remote = _normal(client), _normal(server)
    for table in ("tcp", "tcp6"):
        path = PROC / "net" / table
        try:
            lines = path.read_text().splitlines()[1:]
        except FileNotFoundError:
            continue  # no IPv6 on this host
        except OSError as exc:
            raise PeerUnknown(f"cannot read {path}: {exc.strerror}") from None
        for line in lines:
            fields = line.split()
            if len(fields) < 10:
                continue
            if _parse(fields[1]) == want_local and _parse(fields[2]) == want_remote:
                inode = int(fields[9])
                if inode:  # 0: a socket already closed (TIME_WAIT) that nobody holds
                    return inode
    raise PeerUnknown(f"no open TCP connection from {_show(client)} to {_show(server)}")


def tool_call_reason(pid: int, backend_pid: int, tool_groups: set[int]) -> str | None:
    """Why `pid` counts as a tool call's process, or None when it does not."""
    if _pid_namespace(pid) != _pid_namespace(os.getpid()):
        return f"process {pid} runs in another PID namespace (a sandboxed command)"
    current = pid
    for _ in range(MAX_DEPTH):
        if current == backend_pid:
            if pid == backend_pid:
                return f"process {pid} is the backend itself"
            return f"process {pid} was started by the backend (a tool call's command)"
        who = f"process {pid}" if current == pid else (
            f"process {pid} descends from process {current}, which")
        ppid, pgrp, session = _stat(current)
        if current in tool_groups:
            return f"{who} is the shell of a running tool call"
        for kind, group in (("process group", pgrp), ("session", session)):
            if group in tool_groups:
                return f"{who} is in the {kind} of a running tool call ({group})"
        if ppid == 0:
            return None
        current = ppid
    raise PeerUnknown(f"the ancestry of process {pid} is deeper than {MAX_DEPTH}")


def _pid_namespace(pid: int) -> str:
    try:
        return os.readlink(PROC / str(pid) / "ns" / "pid")
    except OSError as exc:
        raise PeerUnknown(f"cannot read the PID namespace of process {pid}: {exc.strerror}") from None


def _stat(pid: int) -> tuple[int, int, int]:
    """(parent pid, process group, session) of a live process."""
    try:
        fields = stat_fields(pid)
    except OSError:
        raise PeerUnknown(f"process {pid} went away while it was being looked at") from None
    return int(fields[1]), int(fields[2]), int(fields[3])


def _listdir(path: Path, what: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError as exc:
        raise PeerUnknown(f"cannot read {what} ({path}): {exc.strerror}") from None


def _normal(address: Address) -> tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]:
    """An address as comparable with /proc's: an IPv4-mapped IPv6 address is its IPv4 one."""
    ip = ipaddress.ip_address(address[0].split("%")[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip, int(address[1])


def _parse(field: str) -> tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]:
    """An address of /proc/net/tcp: hex IP in 32-bit words of host byte order, then hex port."""
    hex_ip, _, hex_port = field.partition(":")
    raw = bytes.fromhex(hex_ip)
    if sys.byteorder == "little":
        raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    ip = ipaddress.ip_address(raw)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip, int(hex_port, 16)


def _show(address: Address) -> str:
    return f"{address[0]}:{address[1]}"


async def may_loosen(conn: Connection, fields: list[str],
                     tool_groups: Callable[[], set[int]]) -> None:
    """Loosening approvals or the sandbox takes the owner's token on a connection that no
    tool call's process holds: a command the model ran must not switch off what guards
    the commands it runs next, even with the token it can read from backend.json."""
    names = ", ".join(fields)
    data = {"fields": fields}
    if not conn.principal.owner:
        raise Forbidden(f"forbidden: this change loosens {names}, which only the owner's "
                        f"token may do; change it in the app's Settings", data)
    try:
        client, server = conn.ws.remote_address, conn.ws.local_address
        if not client or not server:
            raise PeerUnknown("the connection has no TCP addresses")
        verdict = await asyncio.to_thread(
            judge, (client[0], client[1]), (server[0], server[1]), os.getpid(), tool_groups())
    except PeerUnknown as exc:
        raise Forbidden(
            f"forbidden: this change loosens {names}, and the backend could not tell which "
            f"process is on the other end of this connection: {exc}. Change it in the "
            f"app's Settings, or in config.toml while the backend is stopped", data) from None
    if verdict.tool_call is not None:
        log.warning("config.set refused: a tool call's process tried to loosen %s: %s",
                    names, verdict.tool_call)
        raise Forbidden(
            f"forbidden: this change loosens {names}, and it comes from a tool call's "
            f"process: {verdict.tool_call}. Only a person may loosen it, in the app's "
            f"Settings or in config.toml while the backend is stopped", data)
    log.info("config.set loosens %s for the owner (process %s)", names,
             ",".join(map(str, verdict.pids)))
