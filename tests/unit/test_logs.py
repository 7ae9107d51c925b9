"""Logs: a rotating file under DIR/logs, and an error id on every internal error."""

from __future__ import annotations

import asyncio
import errno
import io
import logging
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from shared import logs

ID = re.compile(r"\[error_id=([0-9a-f]{12})\]")


@pytest.fixture
def root_logging() -> Iterator[None]:
    """setup() replaces the root logger's handlers; put pytest's back afterwards."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    for handler in root.handlers:
        handler.close()
    root.handlers[:] = handlers
    root.setLevel(level)


def test_internal_logs_the_traceback_under_the_id_it_returns(tmp_path: Path, root_logging: None) -> None:
    path = logs.setup(tmp_path)
    assert path == tmp_path / "logs" / "backend.log"
    try:
        raise ValueError("boom")
    except ValueError:
        error_id = logs.internal(logging.getLogger("turn"), "turn %s crashed", "t1")
    text = path.read_text()
    assert f"turn t1 crashed [error_id={error_id}]" in text
    assert "ValueError: boom" in text.split(error_id, 1)[1], "the traceback follows the id"


def test_every_error_gets_an_id_and_other_records_none(tmp_path: Path, root_logging: None) -> None:
    path = logs.setup(tmp_path, name="desktop")
    log = logging.getLogger("x")
    log.info("fine")
    log.warning("careful")
    log.error("broken")
    log.critical("worse")
    lines = path.read_text().splitlines()
    assert path.name == "desktop.log"
    assert [bool(ID.search(line)) for line in lines] == [False, False, True, True]
    assert len({ID.search(line).group(1) for line in lines[2:]}) == 2  # type: ignore[union-attr]


def test_the_log_rotates_and_keeps_five(tmp_path: Path, root_logging: None,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logs, "LOG_BYTES", 2000)
    logs.setup(tmp_path)
    log = logging.getLogger("x")
    for i in range(400):
        log.info("line %d %s", i, "x" * 40)
    names = sorted(p.name for p in (tmp_path / "logs").iterdir())
    assert names == ["backend.log", *(f"backend.log.{n}" for n in range(1, 6))]
    assert all((tmp_path / "logs" / n).stat().st_size <= 2100 for n in names)


def test_an_exception_no_task_retrieved_is_logged_with_an_id(tmp_path: Path, root_logging: None) -> None:
    path = logs.setup(tmp_path)

    async def main() -> None:
        logs.asyncio_errors(asyncio.get_running_loop())
        asyncio.get_running_loop().call_exception_handler(
            {"message": "Task exception was never retrieved", "exception": RuntimeError("lost")})

    asyncio.run(main())
    text = path.read_text()
    assert ID.search(text)
    assert "RuntimeError: lost" in text


class FullDisk(io.StringIO):
    """A log stream on a disk with no room left: every write fails as a full disk does."""

    def write(self, text: str) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")


def test_a_full_disk_drops_records_quietly_and_says_so_once_there_is_room(
    tmp_path: Path, root_logging: None, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = logs.setup(tmp_path)
    log = logging.getLogger("store")
    log.info("before")
    [handler] = [h for h in logging.getLogger().handlers if isinstance(h, logs.LogFile)]
    assert handler.stream is not None
    handler.stream.close()
    with path.open("a") as f:
        f.write("half a li")  # the part of a record that fit before the disk filled
    reopen = handler._open
    monkeypatch.setattr(handler, "_open", FullDisk)
    handler.stream = FullDisk()  # type: ignore[assignment]  # the stream type is a file's
    for n in range(3):
        log.info("lost %d", n)
    assert "Logging error" not in capsys.readouterr().err, "no traceback for a full disk"

    monkeypatch.setattr(handler, "_open", reopen)  # room again
    log.info("after")
    lines = path.read_text().splitlines()
    assert lines[0].endswith("INFO store: before")
    assert lines[1] == "half a li", "the cut line is ended, not glued to the next"
    assert lines[2].endswith(
        "WARNING logs: 3 log records could not be written (No space left on device) and are "
        "missing here")
    assert lines[3].endswith("INFO store: after")
    assert len(lines) == 4


def test_stderr_that_cannot_be_written_is_not_reported_on_itself(
    root_logging: None, capsys: pytest.CaptureFixture[str],
) -> None:
    handler = logs.Stderr(FullDisk())
    logging.getLogger().handlers[:] = [handler]
    logging.getLogger("store").warning("nowhere to go")
    assert capsys.readouterr().err == ""
