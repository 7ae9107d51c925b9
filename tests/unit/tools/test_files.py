"""read_file, write_file and patch on a temp folder: reading in pages, atomic checkpointed writes, patches."""

import asyncio
import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from backend.tools.base import ToolContext
from backend.tools.files import Patch, ReadFile, WriteFile

READ, WRITE, PATCH = ReadFile(), WriteFile(), Patch()


def _snapshot(path: Path) -> tuple[Path, bytes | None]:
    return path, path.read_bytes() if path.exists() else None


def _names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def _ctx(cwd: Path, checkpoints: list[tuple[Path, bytes | None]] | None = None) -> ToolContext:
    """A context whose checkpoint records what it is given, after checking that it is the
    file's content at the moment it is called."""
    ctx = ToolContext(cwd=cwd, session_id="s", turn_id="t", call_id="c", env={},
                      data_dir=cwd.parent / "turnkey-data")
    if checkpoints is not None:

        async def checkpoint(path: Path, old: bytes | None) -> None:
            assert _snapshot(path) == (path, old)
            checkpoints.append((path, old))

        ctx.checkpoint = checkpoint
    return ctx


# ---- read_file ---------------------------------------------------------------------------


async def test_read_numbers_lines(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("one\ntwo\nthree\n")
    result = await READ.run({"path": "a.txt"}, _ctx(tmp_path))
    assert result.status == "ok"
    assert result.content == "     1\tone\n     2\ttwo\n     3\tthree"


async def test_read_pages_with_offset_and_limit(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    result = await READ.run({"path": "a.txt", "offset": 4, "limit": 3}, _ctx(tmp_path))
    assert result.content.splitlines()[:3] == ["     4\tline 4", "     5\tline 5", "     6\tline 6"]
    assert "offset=7" in result.content
    last = await READ.run({"path": "a.txt", "offset": 9, "limit": 5}, _ctx(tmp_path))
    assert "offset=" not in last.content
    assert last.content.endswith("line 10")
    past = await READ.run({"path": "a.txt", "offset": 50}, _ctx(tmp_path))
    assert past.status == "ok"
    assert "past the end" in past.content
    assert "10 lines" in past.content


async def test_read_cuts_long_lines_and_caps_output(tmp_path: Path) -> None:
    (tmp_path / "long.txt").write_text("x" * 5000 + "\nshort\n")
    result = await READ.run({"path": "long.txt"}, _ctx(tmp_path))
    first, second = result.content.splitlines()
    assert first.startswith("     1\t" + "x" * 2000 + " [... line cut: 5,000")
    assert second == "     2\tshort"
    (tmp_path / "big.txt").write_text(("y" * 1000 + "\n") * 500)
    big = await READ.run({"path": "big.txt"}, _ctx(tmp_path))
    assert len(big.content) <= 101_000
    assert "call read_file with offset=" in big.content


async def test_read_empty_file(tmp_path: Path) -> None:
    (tmp_path / "empty").write_text("")
    result = await READ.run({"path": "empty"}, _ctx(tmp_path))
    assert (result.status, result.content) == ("ok", "(empty file)")


async def test_read_refuses_binary(tmp_path: Path) -> None:
    (tmp_path / "b.bin").write_bytes(b"abc\0def" * 10)
    result = await READ.run({"path": "b.bin"}, _ctx(tmp_path))
    assert result.status == "error"
    assert result.content == "binary file (70 bytes); not shown"


async def test_read_errors_are_clear(tmp_path: Path) -> None:
    missing = await READ.run({"path": "nope.txt"}, _ctx(tmp_path))
    assert missing.status == "error"
    assert "no such file" in missing.content
    folder = await READ.run({"path": "."}, _ctx(tmp_path))
    assert folder.status == "error"
    assert "is a folder" in folder.content


@contextlib.contextmanager
def _as_unprivileged() -> Iterator[None]:
    """Root reads anything: as root, act as `nobody` for the block (the effective uid only,
    so root comes back), else as the user who runs the tests."""
    if os.geteuid() != 0:
        yield
        return
    os.seteuid(65534)
    try:
        yield
    finally:
        os.seteuid(0)


@pytest.fixture
def unreadable() -> Iterator[Path]:
    """A folder anyone may enter holding a file mode 000 (tmp_path is closed to others)."""
    folder = Path(tempfile.mkdtemp(prefix="turnkey-perm-"))
    folder.chmod(0o755)
    (folder / "secret").write_text("x")
    (folder / "secret").chmod(0)
    yield folder
    shutil.rmtree(folder)


async def test_read_permission_denied(unreadable: Path) -> None:
    await asyncio.to_thread(lambda: None)  # the worker threads exist before privileges drop
    with _as_unprivileged():
        result = await READ.run({"path": "secret"}, _ctx(unreadable))
    assert result.status == "error"
    assert "permission denied" in result.content


def test_read_never_asks_or_spills(tmp_path: Path) -> None:
    assert READ.guard({"path": "/etc/passwd"}, tmp_path, "ask", tmp_path / "data") is None
    assert READ.spill is False


# ---- write_file --------------------------------------------------------------------------


async def test_write_creates_parents_and_reports_a_diff(tmp_path: Path) -> None:
    seen: list[tuple[Path, bytes | None]] = []
    result = await WRITE.run({"path": "deep/er/new.txt", "content": "a\nb\n"}, _ctx(tmp_path, seen))
    target = tmp_path / "deep" / "er" / "new.txt"
    assert result.status == "ok"
    assert target.read_text() == "a\nb\n"
    assert result.meta["created"] is True
    assert "+a\n+b\n" in result.meta["diff"]
    assert result.summary == "created deep/er/new.txt (2 lines)"
    assert seen == [(target.resolve(), None)]


async def test_write_checkpoints_the_old_content_before_writing(tmp_path: Path) -> None:
    target = tmp_path / "f.txt"
    target.write_text("old\n")
    target.chmod(0o640)
    seen: list[tuple[Path, bytes | None]] = []
    result = await WRITE.run({"path": "f.txt", "content": "new\n"}, _ctx(tmp_path, seen))
    assert seen == [(target.resolve(), b"old\n")], "the checkpoint must see the content before the write"
    assert target.read_text() == "new\n"
    assert result.meta["created"] is False
    assert "-old\n+new\n" in result.meta["diff"]
    assert (target.stat().st_mode & 0o777) == 0o640
    assert _names(tmp_path) == ["f.txt"], "no temp file is left behind"


async def test_write_caps_the_diff(tmp_path: Path) -> None:
    content = "".join(f"line {i}\n" for i in range(10_000))
    result = await WRITE.run({"path": "big.txt", "content": content}, _ctx(tmp_path))
    assert len(result.meta["diff"]) < 21_000
    assert "[... diff cut ...]" in result.meta["diff"]


async def test_write_onto_a_folder_fails(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    result = await WRITE.run({"path": "d", "content": "x"}, _ctx(tmp_path))
    assert result.status == "error"
    assert "folder" in result.content


def test_write_guard_follows_the_mode(tmp_path: Path) -> None:
    data = tmp_path / "data"
    assert WRITE.guard({"path": "in.txt"}, tmp_path, "smart", data) is None
    outside = WRITE.guard({"path": "/elsewhere/x.txt"}, tmp_path, "smart", data)
    assert outside is not None
    assert outside.kind == "dangerous"
    assert WRITE.guard({"path": "in.txt"}, tmp_path, "ask", data) is not None
    assert WRITE.guard({"path": "/elsewhere/x.txt"}, tmp_path, "off", data) is None
    assert WRITE.changes_files
    assert PATCH.changes_files


# ---- patch -------------------------------------------------------------------------------


async def test_patch_replaces_once_with_checkpoint_and_diff(tmp_path: Path) -> None:
    target = tmp_path / "code.py"
    target.write_text("def f():\n    return 1\n")
    seen: list[tuple[Path, bytes | None]] = []
    args = {"path": "code.py", "old": "return 1", "new": "return 2"}
    result = await PATCH.run(args, _ctx(tmp_path, seen))
    assert result.status == "ok", result.content
    assert target.read_text() == "def f():\n    return 2\n"
    assert seen == [(target.resolve(), b"def f():\n    return 1\n")]
    assert "-    return 1\n+    return 2\n" in result.meta["diff"]
    assert result.summary == "patched code.py (1 replacement)"


async def test_patch_ambiguity_and_replace_all(tmp_path: Path) -> None:
    target = tmp_path / "t.txt"
    target.write_text("x = 1\nx = 1\nx = 1\n")
    seen: list[tuple[Path, bytes | None]] = []
    ambiguous = await PATCH.run({"path": "t.txt", "old": "x = 1", "new": "x = 2"}, _ctx(tmp_path, seen))
    assert ambiguous.status == "error"
    assert "3 times" in ambiguous.content
    assert "replace_all" in ambiguous.content
    assert seen == [], "a refused patch takes no checkpoint"
    assert target.read_text() == "x = 1\nx = 1\nx = 1\n", "a refused patch changes nothing"
    args = {"path": "t.txt", "old": "x = 1", "new": "x = 2", "replace_all": True}
    done = await PATCH.run(args, _ctx(tmp_path, seen))
    assert done.status == "ok"
    assert "3 replacements" in done.summary
    assert target.read_text() == "x = 2\nx = 2\nx = 2\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"path": "missing.txt", "old": "a", "new": "b"}, "no such file"),
        ({"path": "t.txt", "old": "", "new": "b"}, "'old' must not be empty"),
        ({"path": "t.txt", "old": "absent", "new": "b"}, "'old' was not found"),
        ({"path": "t.txt", "old": "hello", "new": "hello"}, "the same"),
    ],
)
async def test_patch_errors(tmp_path: Path, args: dict[str, str], message: str) -> None:
    (tmp_path / "t.txt").write_text("hello world\n")
    result = await PATCH.run(args, _ctx(tmp_path))
    assert result.status == "error"
    assert message in result.content
    assert (tmp_path / "t.txt").read_text() == "hello world\n"


async def test_patch_keeps_crlf_and_undecodable_bytes(tmp_path: Path) -> None:
    target = tmp_path / "w.txt"
    target.write_bytes(b"caf\xe9\r\nline one\r\nline two\r\n")
    args = {"path": "w.txt", "old": "line one\nline two", "new": "only\nlines"}
    result = await PATCH.run(args, _ctx(tmp_path))
    assert result.status == "ok", result.content
    assert target.read_bytes() == b"caf\xe9\r\nonly\r\nlines\r\n"
