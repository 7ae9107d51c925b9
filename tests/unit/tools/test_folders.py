"""search_files and list_dir on a temp folder: matches, skipped noise, caps, listings."""

from pathlib import Path

from backend.tools.base import ToolContext
from backend.tools.folders import ListDir, SearchFiles

SEARCH, LIST = SearchFiles(), ListDir()


def _ctx(cwd: Path) -> ToolContext:
    return ToolContext(cwd=cwd, session_id="s", turn_id="t", call_id="c", env={},
                       data_dir=cwd.parent / "turnkey-data")


# ---- search_files ------------------------------------------------------------------------


async def test_search_finds_lines_and_skips_noise(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text("import os\nneedle = 1\n")
    (tmp_path / "src" / "b.txt").write_text("a needle here\n")
    for skipped in (".git", "node_modules", "__pycache__", ".venv"):
        (tmp_path / skipped).mkdir()
        (tmp_path / skipped / "x.py").write_text("needle\n")
    (tmp_path / "bin.dat").write_bytes(b"needle\0")
    (tmp_path / "huge.txt").write_text("needle\n" + "z" * (3 * 1024 * 1024))
    result = await SEARCH.run({"pattern": r"needle\b"}, _ctx(tmp_path))
    assert result.status == "ok"
    assert result.content.splitlines() == ["src/a.py:2: needle = 1", "src/b.txt:1: a needle here"]
    only_py = await SEARCH.run({"pattern": "needle", "glob": "*.py"}, _ctx(tmp_path))
    assert only_py.content == "src/a.py:2: needle = 1"
    in_sub = await SEARCH.run({"pattern": "needle", "path": "src", "glob": "src/**/*.txt"}, _ctx(tmp_path))
    assert in_sub.content == "src/b.txt:1: a needle here"


async def test_search_caps_matches(tmp_path: Path) -> None:
    (tmp_path / "many.txt").write_text("hit\n" * 500)
    result = await SEARCH.run({"pattern": "hit"}, _ctx(tmp_path))
    lines = result.content.splitlines()
    assert len(lines) == 201
    assert lines[-1].startswith("[capped at 200 matches")
    (tmp_path / "many.txt").write_text(("hit " + "w" * 400 + "\n") * 190)
    wide = await SEARCH.run({"pattern": "hit"}, _ctx(tmp_path))
    assert len(wide.content) < 52_000
    assert "[capped at" in wide.content


async def test_search_errors_and_no_match(tmp_path: Path) -> None:
    bad = await SEARCH.run({"pattern": "(unclosed"}, _ctx(tmp_path))
    assert bad.status == "error"
    assert "invalid regular expression" in bad.content
    missing = await SEARCH.run({"pattern": "x", "path": "nope"}, _ctx(tmp_path))
    assert missing.status == "error"
    (tmp_path / "a.txt").write_text("nothing\n")
    none = await SEARCH.run({"pattern": "absent"}, _ctx(tmp_path))
    assert none.status == "ok"
    assert "no matches" in none.content


# ---- list_dir ----------------------------------------------------------------------------


async def test_list_dirs_first_with_kinds_and_sizes(tmp_path: Path) -> None:
    (tmp_path / "b.txt").write_text("12345")
    (tmp_path / "A.md").write_text("")
    (tmp_path / "zdir").mkdir()
    (tmp_path / "link").symlink_to("b.txt")
    result = await LIST.run({}, _ctx(tmp_path))
    assert result.content.splitlines() == [
        "dir   zdir/",
        "file  A.md  (0 bytes)",
        "file  b.txt  (5 bytes)",
        "link  link -> b.txt",
    ]
    assert result.summary == "4 entries in ."


async def test_list_caps_entries(tmp_path: Path) -> None:
    for i in range(1_005):
        (tmp_path / f"f{i:04}").write_text("")
    result = await LIST.run({"path": str(tmp_path)}, _ctx(tmp_path))
    lines = result.content.splitlines()
    assert len(lines) == 1_001
    assert lines[-1] == "[... 5 more entries not shown]"


async def test_list_errors(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("")
    assert (await LIST.run({"path": "nope"}, _ctx(tmp_path))).status == "error"
    assert (await LIST.run({"path": "f"}, _ctx(tmp_path))).status == "error"
    empty = tmp_path / "empty"
    empty.mkdir()
    assert (await LIST.run({"path": "empty"}, _ctx(tmp_path))).content == "(empty folder)"
