"""A conversation's words: the header, the connection note, a branch's banner, the welcome's
model, and which of your messages Ctrl+E edits."""

from __future__ import annotations

from pathlib import Path

from desktop.state.conversation import (
    answering,
    branch_words,
    connection_words,
    edit_target,
    message_key,
    status_tone,
    welcome,
    where,
)
from desktop.state.first_run import ADD_PROVIDER, provider_name, readiness
from desktop.state.items import AssistantItem, UserItem
from shared import protocol as p
from tests.unit.desktop.factories import message, session


def test_the_header_says_backend_folder_model_and_rooms() -> None:
    home = str(Path.home())
    s = session(cwd=f"{home}/project", model="m-1")
    assert where(s, "", []) == "~/project · m-1", "this computer's folder from home"
    assert where(s, "lab", ["#ops"]) == f"on lab · {home}/project · m-1 · #ops", (
        "a remote backend's path is its own")
    assert where(None, "", ["#ops"]) == "#ops"
    assert where(session(cwd="", model=""), "", []) == ""


def test_the_status_chip_and_the_connection_note() -> None:
    assert status_tone("running") == "accent"
    assert status_tone("waiting_approval") == "warning"
    assert status_tone("idle") == "muted"
    assert connection_words("connected") == ""
    assert connection_words("reconnecting") == "⟳ reconnecting…"


def test_a_branch_names_its_original_and_links_back_unless_deleted() -> None:
    assert branch_words(session(), "x") is None, "not a branch"
    assert branch_words(None, "x") is None
    branch = session(forked_from="s0", forked_at="m1")
    named = branch_words(branch, "Fix <parser>")
    assert named == ("Branched from “Fix &lt;parser&gt;” at an earlier message — "
                     "<a href='original'>open the original</a>.")
    assert branch_words(branch, None) == ("Branched from another session at an earlier message"
                                          " — <a href='original'>open the original</a>.")
    assert branch_words(branch, "") == "Branched from a session deleted since at an earlier message."


def test_the_welcome_names_the_sessions_model_else_the_default_one() -> None:
    summary = p.ProviderSummary(configured=True, name="main", model="big")
    assert answering(None, [], summary) == ("big", "main")
    assert answering(None, [], None) == ("the configured model", "")
    providers = [p.ProviderChoice(name="main", model="big", kind="openai", default=True),
                 p.ProviderChoice(name="other", model="small", kind="openai")]
    s = session(model="small", provider="other")
    assert answering(s, providers, summary) == ("small", "other")


def test_the_welcome_says_the_folder_and_model_escaped_in_the_themes_colours() -> None:
    summary = p.ProviderSummary(configured=True, name="a<b", model="big")
    text = welcome(session(cwd="/srv/<x>"), [], summary, text="#111", muted="#222", warning="#333")
    assert "<b>/srv/&lt;x&gt;</b>" in text
    assert "Answering: some-model (a&lt;b)" in text, "the session's own model"
    assert "color:#111'>New session" in text
    assert "color:#222" in text
    assert "#333" not in text
    assert "offline" not in text
    assert "<b>this folder</b>" in welcome(None, [], None, text="", muted="", warning="")


def test_the_welcome_warns_when_only_the_offline_model_answers() -> None:
    summary = p.ProviderSummary(configured=False, name="offline", model="tiny",
                                offline_default=True)
    text = welcome(None, [], summary, text="#111", muted="#222", warning="#333")
    assert "<p style='color:#333'>Answers come from tiny, the small offline model" in text
    assert "on this computer, with no account and no network" in text
    assert f"<a href='{ADD_PROVIDER}'>Add a provider</a> to use a hosted model" in text
    assert "Answering: tiny (offline)" in text
    # A provider added since (provider.list names it): the note goes.
    added = [p.ProviderChoice(name="main", model="big", kind="openai", default=True)]
    text = welcome(None, added, summary, text="", muted="", warning="",
                   ready=readiness(summary, added))
    assert "offline" not in text
    assert "Answering: big (main)" in text, "the default listed answers a session without a model"


def test_the_welcome_says_a_provider_is_needed_when_nothing_can_answer() -> None:
    summary = p.ProviderSummary(configured=False)
    text = welcome(None, [], summary, text="", muted="", warning="#333")
    assert "<p style='color:#333'><b>A model provider is needed.</b>" in text
    assert f"<a href='{ADD_PROVIDER}'>Add a provider</a>" in text
    assert "Answering" not in text, "nothing answers: no model is named"


def test_readiness_follows_the_listing_over_the_connections_summary() -> None:
    offline = p.ProviderSummary(configured=False, name="local", model="tiny", offline_default=True)
    nothing = p.ProviderSummary(configured=False)
    configured = p.ProviderSummary(configured=True, name="main", model="big")
    local = [p.ProviderChoice(name="local", model="tiny", kind="local", default=True)]
    main = [p.ProviderChoice(name="main", model="big", kind="openai", default=True)]
    assert readiness(offline, None) == "offline"
    assert readiness(offline, local) == "offline"
    assert readiness(offline, main) == "ready"
    assert readiness(nothing, None) == "needs_provider"
    assert readiness(nothing, main) == "ready", "a provider saved since the connection"
    assert readiness(configured, []) == "needs_provider", "the listing is newer"
    assert readiness(configured, None) == "ready"
    assert readiness(None, None) == "ready", "an old backend: no claim either way"


def test_the_first_provider_is_offered_as_main_else_a_free_name() -> None:
    assert provider_name([]) == "main"
    assert provider_name(["main", "main-2"]) == "main-3"


def prompt(key: str, text: str, **kw: object) -> UserItem:
    return UserItem(key, "t-" + key, text=text, **kw)  # type: ignore[arg-type]


def test_ctrl_e_edits_the_row_given_else_the_current_one_else_your_last() -> None:
    items = [prompt("m1", "first"), AssistantItem("m2", "t-m1", text="answer"),
             prompt("m3", "second"), AssistantItem("m4", "t-m3", text="answer"),
             prompt("prompt:a1", "not stored yet")]
    assert edit_target(items, 0, 2) is items[0], "the row asked for first"
    assert edit_target(items, None, 0) is items[0], "then the current row"
    assert edit_target(items, None, 1) is items[2], "an answer's row: your last stored message"
    assert edit_target(items, 1, None) is items[2]
    assert edit_target(items, 99, -5) is items[2], "rows out of range are passed over"
    items[2].hidden = True
    assert edit_target(items, None, None) is items[0], "a hidden message is not edited"
    assert edit_target([items[4]], None, None) is None, "a prompt not stored cannot branch"
    assert edit_target([], None, None) is None


def test_a_stored_messages_key_is_its_id_or_its_calls_card() -> None:
    rows = [message("m1", "user", "hi"), message("m2", "tool", "out", call_id="c1")]
    assert message_key("m1", rows) == "m1"
    assert message_key("m2", rows) == "call:c1"
    assert message_key("m9", rows) is None
