"""The built-in registry: specs in a stable order, and argument validation against each schema."""

from typing import Any

import pytest

from backend.tools.registry import BUILTINS, ToolArgsError, specs, validate

TERMINAL = BUILTINS["terminal"]


def test_eleven_builtins_in_a_stable_order() -> None:
    names = [s.name for s in specs()]
    assert names == ["terminal", "read_file", "write_file", "patch", "search_files", "list_dir",
                     "memory", "skill", "skill_manage", "delegate", "clarify"]
    assert specs() == specs()
    for spec in specs():
        assert spec.parameters["type"] == "object"
        assert spec.parameters["additionalProperties"] is False
        assert spec.description
        assert set(spec.parameters["required"]) <= set(spec.parameters["properties"])


def test_defaults_are_filled() -> None:
    assert validate(TERMINAL, {"command": "ls"}) == {
        "command": "ls", "timeout_s": 120, "network": False, "sandbox": True}
    assert validate(BUILTINS["read_file"], {"path": "a"}) == {"path": "a", "offset": 1, "limit": 2000}
    assert validate(BUILTINS["patch"], {"path": "a", "old": "x", "new": "y"})["replace_all"] is False


def test_given_values_are_kept() -> None:
    args = {"command": "ls", "timeout_s": 5, "workdir": "sub", "network": True, "sandbox": False}
    assert validate(TERMINAL, args) == args


def test_null_optional_counts_as_absent() -> None:
    assert validate(TERMINAL, {"command": "ls", "workdir": None}) == {
        "command": "ls", "timeout_s": 120, "network": False, "sandbox": True}


def test_integral_float_is_an_integer() -> None:
    assert validate(TERMINAL, {"command": "ls", "timeout_s": 30.0})["timeout_s"] == 30


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "arguments must be a JSON object, got an array"),
        ("ls", "arguments must be a JSON object, got a string"),
        (None, "arguments must be a JSON object, got null"),
        ({}, "argument 'command' is required (string)"),
        ({"command": None}, "argument 'command' is required (string)"),
        ({"command": 5}, "argument 'command' must be a string, got an integer"),
        ({"command": "ls", "timeout_s": "10"}, "argument 'timeout_s' must be an integer, got a string"),
        ({"command": "ls", "timeout_s": True}, "argument 'timeout_s' must be an integer, got a boolean"),
        ({"command": "ls", "timeout_s": 1.5}, "argument 'timeout_s' must be an integer, got a number"),
        (
            {"command": "ls", "cwd": "/"},
            "unknown argument 'cwd' for terminal; expected: command, timeout_s, workdir, network, sandbox",
        ),
    ],
)
def test_bad_arguments_say_what_to_fix(args: Any, message: str) -> None:
    with pytest.raises(ToolArgsError) as err:
        validate(TERMINAL, args)
    assert str(err.value) == message


def test_boolean_must_be_boolean() -> None:
    with pytest.raises(ToolArgsError, match="'replace_all' must be a boolean"):
        validate(BUILTINS["patch"], {"path": "a", "old": "x", "new": "y", "replace_all": "yes"})


def test_several_unknown_arguments_are_all_named() -> None:
    with pytest.raises(ToolArgsError, match="unknown arguments 'a', 'b'"):
        validate(BUILTINS["list_dir"], {"a": 1, "b": 2})
