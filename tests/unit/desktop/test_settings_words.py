"""The settings dialog's Qt-free parts: form text to config values, and backend errors in words."""

from __future__ import annotations

import pytest

from desktop.state.settings import number, reworded, same, shown


@pytest.mark.parametrize(("text", "integer", "expected"), [
    ("", True, None),
    ("  ", False, None),
    ("128000", True, 128000),
    ("128_000", True, 128000),
    ("128,000", True, 128000),
    ("4096.0", True, 4096),
    ("0.15", False, 0.15),
    ("3", False, 3.0),
    ("lots", True, "lots"),  # left as text: the backend's error names the field
    ("inf", False, "inf"),  # not sent as a number: JSON has none, it would become null
    ("nan", False, "nan"),
])
def test_number_parses_what_a_person_types(text: str, integer: bool, expected: object) -> None:
    got = number(text, integer=integer)
    assert got == expected
    assert type(got) is type(expected)


def test_shown_leaves_defaults_empty_and_numbers_plain() -> None:
    assert shown(None) == ""
    assert shown(128000.0) == "128000"
    assert shown(0.15) == "0.15"
    assert shown("gpt-4o") == "gpt-4o"


def test_same_compares_numbers_by_value() -> None:
    assert same(3, 3.0)
    assert same("a", "a")
    assert not same(None, 0)


@pytest.mark.parametrize(("field", "message", "expected"), [
    ("patch.providers.main.context_window", "Expected `int` >= 1",
     "Context window (tokens) of provider “main”: must be a whole number of at least 1."),
    ("patch.providers.main.input_usd_per_mtok", "Expected `float`, got `str`",
     "Input price (USD / million tokens) of provider “main”: must be a number."),
    ("patch.approvals.mode", "Invalid enum value 'sometimes'",
     "Approval mode: cannot be 'sometimes'."),
    ("patch.providers.x", "Expected `object`, got `str`", "Provider “x”: Expected object, got str."),
    ("", "something odd", "Settings: something odd."),
])
def test_reworded_names_the_field_and_says_what_is_wrong(field: str, message: str, expected: str) -> None:
    assert reworded(field, message) == expected
