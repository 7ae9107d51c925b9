"""The backend's own process hardening: an undumpable process's environment is not for its peers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

# What backend.host.undumpable does, inline: the system interpreter running this as `nobody`
# may not be able to read the checkout (test_undumpable_sets_the_flag covers the function).
SCRIPT = """
import ctypes, sys, time
if sys.argv[1] == "1":
    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE
print("ready", flush=True)
time.sleep(60)
"""


def _peer_reads_environ(pid: int, uid: int) -> str:
    """What another process of the same user gets from /proc/PID/environ."""
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(read_end)
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            with open(f"/proc/{pid}/environ", "rb") as f:
                answer = b"read:" + f.read()
        except OSError as exc:
            answer = f"refused:{type(exc).__name__}".encode()
        os.write(write_end, answer)
        os._exit(0)
    os.close(write_end)
    data = b""
    while chunk := os.read(read_end, 65536):
        data += chunk
    os.close(read_end)
    os.waitpid(child, 0)
    return data.decode(errors="replace")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run both processes as one other user")
@pytest.mark.parametrize("hardened", [False, True])
def test_an_undumpable_backend_keeps_its_environment_from_its_own_user(hardened: bool) -> None:
    uid = 65534
    env = {"TK_SECRET_FOR_TEST": "sk-hidden", "PATH": "/usr/bin:/bin"}
    # The system interpreter: the test's may live where `nobody` cannot read it.
    python = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
    proc = subprocess.Popen([python, "-c", SCRIPT, "1" if hardened else "0"], env=env, user=uid,
                            group=uid, extra_groups=[], stdout=subprocess.PIPE, cwd="/")
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == b"ready"
        seen = _peer_reads_environ(proc.pid, uid)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    if hardened:
        assert seen.startswith("refused:"), seen
    else:
        assert "sk-hidden" in seen  # the control: without it, a peer reads the key


def test_undumpable_sets_the_flag() -> None:
    pid = os.fork()
    if pid == 0:
        import ctypes

        from backend.host import undumpable

        undumpable()
        os._exit(ctypes.CDLL(None).prctl(3, 0, 0, 0, 0))  # PR_GET_DUMPABLE: 0 expected
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
