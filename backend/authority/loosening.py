"""Which config changes make the backend less careful (no I/O): approvals and the sandbox.

`config.set` asks this before it applies a patch; a change named here needs
more than the `admin` scope (see `Methods.config_set`).  Both configs are the
effective ones, defaults filled in, so deleting a key back to a weaker
default counts like setting it.  The `[sandbox]` keys are read defensively
(a config without that table has nothing to loosen there).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# How much a person is asked, least first.
APPROVAL_MODES = ("off", "smart", "ask")


def loosened(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """The dotted names of the settings `new` loosens compared with `old`, in a fixed order."""
    found = []
    if _strictness(_value(new, "approvals", "mode")) < _strictness(_value(old, "approvals", "mode")):
        found.append("approvals.mode")
    if _value(old, "sandbox", "enabled") is True and _value(new, "sandbox", "enabled") is not True:
        found.append("sandbox.enabled")
    if _value(new, "sandbox", "network") is True and _value(old, "sandbox", "network") is not True:
        found.append("sandbox.network")
    if _names(_value(new, "sandbox", "env")) - _names(_value(old, "sandbox", "env")):
        found.append("sandbox.env")  # another variable passed into commands
    return found


def _value(config: Mapping[str, Any], table: str, key: str) -> Any:
    section = config.get(table)
    return section.get(key) if isinstance(section, Mapping) else None


def _strictness(mode: Any) -> int:
    """A mode's rank; an unknown or missing one ranks lowest, so moving away from it is never
    counted as loosening and moving to it always is."""
    return APPROVAL_MODES.index(mode) if mode in APPROVAL_MODES else -1


def _names(value: Any) -> set[str]:
    return {str(v) for v in value} if isinstance(value, list) else set()
