"""Races: a thread swaps a symlink as fast as it can while the file tools run hundreds of times.

Each call goes through its guard and then its run, as the executor does; a call the guard
asks about is denied (or approved for one place only).  Whatever the interleaving, nothing
may land where it was not allowed: the assertions count outcomes, they never time anything.
The counts are printed (pytest -s) for the record.
"""

import itertools
import os
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from backend.tools.base import ToolContext
from backend.tools.files import ReadFile, WriteFile

ROUNDS = 300
READ, WRITE = ReadFile(), WriteFile()


pytestmark = pytest.mark.usefixtures("resolver")  # openat2 and the walk alike


@contextmanager
def flipping(link: Path, *targets: Path) -> Iterator[None]:
    """`link` points at each target in turn, swapped atomically (rename over it) in a loop."""
    link.symlink_to(targets[0])
    stop = threading.Event()

    def flip() -> None:
        for n in itertools.count():
            if stop.is_set():
                return
            fresh = link.with_name(f".swap{n}")
            fresh.symlink_to(targets[n % len(targets)])
            os.replace(fresh, link)
            time.sleep(0)  # lets the tool run between any two swaps, not once per GIL slice

    thread = threading.Thread(target=flip, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def context(cwd: Path, data: Path, approved: object = None) -> ToolContext:
    ctx = ToolContext(cwd=cwd, session_id="s", turn_id="t", call_id="c", env={}, data_dir=data)
    ctx.approved = approved  # type: ignore[assignment]
    return ctx


async def test_writes_through_a_swapping_symlink_never_land_outside(tmp_path: Path) -> None:
    cwd, out, data = tmp_path / "cwd", tmp_path / "out", tmp_path / "data"
    (cwd / "in").mkdir(parents=True)
    out.mkdir()
    seen: Counter[str] = Counter()
    with flipping(cwd / "link", cwd / "in", out):
        for i in range(ROUNDS):
            args = {"path": f"link/f{i}.txt", "content": "x"}
            if WRITE.guard(args, cwd, "smart", data) is not None:
                seen["asked (denied)"] += 1
                continue
            result = await WRITE.run(args, context(cwd, data))
            seen["written" if result.status == "ok" else "refused at run"] += 1
    landed_in, landed_out = len(list((cwd / "in").iterdir())), len(list(out.iterdir()))
    print(f"\nwrite race: {dict(seen)}; landed inside {landed_in}, outside {landed_out}")
    assert landed_out == 0
    assert landed_in == seen["written"]


async def test_an_approval_for_one_folder_never_writes_into_another(tmp_path: Path) -> None:
    cwd, a, b, data = tmp_path / "cwd", tmp_path / "a", tmp_path / "b", tmp_path / "data"
    for folder in (cwd, a, b):
        folder.mkdir()
    seen: Counter[str] = Counter()
    with flipping(cwd / "link", a, b):
        for i in range(ROUNDS):
            args = {"path": f"link/f{i}.txt", "content": "x"}
            guard = WRITE.guard(args, cwd, "smart", data)
            assert guard is not None
            if guard.rule_key != str(a):
                seen["denied (b)"] += 1
                continue
            result = await WRITE.run(args, context(cwd, data, approved=guard))  # a person said yes
            seen["written" if result.status == "ok" else "refused at run"] += 1
    print(f"\napproval race: {dict(seen)}; in a {len(list(a.iterdir()))}, in b {len(list(b.iterdir()))}")
    assert list(b.iterdir()) == []
    assert len(list(a.iterdir())) == seen["written"]


async def test_reads_through_a_swapping_symlink_never_see_the_data_folder(tmp_path: Path) -> None:
    cwd, data = tmp_path / "cwd", tmp_path / "data"
    cwd.mkdir()
    data.mkdir()
    (data / "backend.json").write_text('{"token": "secret-owner-token"}\n')
    (cwd / "ok.txt").write_text("fine\n")
    seen: Counter[str] = Counter()
    with flipping(cwd / "link", cwd / "ok.txt", data / "backend.json"):
        for _ in range(ROUNDS):
            args = {"path": "link"}
            if READ.guard(args, cwd, "smart", data) is not None:
                seen["refused by guard"] += 1
                continue
            result = await READ.run(args, context(cwd, data))
            assert "secret-owner-token" not in result.content
            seen["read" if result.status == "ok" else "refused at run"] += 1
    print(f"\nread race: {dict(seen)}")
