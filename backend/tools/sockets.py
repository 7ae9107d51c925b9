"""Unix sockets on the filesystem, found so the sandbox can cover them.

`--unshare-net` cuts a command off from the network and from abstract sockets,
but a socket with a path is reached through the filesystem, and a read-only
mount does not stop `connect`.  Outside the sandbox such sockets are doors: the
system D-Bus (logind powers the machine off), `docker.sock` (root, in effect),
an SSH ControlMaster (a logged-in connection to a server), `screen` and `tmux`
sessions, an agent's socket.  The sandbox covers every socket `find` lists with
an empty file (connecting to it is refused), and hides /tmp and /var/tmp behind
empty folders of its own.

Where it looks, bounded: /run (every call: it is small, and new sockets appear
there), /var, the hidden folders of the home folder, /srv, /opt, /mnt, /media
(remembered for `CACHE_S`).  A socket created after the walk (a daemon that
starts while the command runs) is not covered; sockets in the session folder
itself are the project's and stay reachable, except in the hidden folders of a
session rooted at the home folder.
"""

from __future__ import annotations

import os
import stat
import threading
import time
from collections.abc import Iterable
from pathlib import Path

CACHE_S = 30.0
MAX_ENTRIES = 20_000  # entries looked at per walk of the remembered places
MAX_SOCKETS = 512
_RUN_DEPTH = 6
_OTHER_DEPTH = 4
_ALSO_DEPTH = 2
_SKIP = frozenset({"/var/tmp", "/var/run", "/var/lib/docker", "/var/lib/containers", "/var/cache",
                   "/var/lib/apt", "/var/lib/dpkg", "/var/log", "/var/lib/flatpak", "/var/lib/snapd"})

_lock = threading.Lock()
_cached: tuple[float, str, tuple[str, ...]] | None = None


def find(skip: Iterable[str] = (), also: Iterable[str] = ()) -> list[str]:
    """Real paths of the sockets to cover, /run (and the folders `also`) walked now and the
    rest remembered; none under a folder in `skip` (folders the sandbox hides anyway), except
    in `also`."""
    global _cached
    hidden = [os.path.realpath(h) for h in skip]
    home = os.path.realpath(Path.home())
    now = time.monotonic()
    with _lock:
        if _cached is None or now - _cached[0] > CACHE_S or _cached[1] != home:
            _cached = (now, home, tuple(_walk_all(_slow_roots(home), _OTHER_DEPTH)))
        slow = _cached[2]
    extra = [os.path.realpath(a) for a in also]
    found = [*_walk_all(["/run"], _RUN_DEPTH), *_walk_all(extra, _ALSO_DEPTH, skip=hidden), *slow]
    out = [p for p in dict.fromkeys(found)
           if any(_under(p, a) for a in extra) or not any(_under(p, h) for h in hidden)]
    return out[:MAX_SOCKETS]


def _slow_roots(home: str) -> list[str]:
    roots = ["/var", "/srv", "/opt", "/mnt", "/media"]
    try:
        with os.scandir(home) as entries:
            roots += [e.path for e in entries if e.name.startswith(".") and e.is_dir(follow_symlinks=False)]
    except OSError:
        pass
    return roots


def _walk_all(roots: list[str], depth: int, skip: Iterable[str] = ()) -> list[str]:
    budget = [MAX_ENTRIES]
    out: list[str] = []
    skipped = _SKIP.union(skip)
    for root in roots:
        real = os.path.realpath(root)
        if real == root or not os.path.islink(root):  # /var/run -> /run is walked as /run
            _walk(real, depth, out, budget, skipped)
    return out


def _walk(folder: str, depth: int, out: list[str], budget: list[int], skipped: frozenset[str]) -> None:
    if depth < 0 or folder in skipped or budget[0] <= 0:
        return
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        budget[0] -= 1
        if budget[0] <= 0:
            return
        try:
            if entry.is_dir(follow_symlinks=False):
                _walk(entry.path, depth - 1, out, budget, skipped)
            elif not entry.is_file(follow_symlinks=False) and not entry.is_symlink() and \
                    stat.S_ISSOCK(entry.stat(follow_symlinks=False).st_mode):
                out.append(entry.path)
        except OSError:
            continue


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")
