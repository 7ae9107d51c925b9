"""Which config changes make the backend less careful (no I/O): approvals, the sandbox, MCP
servers, hooks, doors, where a provider's stored key is sent, and the store itself.

`config.set` asks this before it applies a patch; a change named here needs
more than the `admin` scope (see `Methods.config_set`).  Both configs are the
effective ones, defaults filled in, so deleting a key back to a weaker
default counts like setting it.  The `[sandbox]` keys are read defensively
(a config without that table has nothing to loosen there).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from backend.config import ConfigFile, key_destination

# How much a person is asked, least first.
APPROVAL_MODES = ("off", "smart", "ask")


def of_patch(config: ConfigFile, patch: dict[str, Any]) -> list[str]:
    """What `config.set {patch}` would loosen of the config in force (validated, not applied)."""
    old = msgspec.to_builtins(config.config)
    new = msgspec.to_builtins(config.preview(patch))
    return loosened(old, new)


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
    found.extend(_mcp_loosened(old, new))
    found.extend(_hooks_loosened(old, new))
    found.extend(_doors_loosened(old, new))
    found.extend(_providers_loosened(old, new))
    if old.get("store") != new.get("store"):
        # Where every session, prompt and approval is kept (and, on a shared PostgreSQL,
        # who else runs them); a store that cannot be opened also stops the next start.
        found.append("store")
    return found


def _providers_loosened(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """A provider that uses a stored key (from the environment or the secrets) and sends it
    somewhere new: a new provider naming a key, or a saved one whose kind, base URL or key
    source changed.  Whoever may do that may send the key to their own server."""
    before, after = _tables(old, "providers"), _tables(new, "providers")
    found = []
    for name, provider in sorted(after.items()):
        if not (provider.get("api_key_env") or provider.get("api_key_secret")):
            continue  # sends no stored key
        was = before.get(name)
        if was is None or _destination(was) != _destination(provider):
            found.append(f"providers.{name}")
    return found


def _destination(provider: Mapping[str, Any]) -> tuple[str, ...]:
    return key_destination(provider.get("kind", "openai"), provider.get("base_url"),
                           provider.get("api_key_env"), provider.get("api_key_secret"))


def _tables(config: Mapping[str, Any], table: str) -> dict[str, Mapping[str, Any]]:
    section = config.get(table)
    if not isinstance(section, Mapping):
        return {}
    return {str(k): v for k, v in section.items() if isinstance(v, Mapping)}


# A door lets people outside this computer prompt the agent and answer its approvals: adding
# or enabling one, letting more users in, or pointing it at another account or room is as
# loose as handing out a token.
_DOOR_KEYS = ("homeserver", "user_id", "access_token_secret", "device_id", "rooms")


def _doors_loosened(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    before, after = _doors(old), _doors(new)
    found = []
    for name, door in sorted(after.items()):
        was = before.get(name)
        if door.get("enabled", True) is False:
            continue
        if was is None or was.get("enabled", True) is False \
                or _names(door.get("allowed_users")) - _names(was.get("allowed_users")) \
                or any(door.get(k) != was.get(k) for k in _DOOR_KEYS):
            found.append(f"doors.{name}")
    return found


def _doors(config: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    doors = config.get("doors")
    if not isinstance(doors, Mapping):
        return {}
    return {k: v for k, v in doors.items() if isinstance(v, Mapping)}


# Keys of an MCP server whose change makes it do more with less asking: what runs, where,
# with which keys, how it is sandboxed and approved.  Dropping a server, disabling it,
# or changing only its timeouts loosens nothing.
_MCP_KEYS = ("command", "url", "env", "env_secrets", "cwd", "headers", "header_secrets",
             "sandbox", "network")


def _mcp_loosened(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """An MCP server runs a program, or talks to a URL, with its tools offered to the model:
    adding or enabling one, or changing what it runs, is as loose as allowing a command."""
    before, after = _servers(old), _servers(new)
    found = []
    for name, server in sorted(after.items()):
        was = before.get(name)
        field = f"mcp.servers.{name}"
        if server.get("enabled", True) is False:
            continue
        if was is None or was.get("enabled", True) is False:
            found.append(field)
            continue
        changed = [k for k in _MCP_KEYS if server.get(k) != was.get(k)]
        if any(k != "sandbox" and k != "network" for k in changed) \
                or (server.get("sandbox") is not True and was.get("sandbox") is True) \
                or (server.get("network") is True and was.get("network") is not True):
            found.append(field)
        elif _trusts_more(was, server):
            found.append(f"{field}.approval")
    return found


# Keys of a hook whose change makes it run other code, or at other times.  Removing or
# disabling a hook, or changing only its timeout, loosens nothing.
_HOOK_KEYS = ("event", "command", "tools")


def _hooks_loosened(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """A hook is a program run at every turn, outside any approval: adding or enabling one,
    or changing what it runs or when, is as loose as allowing a command."""
    before, after = _tables(old, "hooks"), _tables(new, "hooks")
    found = []
    for name, hook in sorted(after.items()):
        if hook.get("enabled", True) is False:
            continue
        was = before.get(name)
        if was is None or was.get("enabled", True) is False \
                or any(hook.get(k) != was.get(k) for k in _HOOK_KEYS):
            found.append(f"hooks.{name}")
    return found


def _servers(config: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    mcp = config.get("mcp")
    servers = mcp.get("servers") if isinstance(mcp, Mapping) else None
    if not isinstance(servers, Mapping):
        return {}
    return {str(k): v for k, v in servers.items() if isinstance(v, Mapping)}


def _trusts_more(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    def trusted(server: Mapping[str, Any], tool: str | None) -> bool:
        tools = server.get("tools")
        entry = tools.get(tool) if tool is not None and isinstance(tools, Mapping) else None
        own = entry.get("approval") if isinstance(entry, Mapping) else None
        return (own or server.get("approval")) == "trusted"

    names: set[str | None] = {None}
    for server in (old, new):
        tools = server.get("tools")
        if isinstance(tools, Mapping):
            names |= {str(t) for t in tools}
    return any(trusted(new, t) and not trusted(old, t) for t in names)


def _value(config: Mapping[str, Any], table: str, key: str) -> Any:
    section = config.get(table)
    return section.get(key) if isinstance(section, Mapping) else None


def _strictness(mode: Any) -> int:
    """A mode's rank; an unknown or missing one ranks lowest, so moving away from it is never
    counted as loosening and moving to it always is."""
    return APPROVAL_MODES.index(mode) if mode in APPROVAL_MODES else -1


def _names(value: Any) -> set[str]:
    return {str(v) for v in value} if isinstance(value, list) else set()
