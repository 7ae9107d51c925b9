"""The Providers page's state without Qt: the list and the provider the form shows (a new one
added but not saved included), what the form is filled with, which controls take a click,
what Save, Remove and Save key change, and what Test sends, says and when its result goes."""

from __future__ import annotations

from typing import Any

import pytest

from desktop.state import providers as pv
from desktop.state.providers import Form, Problem, ProviderSettings
from desktop.state.settings import MODE_SAVED, error_words, mode_patch
from shared import protocol as p
from shared.client import InvalidParams, RpcError
from shared.config import ConfigView, ProviderView


def _config(default: str | None = None, **providers: ProviderView) -> ConfigView:
    return ConfigView(providers=providers, default_provider=default)


MAIN = ProviderView(model="gpt-x", base_url="https://h/v1", context_window=64000,
                    input_usd_per_mtok=0.5)
CLAUDE = ProviderView(model="claude-x", kind="anthropic", api_key_secret="ant", api_key="set")


def _state(config: ConfigView | None = None, busy: set[str] | None = None) -> ProviderSettings:
    state = ProviderSettings(busy)
    state.applied(config or _config("main", main=MAIN, claude=CLAUDE), refill=True)
    return state


def _edited(form: Form, **texts: str) -> Form:
    return Form(form.name, form.kind, {**form.texts, **texts}, form.default)


# --- the list and the provider shown ------------------------------------------------------


def test_the_list_is_sorted_and_marks_the_default() -> None:
    state = _state()
    assert [(r.name, r.text) for r in state.rows()] == [("claude", "claude"),
                                                         ("main", "main (default)")]


def test_the_only_provider_is_the_default_without_being_named() -> None:
    state = _state(_config(None, solo=MAIN))
    assert [r.text for r in state.rows()] == ["solo (default)"]
    assert state.current == "solo"
    assert state.form().default


def test_a_config_shows_the_same_provider_else_the_default_else_the_first() -> None:
    state = _state()
    assert state.current == "main"  # the default, first time
    state.picked("claude")
    state.applied(_config("main", main=MAIN, claude=CLAUDE), refill=True)
    assert state.current == "claude"  # the same one
    state.applied(_config(None, main=MAIN, zed=MAIN, alpha=MAIN), refill=True)
    assert state.current == "alpha"  # no default: the first
    state.applied(_config(), refill=True)
    assert state.current is None
    assert state.form() == Form()


def test_a_saved_providers_form_shows_its_settings_and_defaults() -> None:
    form = _state().form()
    assert (form.name, form.kind, form.default) == ("main", "openai", True)
    assert form.text("base_url") == "https://h/v1"
    assert form.text("context_window") == "64000"
    assert form.text("max_output_tokens") == "4096"  # the backend's default, filled in
    assert form.text("input_usd_per_mtok") == "0.5"
    assert form.text("cached_input_usd_per_mtok") == ""  # unset: the placeholder says
    assert form.text("api_key_secret") == ""


def test_without_refill_the_form_keeps_a_new_provider_and_edits() -> None:
    state = _state()
    state.started("draft")
    assert state.applied(_config("main", main=MAIN, claude=CLAUDE), refill=False) is None
    assert (state.current, state.draft) == (None, "draft")
    state.picked("claude")
    assert state.applied(_config("main", main=MAIN, claude=CLAUDE), refill=False) is None
    assert state.current == "claude"


def test_the_provider_shown_removed_elsewhere_gives_way_even_without_refill() -> None:
    state = _state()
    state.picked("claude")
    fill = state.applied(_config("main", main=MAIN), refill=False)
    assert fill is not None
    assert fill.form.name == "main"
    assert fill.clears_test  # a result about claude is not left under main's form


def test_a_refill_drops_a_new_provider_not_saved() -> None:
    state = _state()
    state.started("draft")
    fill = state.applied(_config("main", main=MAIN, claude=CLAUDE), refill=True)
    assert fill is not None
    assert (state.current, state.draft, fill.form.name) == ("main", None, "main")


# --- a new provider, added but not saved ----------------------------------------------------


def test_add_refuses_an_empty_or_taken_name() -> None:
    state = _state()
    assert state.started("  ") == Problem("name", pv.NO_NAME)
    taken = state.started("main")
    assert isinstance(taken, Problem)
    assert taken.key == "name"
    assert "already exists" in taken.words
    assert (state.current, state.draft) == ("main", None), "the form shown stays"


def test_a_new_provider_shows_in_the_form_and_in_the_list_as_not_saved() -> None:
    state = _state()
    fill = state.started(" draft ")
    assert not isinstance(fill, Problem)
    assert fill.form == Form("draft")  # blanks, the first kind, not the default
    assert (fill.clears_test, fill.clears_key) == (True, True)
    assert (state.current, state.draft, state.shown()) == (None, "draft", "draft")
    assert [(r.name, r.text) for r in state.rows()] == [
        ("claude", "claude"), ("main", "main (default)"), ("draft", "draft (new, not saved)")]
    assert state.selected() == "draft"
    assert state.key_status() == pv.KEY_LATER
    # Its own row picked again: the form stays as the person is filling it.
    assert state.picked("draft") is None
    assert (state.current, state.draft) == (None, "draft")
    # Another picked: the new one goes (it was never saved).
    assert not isinstance(state.picked("main"), Problem)
    assert [r.name for r in state.rows()] == ["claude", "main"]


def test_the_first_provider_added_is_made_the_default() -> None:
    state = _state(_config())
    fill = state.started("first")
    assert not isinstance(fill, Problem)
    assert fill.form.default


def test_revert_drops_a_new_providers_form() -> None:
    state = _state()
    state.started("draft")
    fill = state.reverted()
    assert fill.form == Form()
    assert (state.current, state.draft, state.shown()) == (None, None, "")
    assert state.controls("openai", "").form is False


def test_a_new_provider_saved_is_shown_as_saved() -> None:
    state = _state()
    state.started("new")
    change = state.save(Form("new", texts={"model": "m"}))
    assert isinstance(change, pv.Change)
    state.saved(change)
    fill = state.applied(_config("main", main=MAIN, claude=CLAUDE, new=ProviderView(model="m")),
                         refill=True)
    assert fill is not None
    assert (state.current, state.draft, fill.form.name) == ("new", None, "new")
    assert not fill.clears_test, "a Test of it as typed is still about it"
    assert state.selected() == "new"


# --- which controls take a click -------------------------------------------------------------


def test_nothing_takes_a_click_before_the_config_arrives() -> None:
    controls = ProviderSettings().controls("openai", "")
    assert controls == pv.Controls(form=False, base_url=False, save=False, remove=False,
                                   key_edit=False, key_button=False, test=False, add=False)


def test_a_saved_provider_takes_every_control() -> None:
    controls = _state().controls("openai", "")
    assert controls == pv.Controls(form=True, base_url=True, save=True, remove=True,
                                   key_edit=True, key_button=True, test=True, add=True)


def test_a_new_provider_is_tested_but_not_removed_nor_given_a_stored_key() -> None:
    state = _state()
    state.started("draft")
    controls = state.controls("openai", "")
    assert (controls.save, controls.test, controls.key_edit) == (True, True, True)
    assert (controls.remove, controls.key_button) == (False, False)


def test_operations_in_flight_hold_their_own_buttons() -> None:
    busy: set[str] = set()
    state = _state(busy=busy)
    busy.update({"save", "test", "key"})
    controls = state.controls("openai", "")
    assert (controls.save, controls.test, controls.key_button) == (False, False, False)
    assert (controls.form, controls.remove, controls.key_edit) == (True, True, True)
    assert not state.may_test()


def test_a_kind_without_a_url_leaves_the_field_on_only_to_clear_a_stale_one() -> None:
    state = _state()
    assert not state.controls("local", "").base_url
    assert state.controls("local", "http://old/v1").base_url
    assert state.controls("anthropic", "").base_url


# --- Save and Remove -------------------------------------------------------------------------


def test_save_sends_only_what_changed() -> None:
    state = _state()
    form = _edited(state.form(), model="other", output_usd_per_mtok="0.6",
                   context_window="64,000")  # the same number, typed otherwise
    assert state.patch(form) == {"providers": {"main": {"model": "other",
                                                        "output_usd_per_mtok": 0.6}}}


def test_a_cleared_field_is_sent_as_null_so_the_default_applies() -> None:
    state = _state()
    assert state.patch(_edited(state.form(), base_url=" ")) == {
        "providers": {"main": {"base_url": None}}}


def test_what_does_not_parse_is_sent_as_typed_for_the_backend_to_name() -> None:
    state = _state()
    assert state.patch(_edited(state.form(), context_window="lots")) == {
        "providers": {"main": {"context_window": "lots"}}}


def test_the_default_box_names_or_unnames_the_provider() -> None:
    state = _state()
    main = state.form()
    assert state.patch(Form(main.name, main.kind, main.texts, False)) == {"default_provider": None}
    state.picked("claude")
    claude = state.form()
    assert state.patch(Form(claude.name, claude.kind, claude.texts, True)) == {
        "default_provider": "claude"}


def test_a_new_provider_sends_what_is_filled_in() -> None:
    state = _state()
    state.started("new")
    form = Form("new", "anthropic", {"model": "m", "input_usd_per_mtok": "3"}, True)
    assert state.patch(form) == {
        "providers": {"new": {"kind": "anthropic", "model": "m", "input_usd_per_mtok": 3.0}},
        "default_provider": "new"}


def test_save_says_when_nothing_changed_and_names_the_provider_saved() -> None:
    state = _state()
    assert state.save(state.form()) == "Nothing changed for “main”."
    assert state.save(Form()) == Problem("name", pv.NO_NAME)
    change = state.save(_edited(state.form(), model="other"))
    assert isinstance(change, pv.Change)
    assert (change.select, change.done) == ("main", "Saved “main”.")


def test_remove_takes_every_reference_along() -> None:
    config = ConfigView(providers={"main": MAIN, "claude": CLAUDE, "third": MAIN},
                        default_provider="claude", auxiliary_provider="claude",
                        fallback_providers=["third", "claude"])
    change = _state(config).removal("claude")
    assert change.patch == {"providers": {"claude": None}, "default_provider": None,
                            "auxiliary_provider": None, "fallback_providers": ["third"]}
    assert (change.select, change.done) == (None, "Removed “claude”.")
    assert _state().removal("claude").patch == {"providers": {"claude": None}}
    assert pv.remove_question("claude")[0] == "Remove the provider “claude”?"


def test_after_a_removal_the_default_is_shown() -> None:
    state = _state()
    state.picked("claude")
    state.saved(state.removal("claude"))
    fill = state.applied(_config("main", main=MAIN), refill=True)
    assert fill is not None
    assert (state.current, fill.form.name, fill.clears_test) == ("main", "main", True)


# --- the API key ------------------------------------------------------------------------------


def test_a_key_is_stored_only_for_a_saved_provider_with_a_key_typed() -> None:
    busy: set[str] = set()
    state = _state(busy=busy)
    assert state.key_save("  ") == pv.KEY_EMPTY
    busy.add("key")
    assert state.key_save("sk-1") is None  # one at a time
    state.started("draft")
    assert state.key_save("sk-1") == pv.KEY_FIRST


def test_a_provider_without_a_key_name_gets_its_own() -> None:
    state = _state()
    save = state.key_save("sk-1")
    assert save == pv.KeySave("main", "main", links=True)
    assert ProviderSettings.key_link(save) == {"providers": {"main": {"api_key_secret": "main"}}}
    assert state.shows_key_name(save, "")
    assert not state.shows_key_name(save, "typed"), "what the person typed stays"
    state.picked("claude")
    assert not state.shows_key_name(save, ""), "another provider's form"


def test_a_provider_with_a_key_name_keeps_it() -> None:
    state = _state()
    state.picked("claude")
    assert state.key_save("sk-1") == pv.KeySave("claude", "ant", links=False)
    assert state.secret_name("claude") == "ant"
    assert state.secret_name("unknown") == "unknown"


def test_the_key_status_says_where_the_key_is_kept() -> None:
    state = _state(_config("main", main=MAIN, env=ProviderView(model="m", api_key_env="MY_KEY")))
    assert state.key_status() == (
        "Key status: no key is set. This provider's key is kept under the name “main”. Saving a "
        "key also sets this provider's key name to its own name.")
    state.picked("env")
    assert "The environment variable MY_KEY, when set, is used instead." in state.key_status()
    assert pv.key_status_words("claude", CLAUDE) == (
        "Key status: a key is set. This provider's key is kept under the name “ant”.")
    assert _state(_config()).key_status() == ""


def test_a_stored_key_is_said_with_where_it_went_never_the_key() -> None:
    assert pv.key_stored_words("main", p.SecretSetResult(stored="keyring")) == (
        "Key stored in the system keyring under the name “main”.")
    words = pv.key_stored_words("main", p.SecretSetResult(stored="file", warning="plain text"))
    assert words == "Key stored in a file under the name “main”. Warning: plain text."


# --- Test ----------------------------------------------------------------------------------


def test_test_sends_the_form_as_it_stands_and_a_key_typed() -> None:
    state = _state()
    form = _edited(state.form(), base_url="http://other/v1")
    request = state.test_request(form, " sk-typed ")
    assert request.provider == "main"
    assert request.api_key == "sk-typed"
    config: dict[str, Any] = request.provider_config or {}
    assert config["base_url"] == "http://other/v1"
    assert config["context_window"] == 64000
    assert state.test_request(form, "  ").api_key is None


def test_testing_says_when_the_form_is_not_saved() -> None:
    state = _state()
    assert state.testing_words(state.form()) == (
        "Testing “main”: one short request (up to a minute)…")
    assert "as the form shows it (not saved)" in state.testing_words(
        _edited(state.form(), model="other"))
    state.started("draft")
    assert "(not saved)" in state.testing_words(Form("draft"))


def test_a_result_shows_only_while_its_provider_is_in_the_form() -> None:
    state = _state()
    assert state.shows_result("main")
    fill = state.picked("claude")
    assert fill is not None
    assert fill.clears_test
    assert not state.shows_result("main"), "main's result is not shown as claude's"
    assert state.shows_result("claude")


def test_a_result_goes_when_another_provider_fills_the_form_not_on_a_refill_of_it() -> None:
    state = _state()
    fill = state.applied(_config("main", main=MAIN, claude=CLAUDE), refill=True)
    assert fill is not None
    assert not fill.clears_test
    assert not state.reverted().clears_test
    again = state.picked("main")
    assert again is not None
    assert again.clears_test, "picked anew: about the settings as saved"


def test_a_test_that_could_not_run_is_a_failed_result_in_words() -> None:
    result = pv.failed_test("main", "The connection dropped.")
    assert (result.ok, result.provider) == (False, "main")
    assert result.error == p.ProviderFailure(kind="rpc", message="The connection dropped.")


# --- refusals and the approval mode ----------------------------------------------------------


def test_a_refusal_names_and_marks_its_field() -> None:
    exc = InvalidParams(-32602, "Expected `int` >= 1",
                        {"field": "patch.providers.main.context_window"})
    problem = pv.refusal(exc)
    assert problem.key == "context_window"
    assert problem.field == "patch.providers.main.context_window"
    assert problem.words == (
        "Context window (tokens) of provider “main”: must be a whole number of at least 1.")
    assert problem.raw == "Expected `int` >= 1"


@pytest.mark.parametrize("exc", [RpcError(-32003, "Only the owner may."),
                                 InvalidParams(-32602, "Only the owner may.")])
def test_a_refusal_without_a_field_marks_nothing(exc: RpcError) -> None:
    problem = pv.refusal(exc)
    assert (problem.key, problem.field) == ("", None)
    assert error_words(RpcError(-32003, "Only the owner may.")) == "Only the owner may."


def test_the_approval_mode_is_one_setting() -> None:
    assert mode_patch("off") == {"approvals": {"mode": "off"}}
    assert MODE_SAVED.startswith("Saved.")
