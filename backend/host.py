"""Facts about processes on this host: which pid namespace we are in, and when a process started.

A pid names a process only within one boot and one pid namespace, and only
for that process's lifetime; the start time tells a live process from a
later one that reused its pid.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import re
import signal
from functools import cache
from pathlib import Path


@cache
def boot_token() -> str:
    """This host's boot and pid namespace: pids are comparable only within one of these."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        boot = os.uname().nodename
    try:
        ns = os.readlink("/proc/self/ns/pid")
    except OSError:
        ns = "pidns"
    return f"{boot}/{ns}"


def process_start(pid: int) -> str:
    """The process's start time in clock ticks since boot ("" when it does not exist or
    the platform cannot tell), to tell a live holder from a reused pid."""
    try:
        fields = stat_fields(pid)
    except OSError:
        return ""
    return fields[19] if len(fields) > 19 else ""


def stat_fields(pid: int) -> list[str]:
    """/proc/PID/stat from its third field on (state, ppid, pgrp, session, ...): the command
    name (field 2) may hold spaces and parentheses, so they start after the last ")".
    Raises OSError when the process is gone or unreadable."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rfind(")") + 2:].split()


_user_umask: int | None = None


def private_umask() -> None:
    """Makes files the backend itself creates private to this user (transcripts, logs, the
    token), remembering the user's own umask for what tools create on the user's behalf."""
    global _user_umask
    _user_umask = os.umask(0o077)


def user_umask() -> int:
    """The umask files in the user's projects should get: the one the backend started with."""
    if _user_umask is not None:
        return _user_umask
    mask = os.umask(0o022)  # the only way to read it is to set it
    os.umask(mask)
    return mask


_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
try:
    _libc: ctypes.CDLL | None = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
except OSError:  # not Linux: there is no parent-death signal to ask for
    _libc = None


def die_with_parent() -> None:
    """A `preexec_fn` for children the backend starts (a tool's shell, the local model's
    server): the kernel kills them when the backend dies, kill -9 included, so a crash
    leaves no command finishing unobserved and no server holding memory and a port."""
    if _libc is not None:
        _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


# Landlock (Linux 6.12+, ABI 6): a scope that keeps a process and its children from
# connecting to abstract unix sockets made outside it.  Syscall numbers are the same on
# every architecture that has them (they came after the numbering was unified).
_SYS_LANDLOCK_CREATE_RULESET = 444
_SYS_LANDLOCK_RESTRICT_SELF = 446
_LANDLOCK_CREATE_RULESET_VERSION = 1
_LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET = 1
_PR_SET_NO_NEW_PRIVS = 38


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


@cache
def landlock_abi() -> int:
    """The kernel's Landlock ABI version; 0 when it has none (or it is switched off)."""
    if _libc is None:
        return 0
    version = _libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0),
                            ctypes.c_uint32(_LANDLOCK_CREATE_RULESET_VERSION))
    return max(int(version), 0)


_SCOPE = _RulesetAttr(0, 0, _LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET)


def no_abstract_sockets() -> None:
    """A `preexec_fn` for a sandboxed command (after `die_with_parent`): where the kernel has
    Landlock scopes (ABI 6), it and its children cannot connect to an abstract unix socket
    made outside it (X11's `@/tmp/.X11-unix/X0`, a D-Bus address), which a network namespace
    hides too, but a call allowed the network shares the host's.  Needs no_new_privs, which
    bubblewrap sets anyway.  Call `landlock_abi()` in the parent first: this runs between
    fork and exec, where nothing may be computed lazily.  A failure leaves the child as it
    was (the sandbox still holds; the network is then what was approved)."""
    if _libc is None:
        return
    _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    fd = _libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(_SCOPE),
                       ctypes.c_size_t(ctypes.sizeof(_SCOPE)), ctypes.c_uint32(0))
    if fd >= 0:
        _libc.syscall(_SYS_LANDLOCK_RESTRICT_SELF, ctypes.c_int(fd), ctypes.c_uint32(0))
        os.close(fd)


def undumpable() -> None:
    """Makes the backend's /proc entries (environ, mem, fd, ...) readable only by root: a
    command running as the same user, outside the sandbox, cannot read a provider key from
    the backend's environment (`/proc/$PPID/environ`).  Costs core dumps and same-user
    debuggers such as py-spy without sudo."""
    if _libc is not None:
        _libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)


_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|^TURNKEY_", re.IGNORECASE)


def secretless_env() -> dict[str, str]:
    """The backend's environment without anything that looks like a key, for helper processes
    the backend trusts but that need no secret (the local model's server).  Tools get far
    less: an allowlist (tools/sandbox.child_env)."""
    return {k: v for k, v in os.environ.items() if not _SECRET_NAME.search(k)}
