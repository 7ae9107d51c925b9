"""The settings dialog's MCP servers page without Qt: which servers there are and where each
is, what the list, the selected server and its tools say, what the add form makes of what is
typed, and what each control changes (a `config.set` patch and the words said once saved).

Where a server is comes from `mcp.list`, then from the live `mcp.server` events and `mcp.test`
results (`McpServers`); how it is set comes with the dialog's config (`ConfigView.mcp`).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any, Literal

import msgspec

from desktop.state.badges import STATES, BadgeTone
from desktop.state.settings import reworded
from shared import protocol as p
from shared.client import InvalidParams, RpcError
from shared.config import ConfigView, McpServerConfig, fields
from shared.mcp_names import count_words

Kind = Literal["stdio", "http"]

TEST_TIMEOUT_S = 150.0  # a start is bounded by the server's startup_timeout_s (30 s by default)
APPROVALS: dict[p.McpApproval, str] = {
    "ask": "Ask before each call",
    "trusted": "Trusted: run its tools without asking",
}
KINDS: dict[Kind, str] = {"stdio": "A program (stdio)", "http": "A URL (streamable HTTP)"}
LABELS = {k: f.label for k, f in fields(McpServerConfig).items()}
NO_MCP = ("This Turnkey service cannot report MCP servers (it predates them): the servers "
          "below are as configured; their state shows once it is updated and restarted.")
EMPTY = ("No MCP servers yet. An MCP server gives the model more tools: a program that speaks "
         "MCP on stdin and stdout (for example “uvx mcp-server-time”), or a server's URL. "
         "Add one with “Add…”.")


# --- words ------------------------------------------------------------------------------


def state_of(status: p.McpServerStatus | None, config: McpServerConfig | None) -> str:
    """The state a badge shows: the backend's, else "disabled" for a server switched off,
    else "unknown" (not reported yet, or a backend without mcp.list)."""
    if status is not None:
        return status.state
    return "disabled" if config is not None and not config.enabled else "unknown"


def tools_words(status: p.McpServerStatus | None) -> str:
    if status is None or status.tools is None:
        return "—"
    return count_words(status.tools)


def what_words(config: McpServerConfig) -> str:
    """What the server is: the program it runs, or where it is."""
    if config.url:
        return f"URL: {config.url}"
    return f"Runs: {shlex.join(config.command)}"


def running_words(status: p.McpServerStatus | None) -> str:
    """The small print: its sandbox, its restarts."""
    if status is None:
        return ""
    parts = []
    if status.transport == "stdio" and status.state in ("ready", "starting"):
        parts.append("Runs in the command sandbox" if status.sandboxed else "Runs without a sandbox")
    if status.restarts:
        parts.append(f"restarted {status.restarts} time{'' if status.restarts == 1 else 's'}")
    return " · ".join(parts)


def test_words(result: p.McpTestResult) -> tuple[str, str]:
    """mcp.test's result as the page shows it: (text, tone)."""
    name = result.server.name
    if result.ok:
        return (f"OK: “{name}” started and listed {tools_words(result.server)} in "
                f"{result.latency_ms} ms."), "success"
    why = result.error or result.server.error or "it failed for an unknown reason"
    return f"Failed: “{name}”: {why}", "danger"


def form_test_words(result: p.McpTestResult) -> tuple[str, str]:
    """mcp.test's result under the add form: `test_words`, and the tools it listed by name."""
    text, tone = test_words(result)
    tools = ", ".join(t.name for t in result.server.tools or [])
    return f"{text}{f' Tools: {tools}.' if tools else ''}", tone


def failed_test(name: str, words: str, transport: Literal["stdio", "http"]) -> p.McpTestResult:
    """A test the backend could not run (the call failed), as a failed result in `words`."""
    return p.McpTestResult(
        ok=False, latency_ms=0, error=words,
        server=p.McpServerStatus(name=name, transport=transport, state="failed", error=words))


def secret_name(server: str) -> str:
    """Where an added server's key is stored (`secret.set`): `mcp-NAME`."""
    return f"mcp-{server}"


def key_stored_words(secret: str, result: p.SecretSetResult) -> tuple[str, str]:
    """A key stored from a server's page: where it went, any warning; (text, tone)."""
    where = "the system keyring" if result.stored == "keyring" else "a file"
    text = f"Key stored in {where} as “{secret}”."
    if result.warning:
        return f"{text} Warning: {result.warning}.", "warning"
    return text, ""


def mcp_error_words(exc: RpcError) -> str:
    """A refusal of config.set or mcp.test, in words: the field's label and the server's name."""
    if not isinstance(exc, InvalidParams):
        return exc.message
    parts = [x for x in exc.field.split(".") if x and x != "patch"]
    if parts[:2] == ["mcp", "servers"] and len(parts) >= 3:
        rest = parts[3:]
        if not rest:
            return f"Server “{parts[2]}”: {exc.message.rstrip('.')}."
        key = rest[0]
        label = LABELS.get(key, key.replace("_", " ").capitalize())
        text = reworded(key, exc.message).split(": ", 1)[-1]
        return f"{label} of server “{parts[2]}”: {text}"
    if parts[:1] == ["server_config"] and len(parts) >= 2:
        key = parts[1]
        label = LABELS.get(key, key.replace("_", " ").capitalize())
        return f"{label}: {reworded(key, exc.message).split(': ', 1)[-1]}"
    return reworded(".".join(parts), exc.message)


# --- the list, the selected server, its keys and tools -----------------------------------


@dataclass(frozen=True)
class ServerRow:
    """A server's row in the list."""

    name: str
    state: str  # in words ("Ready")
    tone: BadgeTone
    tools: str  # "2 tools", "—"
    state_tip: str  # the state column's tooltip: the error, else the state's words
    what: str  # the name column's tooltip: what it runs, or where it is


@dataclass(frozen=True)
class KeySlot:
    """A key the server takes from the keyring (`header_secrets`, `env_secrets`)."""

    kind: Literal["header", "variable"]
    target: str  # the header or the variable it goes into
    secret: str  # the secret's name

    @property
    def words(self) -> str:
        return f"Key for the {self.kind} {self.target}"


@dataclass(frozen=True)
class ToolRow:
    """One tool of the selected server as its row shows it."""

    name: str
    approval: str  # "asks", "trusted", "hidden"; "(this tool)" when set for it alone
    about: str  # its description on one line
    description: str
    name_tip: str
    hidden: bool


@dataclass(frozen=True)
class Details:
    """The selected server's side of the page."""

    name: str
    state: str
    what: str
    running: str
    error: str
    enabled: bool
    approval: str
    keys: tuple[KeySlot, ...]
    tools: tuple[ToolRow, ...] | None  # None: not listed yet
    tools_empty: str  # what stands where the tools would ("" when there are some)


@dataclass(frozen=True)
class Controls:
    """Which controls take a click now."""

    remove: bool
    test: bool
    enabled: bool
    approval: bool
    save_key: bool
    add: bool
    form_test: bool


def key_slots(config: McpServerConfig) -> tuple[KeySlot, ...]:
    """The keys a server takes from the keyring: its headers', then its variables' (each sorted)."""
    return (*(KeySlot("header", h, s) for h, s in sorted(config.header_secrets.items())),
            *(KeySlot("variable", v, s) for v, s in sorted(config.env_secrets.items())))


def tool_rows(status: p.McpServerStatus | None, config: McpServerConfig) -> tuple[ToolRow, ...] | None:
    if status is None or status.tools is None:
        return None
    rows = []
    for tool in status.tools:
        approval = ("hidden" if not tool.enabled else
                    "trusted" if tool.approval == "trusted" else "asks")
        own = config.tools.get(tool.name)
        if tool.enabled and own is not None and own.approval is not None:
            approval += " (this tool)"
        rows.append(ToolRow(
            name=tool.name, approval=approval, about=" ".join(tool.description.split()),
            description=tool.description, hidden=not tool.enabled,
            name_tip=f"The model calls it {tool.model_name}" if tool.enabled else
            "Hidden: not offered to the model"))
    return tuple(rows)


def tools_empty_words(status: p.McpServerStatus | None, config: McpServerConfig) -> str:
    """What stands in place of the tools: why there are none (yet), and what to do."""
    tools = status.tools if status is not None else None
    if tools:
        return ""
    if tools is not None:
        return "It lists no tools."
    if status is not None and status.state == "failed":
        return "None: it did not start. Fix what the error says, then Test."
    if not config.enabled:
        return "Disabled: its tools are not offered to the model."
    if status is not None and status.state == "starting":
        return "Listed once it has started."
    return "Not listed yet: it starts when a turn needs its tools. Test starts it now and lists them."


class McpServers:
    """What the page knows: the servers configured, where each is, the one selected, and the
    operations in flight ("list", "save", "test", "key": one of each at a time)."""

    def __init__(self) -> None:
        self.configs: dict[str, McpServerConfig] = {}
        self.statuses: dict[str, p.McpServerStatus] = {}
        self.current: str | None = None
        self.listing_error = ""
        self.busy: set[str] = set()
        self._config_asked = False

    def names(self) -> list[str]:
        return sorted(self.configs, key=str.lower)

    def set_config(self, config: ConfigView) -> None:
        """The dialog's effective config: a server no longer configured is forgotten."""
        self.configs = dict(config.mcp.servers)
        self._config_asked = False
        for gone in set(self.statuses) - set(self.configs):
            del self.statuses[gone]

    def listed(self, servers: list[p.McpServerStatus]) -> None:
        """`mcp.list` answered."""
        self.listing_error = ""
        self.statuses = {s.name: self._merged(s) for s in servers}

    def heard(self, server: p.McpServerStatus) -> tuple[p.McpServerStatus, bool]:
        """An `mcp.server` event: the status kept, and whether to fetch the config again (a
        server added elsewhere, by another window or the CLI; asked once until it comes)."""
        status = self._merged(server)
        self.statuses[status.name] = status
        ask = status.name not in self.configs and not self._config_asked
        self._config_asked = self._config_asked or ask
        return status, ask

    def tested(self, result: p.McpTestResult) -> bool:
        """mcp.test's result: a configured server's status taken from it (True when it was)."""
        if result.server.name not in self.configs:
            return False
        self.statuses[result.server.name] = result.server
        return True

    def _merged(self, status: p.McpServerStatus) -> p.McpServerStatus:
        """A status without tools keeps the ones last listed (an event may leave them out)."""
        old = self.statuses.get(status.name)
        if status.tools is None and old is not None and old.tools is not None \
                and status.state in ("ready", "starting"):
            return msgspec.structs.replace(status, tools=old.tools)
        return status

    def kept(self) -> str | None:
        """The server selected once the list is drawn anew: the same one, else the first."""
        names = self.names()
        return self.current if self.current in names else (names[0] if names else None)

    def rows(self) -> list[ServerRow]:
        out = []
        for name in self.names():
            status = self.statuses.get(name)
            state = state_of(status, self.configs.get(name))
            words, tone = STATES.get(state, (state, "muted"))
            error = status.error if status is not None else None
            out.append(ServerRow(name, words, tone, tools_words(status), error or words,
                                 what_words(self.configs[name])))
        return out

    def details(self) -> Details | None:
        """The selected server's side (None when none is selected, or it is not configured)."""
        name = self.current
        config = self.configs.get(name or "")
        if name is None or config is None:
            return None
        status = self.statuses.get(name)
        return Details(
            name=name, state=state_of(status, config), what=what_words(config),
            running=running_words(status), error=(status.error if status is not None else None) or "",
            enabled=config.enabled, approval=config.approval, keys=key_slots(config),
            tools=tool_rows(status, config), tools_empty=tools_empty_words(status, config))

    def controls(self, adding: bool) -> Controls:
        has = self.current is not None and not adding
        saving = "save" in self.busy
        testing = "test" in self.busy
        return Controls(remove=has and not saving, test=has and not testing,
                        enabled=has and not saving, approval=has and not saving,
                        save_key="key" not in self.busy, add=not saving, form_test=not testing)

    def may_test(self, name: str) -> bool:
        """Whether a server just added, or given a key, is tested at once (it is enabled)."""
        return name in self.configs and self.configs[name].enabled

    def transport(self, name: str, adding: bool, form_kind: Kind) -> Literal["stdio", "http"]:
        """A failed test's server's transport: the saved server's, else the add form's kind."""
        config = self.configs.get(name)
        return config.transport if config is not None and not adding else form_kind


# --- what the controls change -----------------------------------------------------------


@dataclass(frozen=True)
class Change:
    """A `config.set` patch, and what is said once it is saved."""

    patch: dict[str, Any]
    done: str


@dataclass(frozen=True)
class ToolChoice:
    """An entry of a tool's menu."""

    words: str
    change: dict[str, Any]
    checked: bool | None  # None: not a choice of approval (the last entry)


def _server(name: str, table: dict[str, Any] | None) -> dict[str, Any]:
    return {"mcp": {"servers": {name: table}}}


def enabling(name: str, on: bool) -> Change:
    """Enabled checked or cleared: the backend starts or stops the server."""
    return Change(_server(name, {"enabled": on}),
                  f"Enabled “{name}”: its tools are offered from the next turn." if on else
                  f"Disabled “{name}”: stopped; the model no longer sees its tools.")


def approving(name: str, approval: str) -> Change:
    words = "its calls run without asking" if approval == "trusted" else "each call asks first"
    return Change(_server(name, {"approval": approval}), f"Saved: {words}.")


def removal(name: str) -> Change:
    """`mcp.servers.NAME: null` deletes the table."""
    return Change(_server(name, None), f"Removed “{name}”.")


def remove_question(name: str) -> tuple[str, str]:
    return (f"Remove the MCP server “{name}”?",
            "It is stopped and its settings are deleted from config.toml; the model no longer "
            "sees its tools. A key stored for it stays stored.")


def tool_change(server: str, tool: str, change: dict[str, Any]) -> Change:
    """One tool's settings (`[mcp.servers.SERVER.tools.TOOL]`; None values fall back to the
    server's)."""
    words = {("approval", "ask"): f"“{tool}” asks before each call.",
             ("approval", "trusted"): f"“{tool}” runs without asking.",
             ("approval", None): f"“{tool}” follows the server's approval.",
             ("enabled", False): f"“{tool}” is hidden from the model.",
             ("enabled", None): f"“{tool}” is offered to the model again."}
    key, value = next(iter(change.items()))
    return Change(_server(server, {"tools": {tool: change}}), words.get((key, value), "Saved."))


def tool_menu(config: McpServerConfig, tool: str) -> list[ToolChoice]:
    """A tool's menu: how its calls are approved (the one in force checked), then hiding it
    from the model or offering it again."""
    own = config.tools.get(tool)
    hidden = own is not None and not own.enabled
    server = "trusted" if config.approval == "trusted" else "ask"
    return [
        ToolChoice("Ask before each call", {"approval": "ask"},
                   own is not None and own.approval == "ask"),
        ToolChoice("Run without asking (trusted)", {"approval": "trusted"},
                   own is not None and own.approval == "trusted"),
        ToolChoice(f"As the server says ({server})", {"approval": None},
                   own is None or own.approval is None),
        ToolChoice("Offer it to the model" if hidden else "Hide it from the model",
                   {"enabled": None if hidden else False}, None),
    ]
