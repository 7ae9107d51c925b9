"""A session's "provider · model" choices: the model box's entries, what a typed entry means,
and what a choice asks `session.update` to change.  Qt-free."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from desktop.state.attachments import NO_VISION_MARK, current_vision
from shared import protocol as p

SEP = " · "


@dataclass(frozen=True)
class Choice:
    """A provider and the model asked of it; `provider` is "" when no provider is known (a
    backend that does not list them): the label is then the model alone."""

    provider: str
    model: str

    @property
    def label(self) -> str:
        return f"{self.provider}{SEP}{self.model}" if self.provider else self.model


def current(session: p.Session | None, providers: Sequence[p.ProviderChoice]) -> Choice | None:
    """What the session asks now: its own provider (else the default one) and its model."""
    if session is None or not session.model:
        return None
    default = next((c.name for c in providers if c.default), "")
    return Choice(session.provider or default, session.model)


def entries(session: p.Session | None, providers: Sequence[p.ProviderChoice]) -> list[Choice]:
    """Every provider with its model, the default first (provider.list's order); the session's
    own choice first when it is none of those (another model it was given, a provider no
    longer configured).  None twice."""
    listed = [Choice(c.name, c.model) for c in providers]
    now = current(session, providers)
    ordered = listed if now is None or now in listed else [now, *listed]
    return list(dict.fromkeys(ordered))


def others(session: p.Session | None, providers: Sequence[p.ProviderChoice]) -> list[Choice]:
    """The entries a failed turn can be tried again on: those of every other provider."""
    now = current(session, providers)
    return [c for c in entries(session, providers)
            if c.provider and (now is None or c.provider != now.provider)]


def typed(text: str, session: p.Session | None,
          providers: Sequence[p.ProviderChoice]) -> Choice | None:
    """What a person typed into the box: "provider · model" naming a configured provider, or
    a model name alone for the session's current provider; None for nothing."""
    text = text.strip()
    if not text:
        return None
    name, sep, model = text.partition("·")
    known = {c.name for c in providers}
    if sep and name.strip() in known and model.strip():
        return Choice(name.strip(), model.strip())
    now = current(session, providers)
    return Choice(now.provider if now else "", text)


def change(choice: Choice, session: p.Session | None,
           providers: Sequence[p.ProviderChoice]) -> dict[str, str] | None:
    """The fields of `session.update` that make `choice` the session's, or None when it is so
    already.  The provider is sent only when it changes: a session on the default provider
    that only takes another model keeps following the default."""
    now = current(session, providers)
    if choice == now:
        return None
    if not choice.provider or (now is not None and choice.provider == now.provider):
        return {"model": choice.model}
    return {"provider": choice.provider, "model": choice.model}


def marked(choice: Choice, providers: Sequence[p.ProviderChoice], images: bool) -> str:
    """An entry's words: its label, marked when images wait to be sent and its provider is
    known not to see them (a provider that does not say is not marked)."""
    blind = images and choice.provider and current_vision(choice.provider, providers) is False
    return choice.label + NO_VISION_MARK if blind else choice.label
