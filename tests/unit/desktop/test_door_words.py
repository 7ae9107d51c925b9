"""The Messaging form's words (desktop/state/doors.py): allowed users as typed, the backend's
refusals named by the form's labels, and what a test or a save says."""

from __future__ import annotations

from desktop.state import doors as words
from shared import protocol as p


def test_allowed_users_one_per_line_commas_and_spaces_too_each_once() -> None:
    typed = "@me:example.org\n\n  @you:example.org, @me:example.org @them:example.org  \n"
    assert words.parse_users(typed) == ["@me:example.org", "@you:example.org", "@them:example.org"]
    assert words.parse_users("  \n") == []


def test_a_refusal_names_the_forms_field() -> None:
    users = ["@me:example.org", "bob"]
    assert words.form_error("user_id", "'agent' is not a Matrix user id", users) == \
        "Account: 'agent' is not a Matrix user id"
    assert words.form_error("allowed_users.1", "not a user id", users) == \
        "Allowed users, “bob”: not a user id"
    assert words.form_error("access_token", "none stored", users) == "Access token: none stored"
    assert words.form_error("", "something else", users) == "something else"


def test_what_a_test_says() -> None:
    ok = p.DoorTestResult(ok=True, reached=True, account="@agent:x.org", device_id="DEV",
                          latency_ms=42)
    assert words.test_words(ok) == (
        "Connection works: the homeserver answered and accepted the token for @agent:x.org "
        "(device DEV), in 42 ms.", "success")
    failed = p.DoorTestResult(ok=False, reached=False, error="Cannot reach https://x: timeout.")
    assert words.test_words(failed) == ("Test failed. Cannot reach https://x: timeout.", "danger")


def test_what_a_save_says() -> None:
    door = p.DoorStatus(name="matrix", platform="matrix", state="starting", account="@a:x",
                        since=0.0)
    text, tone = words.saved_words(p.DoorSetResult(door=door, stored="keyring"))
    assert (tone, text.endswith("The token is in the system keyring.")) == ("success", True)
    text, tone = words.saved_words(p.DoorSetResult(door=door, stored="file", warning="plain text"))
    assert (tone, text.endswith("Warning: plain text.")) == ("warning", True)
    assert words.saved_words(p.DoorSetResult(door=door))[1] == "success"
