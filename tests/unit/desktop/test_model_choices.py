"""A session's "provider · model" choices: the box's entries, what is typed, what is sent."""

from __future__ import annotations

from desktop.state.model_choices import Choice, change, current, entries, others, typed
from shared import protocol as p
from tests.unit.desktop.factories import session

PROVIDERS = [
    p.ProviderChoice(name="main", model="gpt-big", kind="openai", default=True),
    p.ProviderChoice(name="claude", model="sonnet", kind="anthropic"),
    p.ProviderChoice(name="lab", model="gpt-big", kind="openai"),
]


def test_every_provider_is_listed_with_its_model_the_sessions_own_shown() -> None:
    fresh = session(model="gpt-big")
    assert [c.label for c in entries(fresh, PROVIDERS)] == [
        "main · gpt-big", "claude · sonnet", "lab · gpt-big"], "same model, told apart"
    assert current(fresh, PROVIDERS) == Choice("main", "gpt-big"), "no provider: the default"
    moved = session(model="sonnet", provider="claude")
    assert current(moved, PROVIDERS) == Choice("claude", "sonnet")
    assert entries(moved, PROVIDERS) == entries(fresh, PROVIDERS), "a stable list"
    custom = session(model="opus", provider="claude")
    assert [c.label for c in entries(custom, PROVIDERS)][:2] == ["claude · opus", "main · gpt-big"]
    gone = session(model="x", provider="removed")
    assert entries(gone, PROVIDERS)[0] == Choice("removed", "x"), "what it asks, even if gone"
    assert entries(None, PROVIDERS) == [Choice(c.name, c.model) for c in PROVIDERS]


def test_without_a_provider_list_the_box_shows_models_alone() -> None:
    s = session(model="some-model")
    assert current(s, []) == Choice("", "some-model")
    assert [c.label for c in entries(s, [])] == ["some-model"]
    assert others(s, []) == []
    assert change(Choice("", "other-model"), s, []) == {"model": "other-model"}


def test_typed_text_names_a_provider_or_a_model_of_the_current_one() -> None:
    s = session(model="sonnet", provider="claude")
    assert typed("  lab · o3  ", s, PROVIDERS) == Choice("lab", "o3")
    assert typed("lab·o3", s, PROVIDERS) == Choice("lab", "o3")
    assert typed("opus", s, PROVIDERS) == Choice("claude", "opus")
    assert typed("nowhere · o3", s, PROVIDERS) == Choice("claude", "nowhere · o3"), \
        "an unknown provider's name is part of a model name"
    assert typed("   ", s, PROVIDERS) is None


def test_a_choice_sends_the_provider_only_when_it_changes() -> None:
    fresh = session(model="gpt-big")
    assert change(Choice("main", "gpt-big"), fresh, PROVIDERS) is None
    assert change(Choice("main", "gpt-mini"), fresh, PROVIDERS) == {"model": "gpt-mini"}, \
        "still following the default"
    assert change(Choice("lab", "gpt-big"), fresh, PROVIDERS) == {"provider": "lab", "model": "gpt-big"}
    moved = session(model="sonnet", provider="claude")
    assert change(Choice("main", "gpt-big"), moved, PROVIDERS) == {"provider": "main", "model": "gpt-big"}


def test_another_provider_means_every_entry_of_the_other_providers() -> None:
    moved = session(model="opus", provider="claude")
    assert others(moved, PROVIDERS) == [Choice("main", "gpt-big"), Choice("lab", "gpt-big")]
    assert others(session(model="gpt-big"), PROVIDERS) == [Choice("claude", "sonnet"),
                                                           Choice("lab", "gpt-big")]
