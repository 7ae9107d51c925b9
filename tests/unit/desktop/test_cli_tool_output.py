"""The CLI's live tool output: clean whole lines into a pipe, colours and redraws kept on a terminal."""

from __future__ import annotations

import pytest

from desktop.commands import ToolOutput

STREAM = ["\x1b[32mcompiling\x1b[0m a", ".c\n\r 10%", "\r\x1b[2K 100%\r", "\n\x1b]0;title\x07warn", "ing"]


def test_into_a_pipe_whole_clean_lines(capsys: pytest.CaptureFixture[str]) -> None:
    out = ToolOutput(tty=False)
    for chunk in STREAM:
        out.add("c1", chunk)
    assert capsys.readouterr().err == "compiling a.c\n 100%\n"
    out.end()
    assert capsys.readouterr().err == "warning\n", "the unfinished line ends with the call"


def test_on_a_terminal_as_it_comes(capsys: pytest.CaptureFixture[str]) -> None:
    out = ToolOutput(tty=True)
    for chunk in STREAM:
        out.add("c1", chunk)
    out.end()
    assert capsys.readouterr().err == (
        "\x1b[32mcompiling\x1b[0m a.c\n\r 10%\r\x1b[2K 100%\r\nwarning\x1b[0m\n")


def test_another_call_starts_on_a_line_of_its_own(capsys: pytest.CaptureFixture[str]) -> None:
    out = ToolOutput(tty=False)
    out.add("c1", "one, unfinished")
    out.add("c2", "two\n")
    out.end()
    assert capsys.readouterr().err == "one, unfinished\ntwo\n"
