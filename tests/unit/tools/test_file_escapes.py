"""The file tools against escapes: symlinks made between the check and the run, `..`, the data
folder reached any way, /proc secrets, hard links, pipes.  Real files in temp folders; each call
goes through its guard and then its run, as the executor does."""

import os
from pathlib import Path

import pytest

from backend.tools.base import Guard, Tool, ToolContext, ToolResult
from backend.tools.files import Patch, ReadFile, WriteFile
from backend.tools.folders import ListDir, SearchFiles
from shared.config import ApprovalMode

READ, WRITE, PATCH, SEARCH, LIST = ReadFile(), WriteFile(), Patch(), SearchFiles(), ListDir()
TOKEN = "owner-token-do-not-leak"
MODES: tuple[ApprovalMode, ...] = ("ask", "smart", "off")


def context(
    cwd: Path, data: Path, mode: ApprovalMode = "smart", approved: Guard | None = None
) -> ToolContext:
    return ToolContext(cwd=cwd, session_id="s", turn_id="t", call_id="c", env={}, mode=mode,
                       approved=approved, data_dir=data)


async def call(tool: Tool, args: dict[str, str], cwd: Path, data: Path, mode: ApprovalMode = "smart",
               approve: bool = False) -> ToolResult | Guard:
    """The guard, then (when it lets the call through, or `approve` says a person did) the run."""
    guard = tool.guard(args, cwd, mode, data)
    if guard is not None and (guard.kind == "hardline" or not approve):
        return guard
    return await tool.run(args, context(cwd, data, mode, guard))


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A session folder that is a home folder holding the data folder, with links into it."""
    home = tmp_path.resolve() / "home"
    data = home / ".local" / "share" / "turnkey"
    (data / "spill" / "s").mkdir(parents=True)
    (data / "backend.json").write_text(f'{{"token": "{TOKEN}"}}\n')
    (data / "secrets.json").write_text(f'{{"key": "{TOKEN}"}}\n')
    (data / "spill" / "s" / "c.txt").write_text("the long output\n")
    (home / "notes.txt").write_text("hello\n")
    (home / "to_data").symlink_to(data)
    (home / "to_token").symlink_to(data / "backend.json")
    (home / "sub").mkdir()
    return home


def data_of(home: Path) -> Path:
    return home / ".local" / "share" / "turnkey"


# ---- a symlink changed between the check and the run -----------------------------------------


async def test_a_symlink_made_between_guard_and_run_is_refused(tmp_path: Path) -> None:
    cwd, out, data = tmp_path / "cwd", tmp_path / "out", tmp_path / "data"
    cwd.mkdir()
    out.mkdir()
    for tool, args in ((WRITE, {"path": "link/x.txt", "content": "x"}),
                       (PATCH, {"path": "link/p.txt", "old": "a", "new": "b"})):
        (out / "p.txt").write_text("a\n")
        assert tool.guard(args, cwd, "smart", data) is None, "inside, as far as the guard saw"
        (cwd / "link").symlink_to(out)  # another call of the batch made it meanwhile
        result = await tool.run(args, context(cwd, data))
        assert result.status == "error"
        assert "now leads outside the session folder" in result.content
        assert sorted(p.name for p in out.iterdir()) == ["p.txt"]
        assert (out / "p.txt").read_text() == "a\n"
        (cwd / "link").unlink()


async def test_a_change_approved_for_one_place_never_lands_in_another(tmp_path: Path) -> None:
    cwd, a, b, data = tmp_path / "cwd", tmp_path / "a", tmp_path / "b", tmp_path / "data"
    for folder in (cwd, a, b):
        folder.mkdir()
    (cwd / "link").symlink_to(a)
    args = {"path": "link/x.txt", "content": "x"}
    guard = WRITE.guard(args, cwd, "smart", data)
    assert guard is not None
    assert guard.reason == "changes a file outside the session folder: the path leads there through a symlink"
    assert guard.rule_key == str(a)
    (cwd / "link").unlink()
    (cwd / "link").symlink_to(b)
    refused = await WRITE.run(args, context(cwd, data, approved=guard))
    assert refused.status == "error"
    assert f"now leads to {b}, not to {a}" in refused.content
    assert list(b.iterdir()) == []
    (cwd / "link").unlink()
    (cwd / "link").symlink_to(a)
    done = await WRITE.run(args, context(cwd, data, approved=guard))
    assert done.status == "ok", done.content
    assert (a / "x.txt").read_text() == "x", "the approved place"


@pytest.mark.parametrize("path", ["../x.txt", "sub/../../x.txt", "{root}/x.txt"])
async def test_dotdot_and_absolute_escapes_ask_and_never_run_unasked(tmp_path: Path, path: str) -> None:
    cwd, data = tmp_path / "cwd", tmp_path / "data"
    (cwd / "sub").mkdir(parents=True)
    args = {"path": path.format(root=tmp_path), "content": "x"}
    guard = await call(WRITE, args, cwd, data)
    assert isinstance(guard, Guard)
    assert (guard.kind, guard.reason) == ("dangerous", "changes a file outside the session folder")
    result = await WRITE.run(args, context(cwd, data))  # run without the approval it needed
    assert result.status == "error"
    assert not (tmp_path / "x.txt").exists()
    approved = await call(WRITE, args, cwd, data, approve=True)
    assert isinstance(approved, ToolResult)
    assert approved.status == "ok"
    assert (tmp_path / "x.txt").read_text() == "x"


# ---- the data folder -------------------------------------------------------------------------

DATA_PATHS = [
    "{data}/backend.json",
    ".local/share/turnkey/backend.json",
    "sub/../.local/share/turnkey/secrets.json",
    "to_data/backend.json",
    "to_token",
    "/proc/self/root{data}/backend.json",
    "/proc/{pid}/root{data}/backend.json",
    "{data}/spill/../backend.json",
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("path", DATA_PATHS)
async def test_the_data_folder_is_never_read_however_it_is_reached(home: Path, path: str,
                                                                    mode: ApprovalMode) -> None:
    data = data_of(home)
    path = path.format(data=data, pid=os.getpid())
    guard = await call(READ, {"path": path}, home, data, mode)
    assert isinstance(guard, Guard) or path.startswith("/proc/"), "a /proc link is refused by the run"
    if isinstance(guard, Guard):
        assert guard.kind == "hardline"
    result = await READ.run({"path": path}, context(home, data, mode))  # as if the guard was fooled
    assert result.status == "error"
    assert result.content.startswith("refused: ")
    assert TOKEN not in result.content


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("path", DATA_PATHS[:5])
async def test_the_data_folder_is_never_changed_even_when_approved(home: Path, path: str,
                                                                   mode: ApprovalMode) -> None:
    data = data_of(home)
    path = path.format(data=data)
    before = (data / "backend.json").read_bytes(), (data / "secrets.json").read_bytes()
    for tool, args in ((WRITE, {"path": path, "content": "{}"}),
                       (PATCH, {"path": path, "old": TOKEN, "new": "x"})):
        guard = await call(tool, args, home, data, mode, approve=True)
        assert isinstance(guard, Guard)
        assert guard.kind == "hardline"
        assert "data folder" in guard.reason
        approved = Guard("dangerous", "a person said yes", guard.rule_key)
        result = await tool.run(args, context(home, data, mode, approved))
        assert result.status == "error"
        assert result.content.startswith("refused: ")
    assert ((data / "backend.json").read_bytes(), (data / "secrets.json").read_bytes()) == before
    assert sorted(p.name for p in data.iterdir()) == ["backend.json", "secrets.json", "spill"]


async def test_listing_and_searching_a_home_folder_leave_the_data_folder_out(home: Path) -> None:
    data = data_of(home)
    share = await call(LIST, {"path": ".local/share"}, home, data)
    assert isinstance(share, ToolResult)
    assert "turnkey" not in share.content.replace("Turnkey's", "")
    assert "data folder is here too" in share.content
    found = await call(SEARCH, {"pattern": "token|hello|long output"}, home, data)
    assert isinstance(found, ToolResult)
    assert found.content == "notes.txt:1: hello"
    for tool, args in ((LIST, {"path": str(data)}), (SEARCH, {"pattern": "x", "path": "to_data"}),
                       (SEARCH, {"pattern": "token", "path": "to_token"})):
        guard = await call(tool, args, home, data)
        assert isinstance(guard, Guard)
        assert guard.kind == "hardline"
        result = await tool.run(args, context(home, data))
        assert result.content.startswith("refused: ")


async def test_the_spill_folder_alone_may_be_read(home: Path) -> None:
    data = data_of(home)
    spilled = data / "spill" / "s" / "c.txt"
    read = await call(READ, {"path": str(spilled)}, home, data)
    assert isinstance(read, ToolResult)
    assert read.content == "     1\tthe long output"
    found = await call(SEARCH, {"pattern": "long", "path": str(data / "spill")}, home, data)
    assert isinstance(found, ToolResult)
    assert "the long output" in found.content
    write = await call(WRITE, {"path": str(spilled), "content": "x"}, home, data, approve=True)
    assert isinstance(write, Guard)
    assert write.kind == "hardline"


async def test_a_hard_link_to_a_data_file_is_not_read(home: Path) -> None:
    data = data_of(home)
    os.link(data / "backend.json", home / "hard.json")
    result = await call(READ, {"path": "hard.json"}, home, data)
    assert isinstance(result, ToolResult)
    assert result.content.startswith("refused: hard.json: it is a hard link")
    found = await call(SEARCH, {"pattern": "token"}, home, data)
    assert isinstance(found, ToolResult)
    assert TOKEN not in found.content
    written = await call(WRITE, {"path": "hard.json", "content": "{}"}, home, data)
    assert isinstance(written, ToolResult)
    assert written.status == "ok", "the atomic write replaces the link; the data file stays"
    assert TOKEN in (data / "backend.json").read_text()


# ---- /proc, pipes ----------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/proc/self/environ", "/proc/{pid}/environ", "/proc/thread-self/environ",
                                  "/proc/self/task/{pid}/environ", "/proc/self/mem", "/proc/1/environ"])
async def test_process_environments_and_memory_are_never_read(tmp_path: Path, path: str) -> None:
    path = path.format(pid=os.getpid())
    guard = await call(READ, {"path": path}, tmp_path, tmp_path / "data")
    assert isinstance(guard, Guard)
    assert (guard.kind, "environment or memory" in guard.reason) == ("hardline", True)
    result = await READ.run({"path": path}, context(tmp_path, tmp_path / "data"))
    assert result.content.startswith("refused: ")


async def test_other_proc_files_and_links_by_fd(tmp_path: Path) -> None:
    data = tmp_path / "data"
    status = await call(READ, {"path": "/proc/self/status"}, tmp_path, data)
    assert isinstance(status, ToolResult)
    assert "Pid:" in status.content
    fd = os.open(tmp_path, os.O_RDONLY)
    try:
        result = await call(READ, {"path": f"/proc/self/fd/{fd}/x"}, tmp_path, data)
    finally:
        os.close(fd)
    assert isinstance(result, ToolResult)
    assert result.content.startswith("refused: ")
    assert "/proc/<pid>/ link" in result.content


async def test_a_pipe_is_not_read_and_never_blocks(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    result = await READ.run({"path": "pipe"}, context(tmp_path, tmp_path / "data"))  # O_NONBLOCK
    assert result.status == "error"
    assert "not a regular file" in result.content
