"""What the settings dialog knows without Qt: its fields and labels, how form text becomes
config values, the backend's validation errors in words a person reads, who answers now, and
what the approval mode's box changes.  The Providers page's state is desktop/state/providers.py."""

from __future__ import annotations

import math
import re
from typing import Any

from shared import protocol as p
from shared.client import InvalidParams, RpcError
from shared.config import (
    PROVIDER_KINDS,
    Approvals,
    Config,
    ConfigView,
    ProviderConfig,
    ProviderKind,
    fields,
)

# The form shows these provider settings, in this order; their labels and defaults come from
# the config schema (shared/config.py), as do the kinds and the approval modes.
TEXT_FIELDS = ("base_url", "model", "api_key_secret")
INT_FIELDS = ("context_window", "max_output_tokens")
PRICE_FIELDS = ("input_usd_per_mtok", "output_usd_per_mtok", "cached_input_usd_per_mtok")
PROVIDER_FIELDS = fields(ProviderConfig)

# Labels of every setting the form shows or an error can name, by its last key.
LABELS: dict[str, str] = {
    "name": "Name",
    "value": "API key",
    **{k: f.label for k, f in fields(Approvals).items()},
    **{k: f.label for k, f in fields(Config).items()},
    **{k: f.label for k, f in PROVIDER_FIELDS.items()},
}


def placeholder(key: str) -> str:
    """What an empty field means: the schema's default, in words where a number would mislead."""
    if key == "cached_input_usd_per_mtok":
        return "same as the input price"
    default = PROVIDER_FIELDS[key].default
    return "" if default is None or key == "kind" else shown(default)


def base_url_hint(kind: ProviderKind) -> str:
    info = PROVIDER_KINDS[kind]
    return info.base_url or info.base_url_hint or ""


def probe_words(result: p.ProviderTestResult) -> tuple[str, str]:
    """provider.test's result as the dialog shows it: the line (the backend's words, which
    say what to do), and the detail kept a click away ("" when there is none)."""
    name = result.provider or "the provider"
    if result.ok:
        return f"OK: “{name}” ({result.model}) answered in {result.latency_ms} ms.", ""
    error = result.error
    message = (error.message if error is not None else "") or "It failed for an unknown reason."
    return f"Failed: “{name}”: {message}", (error.detail or "") if error is not None else ""


# Who answers now, as the dialog's first line says it: (text, tone).
OFFLINE_WORDS = (
    "Answering now: the built-in offline model ({model}). It is small and weak: fine for a "
    "hello, not for real work. Next step: add a provider with “Add…” below (a hosted model "
    "with its API key, or a server of your own).")


def answering(config: ConfigView) -> tuple[str, str]:
    """Which provider new turns use, and whether that is the weak offline model."""
    summary = config.active_provider
    if summary is None:  # an older backend: what the config itself names
        chosen = config.provider()
        if chosen is None:
            return "No provider is configured yet: add one.", "warning"
        return f"Answering now: “{chosen[0]}” ({chosen[1].model}).", ""
    if summary.offline_default:
        return OFFLINE_WORDS.format(model=summary.model or "a tiny model"), "warning"
    if not summary.configured or summary.name is None:
        return ("No provider is configured, and the built-in offline model is not installed, so "
                "nothing can answer yet. Fill in a provider below (“Add…” starts a new one), test "
                "the connection and save it.", "danger")
    kind = next((info for name, info in PROVIDER_KINDS.items() if name == summary.kind), None)
    what = ", ".join(x for x in (summary.model, kind.label if kind else "") if x)
    return f"Answering now: “{summary.name}” ({what}).", ""


def shown(value: Any) -> str:
    """A config value as form text (None: empty, so the placeholder shows the default)."""
    if value is None:
        return ""
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    return str(value)


def number(text: str, *, integer: bool) -> Any:
    """Parsed text; "" is None; what does not parse (or is not finite) stays text, so the
    backend's error names the field."""
    text = text.strip().replace("_", "").replace(",", "")
    if not text:
        return None
    try:
        if integer:
            return int(text)
    except ValueError:
        pass
    try:
        number = float(text)
    except ValueError:
        return text
    if not math.isfinite(number):
        return text  # JSON has no inf/nan; sent as a number it would turn into null (a delete)
    if integer and number.is_integer():
        return int(number)
    return number


def same(new: Any, old: Any) -> bool:
    if isinstance(new, int | float) and isinstance(old, int | float) \
            and not isinstance(new, bool) and not isinstance(old, bool):
        return float(new) == float(old)
    return bool(new == old)


REWORDINGS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"^Expected `int` >= (\S+)$"), r"must be a whole number of at least \1"),
    (re.compile(r"^Expected `int` > (\S+)$"), r"must be a whole number greater than \1"),
    (re.compile(r"^Expected `float` >= 0\.0$"), "must be a number, 0 or more"),
    (re.compile(r"^Expected `float` >= (\S+)$"), r"must be a number of at least \1"),
    (re.compile(r"^Expected `float` > 0\.0$"), "must be a number greater than 0"),
    (re.compile(r"^Expected `float` > (\S+)$"), r"must be a number greater than \1"),
    (re.compile(r"^Expected `int`, got `float`$"), "must be a whole number"),
    (re.compile(r"^Expected `int`, got `str`$"), "must be a whole number"),
    (re.compile(r"^Expected `float`, got `str`$"), "must be a number"),
    (re.compile(r"^Expected `str`, got `\w+`$"), "must be text"),
    (re.compile(r"^Object missing required field `[^`]+`$"), "is required"),
    (re.compile(r"^Invalid enum value (.+)$"), r"cannot be \1"),
    (re.compile(r"^Object contains unknown field `([^`]+)`$"),
     r"“\1” is not a setting this version of Turnkey knows"),
]


def reworded(field: str, message: str) -> str:
    """The backend's -32602 message in words for a person, led by the field's label."""
    parts = [p for p in field.split(".") if p and p != "patch"]
    key = parts[-1] if parts else ""
    if parts[:1] == ["providers"] and len(parts) == 2:
        key = ""  # the table itself (e.g. not an object)
    label = LABELS.get(key, key.replace("_", " ").capitalize() if key else "")
    text = message
    for pattern, words in REWORDINGS:
        if pattern.match(message):
            text = pattern.sub(words, message)
            break
    text = text.replace("`", "")
    if parts[:1] == ["providers"] and len(parts) >= 2:
        where = f"{label} of provider “{parts[1]}”" if label else f"Provider “{parts[1]}”"
    else:
        where = label or "Settings"
    return f"{where}: {text}."


def error_words(exc: RpcError) -> str:
    """A call's refusal in words: a field the backend named, reworded; else its message."""
    return reworded(exc.field, exc.message) if isinstance(exc, InvalidParams) else exc.message


# The approval mode: what its box changes, and what it says meanwhile and after.
MODE_SAVING = "Saving…"
MODE_SAVED = "Saved. Running turns use it from their next tool call."


def mode_patch(mode: str) -> dict[str, Any]:
    return {"approvals": {"mode": mode}}
