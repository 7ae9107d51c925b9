"""The command sandbox: bubblewrap's command line for one terminal call, and what a call may see.

Profile "workspace-write", built from mounts applied in order (a later mount
covers an earlier one, so the order is the policy):

1. the whole filesystem, read-only;
2. a fresh /dev and a /proc of the sandbox's own pid namespace (no process
   outside the call is visible, the backend's environment least of all);
3. a private, empty /tmp;
4. the session folder, writable (after /tmp: a session folder may live there);
5. the runtime folder (keyring and D-Bus sockets) and Turnkey's data folder
   covered by empty read-only folders (last: the data folder may sit inside
   the session folder, as it does when the session folder is the home folder).

The call runs in new pid, ipc and (unless the network is allowed) network
namespaces, with every capability dropped, and dies with its parent (and, for a
terminal call, with its lifeline: see `bound`); when the sandbox's first process
ends the kernel ends every process in its pid namespace, detached (`setsid`,
`nohup`) or not.  Unix sockets outside the session folder are covered (see
`sockets`), code-bearing project files are read-only (see `protected`), and a call
may have at most MAX_PROCESSES processes.  The environment is an
allowlist: nothing that names a provider key or Turnkey's own variables gets
through, whatever `[sandbox] env` says.

Where bubblewrap cannot run (not installed, no user namespaces, not Linux),
`probe` says why once, and the terminal falls back to asking a person for
every command that is not plainly read-only.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import shutil
import stat
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from backend import host
from backend.tools import protected, sockets
from shared.protocol import SandboxSummary

log = logging.getLogger("tools")

BWRAP_ENV = "TURNKEY_BWRAP"  # another bwrap to use; "none" turns the sandbox off (tests, bad hosts)
KIND = "bubblewrap"

# Variables a command sees when the backend has them; `[sandbox] env` adds names.
ALLOWED_ENV = frozenset({
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TERM", "COLORTERM", "TZ",
    "NO_COLOR", "EDITOR", "VISUAL", "PAGER",
})
ALLOWED_ENV_PREFIXES = ("LC_",)
_NEVER_PREFIXES = ("TURNKEY_",)
_PROBE_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Probe:
    """Whether bubblewrap works on this host; `reason` says why not, in words for people."""

    available: bool
    bwrap: str | None = None
    reason: str | None = None


def find_bwrap() -> str | None:
    chosen = os.environ.get(BWRAP_ENV)
    if chosen == "none":
        return None
    if chosen:
        return chosen if os.access(chosen, os.X_OK) else None
    return shutil.which("bwrap") or next(
        (p for p in ("/usr/bin/bwrap", "/bin/bwrap") if os.access(p, os.X_OK)), None)


async def probe() -> Probe:
    """Runs an empty command in the full profile once: a host without user namespaces, or
    a container that forbids mounts, fails here instead of in the middle of a turn."""
    if not sys.platform.startswith("linux"):
        return Probe(False, None,
                     f"commands cannot be sandboxed on {sys.platform} (bubblewrap is Linux only)")
    bwrap = find_bwrap()
    if bwrap is None:
        why = ("the sandbox is switched off by TURNKEY_BWRAP=none" if os.environ.get(BWRAP_ENV) == "none"
               else "bubblewrap is not installed (Debian/Ubuntu: sudo apt-get install bubblewrap)")
        return Probe(False, None, why)
    argv = [bwrap, *_isolation(network=False), "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
            "--tmpfs", "/tmp", "--", "/bin/true"]
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE)
        _, err = await asyncio.wait_for(proc.communicate(), _PROBE_TIMEOUT_S)
    except (OSError, TimeoutError) as exc:
        return Probe(False, bwrap, f"bubblewrap could not start: {exc}")
    if proc.returncode != 0:
        detail = err.decode(errors="replace").strip().splitlines()
        return Probe(False, bwrap, "bubblewrap cannot create its namespaces here"
                     + (f" ({detail[-1]})" if detail else "")
                     + "; user namespaces may be disabled (kernel.unprivileged_userns_clone)")
    return Probe(True, bwrap)


# The program starts only once the sandbox's first process (bubblewrap's init, pid 1 here)
# waits for it, which it does only after it asked to die with its parent.  bubblewrap forks
# the program and then makes that request: on a loaded machine the program could run and
# the backend be killed in between, and nothing would end the sandbox (a detached child of
# a call outlived a kill -9 of the backend, tests/integration/test_sandbox_turns.py).  The
# state of /proc/1 is "S" only in that wait; `exec` then replaces this shell by the program.
BOUND_TO_PARENT = ('while read -r _ _ state _ < /proc/1/stat && [ "$state" != S ]; do :; done; '
                   'exec "$0" "$@"')


LIFELINE_FD = 9  # where a call's lifeline is inside the sandbox (dash takes one digit)


def bound(lifeline: bool) -> str:
    """The shell script that starts the program (see BOUND_TO_PARENT).  With `lifeline`, fd
    LIFELINE_FD is the read end of a pipe whose only write end the backend holds (the
    `lifeline_pipe`): a watcher waits on it, and when
    the backend dies, however it dies, the pipe ends and the watcher kills every process of
    the sandbox.  The death signals bubblewrap chains (backend, bubblewrap, its pid 1) are
    not enough alone: with a backend of several threads, under load, about one kill -9 in
    twenty left pid 1 and everything under it running (the kernel never signalled pid 1;
    tests/integration/test_sandbox_turns.py, seen with the kernel's signal tracepoints)."""
    if not lifeline:
        return BOUND_TO_PARENT
    fd = LIFELINE_FD
    watch = f"(read -r _ <&{fd}; kill -KILL -1) & exec {fd}<&-; "
    return BOUND_TO_PARENT.replace('exec "$0"', watch + 'exec "$0"')


def lifeline_pipe() -> tuple[int, int]:
    """A pipe (read end, write end) for a call's sandbox: the read end goes to the child as
    LIFELINE_FD, the write end stays with the backend until the call ends (see `bound`).
    The read end is numbered above the standard three: with stdin closed, a pipe could get
    0, which the child's stdin replaces."""
    read, write = os.pipe()
    try:
        high = fcntl.fcntl(read, fcntl.F_DUPFD_CLOEXEC, 3)
    finally:
        os.close(read)
    return high, write


def under_tmp(argv: list[str], data_dir: Path) -> list[Path]:
    """The folders of the program and of the files its command line names that live
    under /tmp or /var/tmp, which the sandbox replaces with private ones: shown read-only, so a
    program installed there (a virtualenv, a checkout, a hook's script) still runs.  A program
    in a `bin` folder brings the prefix above it (a virtualenv's `lib`); the data folder stays
    hidden."""
    temps = {Path("/tmp"), Path(os.path.realpath("/var/tmp"))}
    data = Path(os.path.realpath(data_dir))
    found: set[Path] = set()
    for n, arg in enumerate(argv):
        if not arg.startswith("/"):
            continue
        for path in {Path(os.path.abspath(arg)), Path(os.path.realpath(arg))}:
            tmp = next((t for t in temps if t in path.parents), None)
            if not path.exists() or tmp is None:
                continue
            folder = path if path.is_dir() else path.parent
            if n == 0 and folder.name == "bin" and folder.parent != tmp:
                folder = folder.parent
            # A folder holding the data folder may be shown: the data folder is hidden
            # again over it (exec_argv mounts it last), as in a session folder.
            if folder != tmp and folder != data and data not in folder.parents:
                found.add(folder)
    return sorted(found)


def _isolation(*, network: bool) -> list[str]:
    out = ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
           "--die-with-parent", "--cap-drop", "ALL"]
    if not network:
        out.append("--unshare-net")
    return out


def command_argv(
    bwrap: str, command: str, *, workdir: Path, session_dir: Path, data_dir: Path,
    env: Mapping[str, str], network: bool, writable: Iterable[Path] = (),
    kept: protected.Found | None = None, lifeline: bool = False,
) -> list[str]:
    """bubblewrap's arguments for `/bin/sh -c command`; see the module docstring."""
    return exec_argv(bwrap, ["/bin/sh", "-c", command], workdir=workdir, session_dir=session_dir,
                     data_dir=data_dir, env=env, network=network, writable=writable, kept=kept,
                     lifeline=lifeline)


def exec_argv(
    bwrap: str, program: list[str], *, workdir: Path, session_dir: Path, data_dir: Path,
    env: Mapping[str, str], network: bool, readable: Iterable[Path] = (),
    writable: Iterable[Path] = (), kept: protected.Found | None = None,
    lifeline: bool = False,
) -> list[str]:
    """bubblewrap's arguments for running `program` (an argv) in the profile.  `readable`:
    folders under /tmp shown read-only over the private /tmp (an MCP server's own program).
    `writable`: paths outside the session folder a person allowed this call to change.
    `kept`: the session folder's code-bearing files (`protected.scan`), when already found.
    `lifeline`: fd LIFELINE_FD ends the sandbox when it ends (see `bound`)."""
    session = Path(os.path.realpath(session_dir))
    argv = [bwrap, *_isolation(network=network),
            "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    var_tmp = os.path.realpath("/var/tmp")
    if var_tmp != "/tmp" and os.path.isdir(var_tmp):
        argv += ["--tmpfs", var_tmp]
    for folder in readable:
        argv += ["--ro-bind", str(folder), str(folder)]
    # A session folder in /tmp: its surroundings are shown as they are, read-only, rather than
    # as empty folders of the private /tmp where a write to `../x` would seem to succeed and
    # vanish with the call ("done, exit 0" for a change that never happened).
    around = _temp_top(session, ("/tmp", var_tmp))
    if around is not None:
        argv += ["--ro-bind", around, around]
    for path in writable:
        argv += ["--bind", str(path), str(path)]
    if session.is_dir():
        argv += ["--bind", str(session), str(session)]
        for option, place in (kept or protected.scan(session, workdir)).mounts():
            argv += [option, place, place]
    hidden = _hidden(data_dir)
    skip = [*map(str, hidden), "/tmp", var_tmp, str(session)]
    for sock in sockets.find(skip=skip, also=[around] if around else []):
        argv += ["--ro-bind", "/dev/null", sock]
    for folder in hidden:
        argv += ["--tmpfs", str(folder), "--remount-ro", str(folder)]
    argv += ["--clearenv"]
    for key, value in sorted(env.items()):
        argv += ["--setenv", key, value]
    argv += ["--setenv", "TMPDIR", "/tmp", "--chdir", str(workdir), "--",
             "/bin/sh", "-c", bound(lifeline), *_limited(program)]
    return argv


def unsandboxed_argv(bwrap: str, program: list[str], *, workdir: Path, data_dir: Path,
                     lifeline: bool = False) -> list[str]:
    """bubblewrap's arguments for a command a person let out of the sandbox: it may change
    every file the user can and use the network, but it runs in its own pid and mount
    namespaces, so Turnkey's data folder (the owner token), the runtime folder (the keyring)
    and the system bus (power-off) are out of its sight, and everything it started ends with
    it: a daemon it leaves behind can neither outlive the call nor reach the backend as one
    of the user's own programs."""
    argv = [bwrap, "--unshare-pid", "--die-with-parent",
            "--bind", "/", "/", "--dev-bind", "/dev", "/dev", "--proc", "/proc"]
    for bus in SYSTEM_BUS:
        if os.path.exists(bus) and stat.S_ISSOCK(os.stat(bus).st_mode):
            argv += ["--ro-bind", "/dev/null", os.path.realpath(bus)]
            break
    for folder in _hidden(data_dir):
        argv += ["--tmpfs", str(folder), "--remount-ro", str(folder)]
    return [*argv, "--chdir", str(workdir), "--", "/bin/sh", "-c", bound(lifeline), *program]


SYSTEM_BUS = ("/run/dbus/system_bus_socket", "/var/run/dbus/system_bus_socket")
MAX_PROCESSES = 1024  # tasks (processes and threads) one sandboxed call may have at once
_PRLIMIT = shutil.which("prlimit") or next((p for p in ("/usr/bin/prlimit", "/bin/prlimit")
                                             if os.access(p, os.X_OK)), None)


def child_setup(bwrap: str) -> Callable[[], None]:
    """The `preexec_fn` of a sandboxed call: it dies with the backend, and where the kernel
    has Landlock scopes, abstract unix sockets made outside the call are out of its reach
    (the network namespace hides them too, but not from a call allowed the network).  Not
    for a setuid bubblewrap: no_new_privs, which Landlock needs, would take its privilege."""
    try:
        setuid = bool(os.stat(bwrap).st_mode & stat.S_ISUID)
    except OSError:
        setuid = True
    if setuid or host.landlock_abi() < 6:
        return host.die_with_parent

    def setup() -> None:
        host.die_with_parent()
        host.no_abstract_sockets()

    return setup


def _limited(program: list[str]) -> list[str]:
    """`program` under a process-count limit.  Set inside the sandbox's own user namespace,
    where it counts only the call's processes (a fork bomb stops at MAX_PROCESSES); the
    kernel does not apply it to root, and without util-linux's prlimit there is none."""
    if _PRLIMIT is None:
        return program
    return [_PRLIMIT, f"--nproc={MAX_PROCESSES}:{MAX_PROCESSES}", "--", *program]


def _temp_top(session: Path, temps: tuple[str, ...]) -> str | None:
    """The folder right under /tmp (or /var/tmp) that holds the session folder, if any."""
    for temp in temps:
        if session.is_relative_to(temp) and session != Path(temp):
            return os.path.join(temp, session.relative_to(temp).parts[0])
    return None


def _hidden(data_dir: Path) -> list[Path]:
    """Folders no command may see: the data folder (the token, the database, secrets, logs)
    and the user's runtime folder (keyring and D-Bus sockets)."""
    out = []
    runtime = os.environ.get("XDG_RUNTIME_DIR") or f"/run/user/{os.getuid()}"
    for folder in (runtime, os.fspath(data_dir)):
        real = Path(os.path.realpath(folder))
        if real.is_dir() and real != Path("/"):
            out.append(real)
    return out


def child_env(source: Mapping[str, str], extra: Iterable[str], secret_names: Iterable[str]) -> dict[str, str]:
    """The environment a command runs with: the allowlist and `extra` names taken from
    `source`, never a Turnkey variable or a variable that holds a provider key."""
    never = set(secret_names)
    wanted = set(extra)

    def allowed(name: str) -> bool:
        if name in never or name.startswith(_NEVER_PREFIXES):
            return False
        return name in ALLOWED_ENV or name in wanted or name.startswith(ALLOWED_ENV_PREFIXES)

    return {k: v for k, v in source.items() if allowed(k)}


class Sandbox:
    """What the terminal asks about sandboxing: is it on, may a call use the network, and
    the command line that runs it.  Settings are read per call (`config.set` applies at once)."""

    def __init__(self, found: Probe, data_dir: Path, settings: Callable[[], tuple[bool, bool]]) -> None:
        self.probe = found
        self.data_dir = data_dir
        self._settings = settings  # () -> (enabled, network)

    @property
    def active(self) -> bool:
        return self.probe.available and self._settings()[0]

    @property
    def network(self) -> bool:
        """Whether commands have the network without asking (`[sandbox] network = true`)."""
        return self._settings()[1]

    def why_off(self) -> str | None:
        """Why commands run unsandboxed, in words for people; None when they are sandboxed."""
        if not self.probe.available:
            return self.probe.reason or "bubblewrap is not available"
        if not self._settings()[0]:
            return "the sandbox is switched off in config.toml ([sandbox] enabled = false)"
        return None

    def summary(self) -> SandboxSummary:
        """`initialize`'s `capabilities.sandbox`: `active` false says why (`reason`)."""
        why = self.why_off()
        if why is None:
            return SandboxSummary(active=True, kind=KIND, network=self.network)
        return SandboxSummary(active=False, kind="none", network=self.network, reason=why)

    def argv(self, command: str, *, workdir: Path, session_dir: Path, env: Mapping[str, str],
             network: bool, writable: Iterable[Path] = (),
             kept: protected.Found | None = None, lifeline: bool = False) -> list[str]:
        assert self.probe.bwrap is not None, "argv() of an unavailable sandbox"
        return command_argv(self.probe.bwrap, command, workdir=workdir, session_dir=session_dir,
                            data_dir=self.data_dir, env=env, network=network or self.network,
                            writable=writable, kept=kept, lifeline=lifeline)

    def child_setup(self) -> Callable[[], None]:
        """The `preexec_fn` of a sandboxed call (see the function of that name)."""
        assert self.probe.bwrap is not None, "child_setup() of an unavailable sandbox"
        return child_setup(self.probe.bwrap)

    def program_argv(self, program: list[str], *, workdir: Path, env: Mapping[str, str],
                     lifeline: bool = False) -> tuple[list[str], bool]:
        """(argv, sandboxed) for a program of the person's (a hook) run as a command would be:
        in the profile with `workdir` writable and the network as `[sandbox] network` says,
        else as a command let out of the sandbox (`unsandboxed_argv`), else as it is."""
        if self.active:
            assert self.probe.bwrap is not None
            return exec_argv(self.probe.bwrap, program, workdir=workdir, session_dir=workdir,
                             data_dir=self.data_dir, env=env, network=self.network,
                             readable=under_tmp(program, self.data_dir), lifeline=lifeline), True
        if self.probe.bwrap is None or not self.probe.available:
            return list(program), False
        return unsandboxed_argv(self.probe.bwrap, program, workdir=workdir,
                                data_dir=self.data_dir, lifeline=lifeline), False

    def outside_argv(self, command: str, *, workdir: Path, lifeline: bool = False) -> list[str]:
        """A command that runs outside the sandbox (let out by a person, or with the sandbox
        switched off): `unsandboxed_argv` where bubblewrap works, else the plain shell."""
        if self.probe.bwrap is None or not self.probe.available:
            return ["/bin/sh", "-c", command]
        return unsandboxed_argv(self.probe.bwrap, ["/bin/sh", "-c", command], workdir=workdir,
                                data_dir=self.data_dir, lifeline=lifeline)


def unavailable(reason: str, data_dir: Path) -> Sandbox:
    """A sandbox that never runs anything (tests of the fallback, and hosts without one)."""
    return Sandbox(Probe(False, None, reason), data_dir, lambda: (False, False))
