"""The chat commands' parsing: what a message starting with / asks for (backend/doors/commands.py)."""

from __future__ import annotations

import pytest

from backend.doors import commands


@pytest.mark.parametrize(("text", "name", "arg"), [
    ("/stop", "stop", ""),
    ("  /STOP  ", "stop", ""),
    ("/queue run the tests", "queue", "run the tests"),
    ("/queue\nrun the tests\nand lint", "queue", "run the tests\nand lint"),
    ("/steer  use pytest -x ", "steer", "use pytest -x"),
    ("/approve session", "approve", "session"),
    ("/frobnicate now", "frobnicate", "now"),
])
def test_a_slash_message_is_a_command(text: str, name: str, arg: str) -> None:
    command = commands.parse(text)
    assert command is not None
    assert (command.name, command.arg) == (name, arg)


def test_unknown_commands_are_commands_but_not_known() -> None:
    command = commands.parse("/rm -rf /")
    assert command is not None
    assert not command.known


@pytest.mark.parametrize("text", ["hello", "what does /stop do?", "//stop is a path", ""])
def test_everything_else_is_a_prompt(text: str) -> None:
    assert commands.parse(text) is None


def test_a_double_slash_sends_the_prompt_with_one_slash() -> None:
    assert commands.prompt_text("//etc/hosts: what is in it?") == "/etc/hosts: what is in it?"
    assert commands.prompt_text("plain") == "plain"


@pytest.mark.parametrize(("arg", "expected"), [
    ("", ("once", None)),
    ("once", ("once", None)),
    ("SESSION", ("session", None)),
    ("always apr_01a2", ("always", "apr_01a2")),
    ("apr_01a2", ("once", "apr_01a2")),
])
def test_approve_takes_a_decision_and_an_optional_id(arg: str, expected: tuple[str, str | None]) -> None:
    assert commands.approval_answer(arg) == expected


def test_approve_refuses_a_word_it_does_not_know_instead_of_guessing() -> None:
    answer = commands.approval_answer("forever")
    assert isinstance(answer, str)
    assert "forever" in answer
    assert "once, session or always" in answer
