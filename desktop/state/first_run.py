"""A first run without Qt: whether a conversation can get an answer (from a configured provider,
from the built-in offline model, or from nothing yet), what its welcome and message box say
then, and the name a first provider is offered under.

The backend says it: `initialize`'s `capabilities.provider` (`offline_default`: nothing is
configured and the offline model answers; `configured` false without it: nothing can answer),
and `provider.list`, which lists nothing when nothing can answer.  The listing is asked again
when the settings save a provider, so it wins over `initialize`'s summary, which is as old as
the connection.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from typing import Literal

from shared import protocol as p

Readiness = Literal["ready", "offline", "needs_provider"]
ADD_PROVIDER = "add-provider"  # the welcome's link that opens the provider form

NEEDS_PLACEHOLDER = ("Turnkey needs a model provider before it can answer: add one in "
                     "Settings → Providers (Ctrl+,)")


def readiness(summary: p.ProviderSummary | None,
              listed: Sequence[p.ProviderChoice] | None) -> Readiness:
    """What answers a new turn: a provider ("ready"), the built-in offline model alone
    ("offline"), or nothing ("needs_provider").  `listed`: provider.list's answer (None until
    it is in, or from a backend without it)."""
    if listed is not None and not listed:
        return "needs_provider"
    if summary is None:
        return "ready"
    if summary.offline_default:
        alone = listed is None or [c.name for c in listed] == [summary.name]
        return "offline" if alone else "ready"
    if listed is None and not summary.configured and not summary.name:
        return "needs_provider"
    return "ready"


def first_run(summary: p.ProviderSummary | None) -> bool:
    """Nothing is configured on this backend (the built-in offline model aside)."""
    return summary is not None and not summary.configured


def offline_words(model: str, colour: str) -> str:
    """The welcome's paragraph when the offline model answers (rich text)."""
    named = html.escape(model, quote=False)
    return (f"<p style='color:{colour}'>Answers come from {named}, the small offline model built "
            "into Turnkey: it runs on this computer, with no account and no network. It is fine "
            f"for trying Turnkey out and weak at real work. <a href='{ADD_PROVIDER}'>Add a "
            "provider</a> to use a hosted model.</p>")


def needs_words(colour: str) -> str:
    """The welcome's paragraph when nothing can answer yet (rich text)."""
    return (f"<p style='color:{colour}'><b>A model provider is needed.</b> This install has no "
            "offline model, so nothing can answer yet. "
            f"<a href='{ADD_PROVIDER}'>Add a provider</a>: a hosted model with its API key, or "
            "a server of your own; the form tests the connection before you save it.</p>")


def provider_name(existing: Iterable[str]) -> str:
    """The name the first-run form offers a new provider under: "main", else "main-2", ..."""
    taken = set(existing)
    name, n = "main", 1
    while name in taken:
        n += 1
        name = f"main-{n}"
    return name
