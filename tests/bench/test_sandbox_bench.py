"""What the sandbox's protections cost per terminal call: building the command line (the walk
for code-bearing project files and for sockets) and running `true` in it, against bubblewrap
with the bare profile (read-only root, private /tmp, the session folder writable) in the same
run.

The session folder looks like a developer's: 30 projects, each a git repository with a few
folders, so the walk for `.git`, `.envrc` and `.vscode` has work to do.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from statistics import median

import pytest

from backend.tools import protected, sockets
from backend.tools.sandbox import command_argv, find_bwrap

from .client import ms

ROUNDS = 40


def _workspace(root: Path) -> Path:
    session = root / "code"
    for n in range(30):
        project = session / f"project-{n}"
        for sub in ("src", "tests", "docs"):
            (project / sub).mkdir(parents=True)
        subprocess.run(["git", "init", "-q", str(project)], check=True)
        if n % 5 == 0:
            (project / ".envrc").write_text("")
    return session


@pytest.mark.bench
def test_sandbox_call_overhead(tmp_path: Path) -> None:
    bwrap = find_bwrap()
    assert bwrap is not None
    session = _workspace(tmp_path)
    data = tmp_path / "data"
    data.mkdir()
    bare = [bwrap, "--unshare-pid", "--unshare-net", "--die-with-parent", "--ro-bind", "/", "/",
            "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--bind", str(session), str(session),
            "--chdir", str(session), "--", "/bin/true"]

    def build() -> list[str]:
        return command_argv(bwrap, "true", workdir=session, session_dir=session, data_dir=data,
                            env={"PATH": "/usr/bin:/bin"}, network=False)

    def run(argv: list[str]) -> None:
        assert subprocess.run(argv, capture_output=True).returncode == 0

    found = protected.scan(session)
    assert len(found.git_dirs) == 30  # the walk finds what it must
    builds, raws, fulls, scans = [], [], [], []
    for _ in range(ROUNDS):
        t = time.perf_counter()
        argv = build()
        builds.append(time.perf_counter() - t)
        t = time.perf_counter()
        protected.scan(session)
        scans.append(time.perf_counter() - t)
        t = time.perf_counter()
        run(bare)
        raws.append(time.perf_counter() - t)
        t = time.perf_counter()
        run(argv)
        fulls.append(time.perf_counter() - t)
    t = time.perf_counter()
    sockets._cached = None  # one walk of the remembered places, as every CACHE_S seconds
    sockets.find()
    cold = time.perf_counter() - t
    raw, full = median(raws), median(fulls)
    print(f"\nBENCH sandbox call: bare bwrap {ms(raw)}, full profile {ms(full)} "
          f"(x{full / raw:.2f}), command line built in {ms(median(builds))} "
          f"(project walk {ms(median(scans))}, 30 repositories), socket walk uncached {ms(cold)}")
