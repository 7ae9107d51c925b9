"""The settings dialog's Providers page without Qt: the providers configured and the one the
form shows (a saved one, or a new one added but not saved yet), what the form is filled with,
which controls take a click, what Save, Remove and Save key change (a `config.set` patch and
the words said once saved), and what Test sends, says, and when its result goes.

The config is the dialog's effective one (`config.get` / `config.set`); the form's text comes
in as a `Form`, read off the widgets as it stands.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from desktop.state.settings import (
    INT_FIELDS,
    PRICE_FIELDS,
    TEXT_FIELDS,
    error_words,
    number,
    same,
    shown,
)
from shared import protocol as p
from shared.client import InvalidParams, RpcError
from shared.config import PROVIDER_KINDS, ConfigView, ProviderKind, ProviderView
from shared.methods import ProviderTest

# The form's fields, in the order it shows them (after the name and the kind).
FORM_FIELDS = ("base_url", "model", *INT_FIELDS, *PRICE_FIELDS, "api_key_secret")
NEW_KIND: ProviderKind = "openai"  # a new provider's kind, and the form's when it shows none

NO_NAME = "Name: give the provider a name."
KEY_LATER = "Save the provider first, then its key."
KEY_FIRST = "Save the provider first, then its key (Test already uses the key as typed)."
KEY_EMPTY = "Paste a key first."
KEY_STORING = "Storing the key…"


@dataclass(frozen=True)
class Form:
    """The provider form's text: as it stands (read off the widgets), or as it is to be shown."""

    name: str = ""
    kind: ProviderKind = NEW_KIND
    texts: Mapping[str, str] = field(default_factory=dict)  # by FORM_FIELDS key; missing: ""
    default: bool = False  # "Use for new turns (the default provider)"

    def text(self, key: str) -> str:
        return self.texts.get(key, "")

    def values(self) -> dict[str, Any]:
        """The form as config values: "" is None (the backend's default); numbers parsed
        where they parse, otherwise left as text so the backend names the field."""
        values: dict[str, Any] = {"kind": self.kind}
        for key in TEXT_FIELDS:
            values[key] = self.text(key).strip() or None
        for key in INT_FIELDS:
            values[key] = number(self.text(key), integer=True)
        for key in PRICE_FIELDS:
            values[key] = number(self.text(key), integer=False)
        return values


def key_name_hint(name: str) -> str:
    """What an empty key name means: the provider's own name."""
    return name or "the provider's name"


@dataclass(frozen=True)
class Fill:
    """What the form is to show, and whether the words under it go: the last Test's result
    (it was about another provider, or one picked or added anew) and the last key's."""

    form: Form
    clears_test: bool
    clears_key: bool


@dataclass(frozen=True)
class Row:
    """A provider's row in the list."""

    name: str
    text: str  # "main (default)"


@dataclass(frozen=True)
class Controls:
    """Which controls take a click now."""

    form: bool  # the kind, the fields, Default, Revert (the name is never typed in)
    base_url: bool
    save: bool
    remove: bool
    key_edit: bool  # a new provider's key can be tested before it is saved
    key_button: bool
    test: bool
    add: bool


@dataclass(frozen=True)
class Problem:
    """What the form cannot send, or what the backend refused: the field to mark (its last
    key, "" for none), the words shown, the backend's own words and its `data.field`."""

    key: str
    words: str
    raw: str = ""
    field: str | None = None


def refusal(exc: RpcError) -> Problem:
    """A call the backend refused, as the form shows it: the field it named is marked."""
    named = exc.field if isinstance(exc, InvalidParams) else ""
    return Problem(named.rsplit(".", 1)[-1] if named else "", error_words(exc), exc.message,
                   named or None)


@dataclass(frozen=True)
class Change:
    """A `config.set` patch, the provider shown once it is saved (None: the default one), and
    what is said then."""

    patch: dict[str, Any]
    select: str | None
    done: str


@dataclass(frozen=True)
class KeySave:
    """Save key: store `value` under `secret` for `provider`; `links` once stored, the
    provider's key name is set to `secret` (the backend uses a stored key only for a provider
    whose api_key_secret names it)."""

    provider: str
    secret: str
    links: bool


def key_stored_words(secret: str, result: p.SecretSetResult) -> str:
    where = "the system keyring" if result.stored == "keyring" else "a file"
    text = f"Key stored in {where} under the name “{secret}”."
    return f"{text} Warning: {result.warning}." if result.warning else text


def key_status_words(name: str, prov: ProviderView) -> str:
    secret = prov.api_key_secret or name
    words = "a key is set" if prov.api_key == "set" else "no key is set"
    text = f"Key status: {words}. This provider's key is kept under the name “{secret}”."
    if prov.api_key_env:
        text += f" The environment variable {prov.api_key_env}, when set, is used instead."
    if not prov.api_key_secret:
        text += " Saving a key also sets this provider's key name to its own name."
    return text


def remove_question(name: str) -> tuple[str, str]:
    return (f"Remove the provider “{name}”?",
            "Its settings are deleted from config.toml. A key stored for it stays stored (under "
            "its key name) until replaced.")


def failed_test(name: str, words: str) -> p.ProviderTestResult:
    """A test the backend could not run (the call failed), as a failed result in `words`."""
    return p.ProviderTestResult(ok=False, provider=name, model="", latency_ms=0,
                                error=p.ProviderFailure(kind="rpc", message=words))


class ProviderSettings:
    """What the Providers page knows: the effective config, the provider the form shows (a
    saved one, `current`, or a new one, `draft`, added but not saved yet; never both), and the
    dialog's operations in flight (`busy`; this page's are "save", "key" and "test")."""

    def __init__(self, busy: set[str] | None = None) -> None:
        self.config: ConfigView | None = None
        self.current: str | None = None
        self.draft: str | None = None
        self.busy = busy if busy is not None else set()
        self.filled = ""  # the name in the form (a Test result is about the provider named there)
        self.last_error_field: str | None = None  # the backend's data.field of the last refusal

    # --- the providers -------------------------------------------------------------------

    def providers(self) -> dict[str, ProviderView]:
        return dict(self.config.providers) if self.config is not None else {}

    def default_provider(self) -> str | None:
        """The provider turns use: `default_provider`, or the only one configured."""
        chosen = self.config.provider() if self.config is not None else None
        return chosen[0] if chosen is not None else None

    def names(self) -> list[str]:
        return sorted(self.providers())

    def rows(self) -> list[Row]:
        """The saved providers, then a new one being added (said not to be saved yet): the
        person sees where it is going before pressing Save."""
        default = self.default_provider()
        rows = [Row(n, f"{n} (default)" if n == default else n) for n in self.names()]
        if self.draft is not None:
            rows.append(Row(self.draft, f"{self.draft} (new, not saved)"))
        return rows

    def selected(self) -> str | None:
        """The row selected: the provider the form shows, saved or new."""
        if self.draft is not None:
            return self.draft
        return self.current if self.current in self.providers() else None

    def shown(self) -> str:
        """The name the form shows ("" when it shows none)."""
        return self.current or self.draft or ""

    # --- what the form shows --------------------------------------------------------------

    def form(self) -> Form:
        """The form for the provider shown: a saved one's settings, or a new one's blanks
        (made the default when it is the first)."""
        if self.draft is not None:
            return Form(self.draft, default=not self.providers())
        prov = self.providers().get(self.current or "")
        if prov is None or self.current is None:
            return Form()
        return Form(self.current, prov.kind, {k: shown(getattr(prov, k)) for k in FORM_FIELDS},
                    self.current == self.default_provider())

    def _fill(self, *, fresh: bool = False) -> Fill:
        """The form anew (a saved provider no longer configured is shown no more)."""
        if self.draft is None and self.current not in self.providers():
            self.current = None
        before, self.filled = self.filled, self.shown()
        return Fill(self.form(), clears_test=fresh or self.filled != before, clears_key=fresh)

    def applied(self, config: ConfigView, refill: bool) -> Fill | None:
        """A config arrived: the form shows it again (`refill`, or the provider shown is gone:
        the same one, else the default, else the first), or keeps what the person left in it,
        unsaved edits and a new provider (None)."""
        self.config = config
        names = self.names()
        if not refill and not (self.current is not None and self.current not in names):
            return None
        default = self.default_provider()
        self.current = self.current if self.current in names else (
            default if default in names else (names[0] if names else None))
        self.draft = None
        return self._fill()

    def picked(self, name: str) -> Fill | None:
        """A row picked in the list: its provider's settings, nothing said about another's;
        None for the new provider's own row (its form stays as the person is filling it)."""
        if name == self.draft:
            return None
        self.current, self.draft = name, None
        return self._fill(fresh=True)

    def reverted(self) -> Fill:
        """Revert: the saved settings of the provider shown (a new one's form goes)."""
        self.draft = None
        return self._fill()

    def started(self, name: str) -> Fill | Problem:
        """Add…: an empty form for a provider called `name`, saved with Save."""
        name = name.strip()
        if not name:
            return Problem("name", NO_NAME)
        if name in self.providers():
            return Problem("name", f"Name: a provider called “{name}” already exists.")
        self.current, self.draft = None, name
        return self._fill(fresh=True)

    def key_status(self) -> str:
        prov = self.providers().get(self.current or "")
        if self.current is not None and prov is not None:
            return key_status_words(self.current, prov)
        return KEY_LATER if self.draft is not None else ""

    def controls(self, kind: ProviderKind, base_url: str) -> Controls:
        """`kind` and `base_url`: the form's as they stand.  A kind without a URL of its own
        leaves the field on only while a stale URL is in it, so that it can be cleared."""
        on = self.current is not None or self.draft is not None
        saved = on and self.current is not None
        return Controls(
            form=on, base_url=on and (PROVIDER_KINDS[kind].base_url is not None or bool(base_url)),
            save=on and "save" not in self.busy, remove=saved, key_edit=on,
            key_button=saved and "key" not in self.busy, test=on and "test" not in self.busy,
            add=self.config is not None)

    # --- Save and Remove ------------------------------------------------------------------

    def patch(self, form: Form) -> dict[str, Any] | None:
        """The `config.set` patch for the form: only what changed (None: nothing did).  A new
        provider sends what is filled in; a cleared field sends null (the default applies)."""
        name = form.name.strip()
        old = self.providers().get(name) if self.current is not None else None
        values = form.values()
        if old is None:
            table = {k: v for k, v in values.items() if v is not None}
        else:
            table = {k: v for k, v in values.items() if not same(v, getattr(old, k))}
        patch: dict[str, Any] = {"providers": {name: table}} if table or old is None else {}
        was_default = self.config is not None and self.config.default_provider == name
        if form.default and not was_default:
            patch["default_provider"] = name
        elif not form.default and was_default:
            patch["default_provider"] = None
        return patch or None

    def save(self, form: Form) -> Change | Problem | str:
        """Save: the change to send, the problem to show, or the words that say nothing changed."""
        name = form.name.strip()
        if not name:
            return Problem("name", NO_NAME)
        patch = self.patch(form)
        if patch is None:
            return f"Nothing changed for “{name}”."
        return Change(patch, name, f"Saved “{name}”.")

    def removal(self, name: str) -> Change:
        """Deletes `name` (`providers.NAME: null`) and every reference to it, which the backend
        would otherwise refuse."""
        patch: dict[str, Any] = {"providers": {name: None}}
        cfg = self.config
        if cfg is not None and cfg.default_provider == name:
            patch["default_provider"] = None
        if cfg is not None and cfg.auxiliary_provider == name:
            patch["auxiliary_provider"] = None
        fallbacks = list(cfg.fallback_providers) if cfg is not None else []
        if name in fallbacks:
            patch["fallback_providers"] = [f for f in fallbacks if f != name]
        return Change(patch, None, f"Removed “{name}”.")

    def saved(self, change: Change) -> None:
        """config.set took `change`: the form is to show its provider (the config follows)."""
        self.current, self.draft = change.select, None

    # --- the API key ----------------------------------------------------------------------

    def secret_name(self, name: str) -> str:
        """The name a provider's key is stored under: its api_key_secret, else its own name."""
        prov = self.providers().get(name)
        return (prov.api_key_secret if prov is not None else None) or name

    def key_save(self, value: str) -> KeySave | str | None:
        """Save key with `value` typed: what to store, the words that say why not, or None
        while a key is being stored already."""
        name = self.current
        if name is None:
            return KEY_FIRST
        if "key" in self.busy:
            return None
        if not value.strip():
            return KEY_EMPTY
        prov = self.providers().get(name)
        return KeySave(name, self.secret_name(name), prov is None or not prov.api_key_secret)

    @staticmethod
    def key_link(save: KeySave) -> dict[str, Any]:
        """The patch that names the stored key in the provider's settings."""
        return {"providers": {save.provider: {"api_key_secret": save.secret}}}

    def shows_key_name(self, save: KeySave, typed: str) -> bool:
        """Whether the form's empty key name is to show the name just linked (it still shows
        that provider), so that the form agrees with the backend."""
        return self.current == save.provider and not typed.strip()

    # --- Test -----------------------------------------------------------------------------

    def may_test(self) -> bool:
        return bool(self.shown()) and "test" not in self.busy

    def test_request(self, form: Form, key: str) -> ProviderTest:
        """provider.test for the form as it stands: its values as `provider_config` (merged
        over the saved provider, as Save would), and a key typed but not saved as `api_key`
        (used for this request only; the backend never keeps it)."""
        return ProviderTest(provider=form.name.strip(), provider_config=form.values(),
                            api_key=key.strip() or None)

    def testing_words(self, form: Form) -> str:
        name = form.name.strip()
        unsaved = self.current is None or self.patch(form) is not None
        return (f"Testing “{name}”{' as the form shows it (not saved)' if unsaved else ''}: one "
                "short request (up to a minute)…")

    def shows_result(self, tested: str) -> bool:
        """Whether a Test result of `tested` is shown: only while the form still shows that
        provider (a person who switched to another meanwhile would read it as the other's)."""
        return self.filled == tested
