"""What the repository holds: source, docs and a few screenshots, never downloads or build output.

A commit once added 59 wheels (38.9 MB) at the root.  This fails on any tracked file over
1 MB that is not on the short list below, and on a repository grown past 10 MB in all
(8 MB until the source itself passed it: 8.06 MB with questions, hooks and reviews, of which
2.3 MB are the screenshots; a wheel or two still fails it).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_FILE = 1_000_000
MAX_TOTAL = 10_000_000
# Files allowed over MAX_FILE, each with why.  Screenshots stay well under it today.
LARGE: dict[str, str] = {}


def tracked() -> list[Path]:
    # The suite runs in a clone (CI clones main); without git the check cannot be made, and
    # that is a failure to see, not a pass.
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True,
                         timeout=60).stdout
    return [ROOT / name for name in out.decode().split("\0") if name]


def test_no_tracked_file_is_large_unless_listed() -> None:
    big = {str(p.relative_to(ROOT)): p.stat().st_size for p in tracked()
           if p.is_file() and p.stat().st_size > MAX_FILE}
    unlisted = {name: size for name, size in big.items() if name not in LARGE}
    assert not unlisted, (f"files over {MAX_FILE:,} bytes (downloads and build output never belong "
                          f"here): {unlisted}")
    assert not [name for name in LARGE if name not in big], "LARGE names files that are small or gone"


def test_the_repository_stays_small() -> None:
    total = sum(p.stat().st_size for p in tracked() if p.is_file())
    assert total < MAX_TOTAL, f"{total:,} bytes tracked"


def test_wheels_and_build_output_are_ignored() -> None:
    for name in ("x-1.0-py3-none-any.whl", "build/lib/x.py", "dist/x.tar.gz"):
        checked = subprocess.run(["git", "check-ignore", "-q", name], cwd=ROOT, timeout=60)
        assert checked.returncode == 0, f"{name} is not ignored"
