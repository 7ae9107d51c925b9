"""The configuration's schema: every setting, its bounds, default and label, and what
`config.get` answers.

Both sides read it from here: the backend validates DIR/config.toml and `config.set`
patches with `validate`; front-ends build their settings forms from the same fields
(`label`, `default`) and kinds (`PROVIDER_KINDS`) instead of declaring them again.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit, urlunsplit

import msgspec

from shared.codec import ParamsError, convert
from shared.protocol import McpApproval, ModelName, ProviderSummary, SecretName

DEFAULT_MAX_FRAME_BYTES = 4 * 1024 * 1024
DEFAULT_CONTEXT_WINDOW = 128_000

Positive = Annotated[int, msgspec.Meta(ge=1)]
NonNegative = Annotated[int, msgspec.Meta(ge=0)]
Price = Annotated[float, msgspec.Meta(ge=0)]
Fraction = Annotated[float, msgspec.Meta(gt=0, le=1)]
Seconds = Annotated[float, msgspec.Meta(gt=0)]
EnvName = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")]

ProviderKind = Literal["openai", "anthropic", "local"]
ApprovalMode = Literal["ask", "smart", "off"]


@dataclass(frozen=True)
class KindInfo:
    label: str
    base_url: str | None  # what a provider of this kind calls when `base_url` is unset
    base_url_hint: str | None = None  # shown instead of a URL when the kind needs none


PROVIDER_KINDS: dict[ProviderKind, KindInfo] = {
    "openai": KindInfo("OpenAI-compatible (Chat Completions)", "https://api.openai.com/v1"),
    "anthropic": KindInfo("Anthropic (Messages)", "https://api.anthropic.com/v1"),
    "local": KindInfo("Local model (run by Turnkey)", None,
                      "not used: Turnkey starts the local model server itself"),
}

APPROVAL_MODES: dict[ApprovalMode, str] = {
    "smart": "Smart: ask for risky commands and for file changes outside the session folder",
    "ask": "Ask: ask before every command and every file change",
    "off": "Off: never ask (commands that are always refused stay refused)",
}


class Strict(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    pass


class ProviderConfig(Strict, kw_only=True, frozen=True):
    model: Annotated[ModelName, msgspec.Meta(title="Model")]  # a new session's model when it names none
    kind: Annotated[ProviderKind, msgspec.Meta(title="Kind")] = "openai"
    base_url: Annotated[str, msgspec.Meta(title="Base URL")] | None = None  # None: the kind's
    context_window: Annotated[int, msgspec.Meta(ge=1, title="Context window (tokens)")] = \
        DEFAULT_CONTEXT_WINDOW
    api_key_env: Annotated[str, msgspec.Meta(title="Key variable")] | None = None
    api_key_secret: Annotated[str, msgspec.Meta(title="Key name")] | None = None
    input_usd_per_mtok: Annotated[
        float, msgspec.Meta(ge=0, title="Input price (USD / million tokens)")] = 0.0
    output_usd_per_mtok: Annotated[
        float, msgspec.Meta(ge=0, title="Output price (USD / million tokens)")] = 0.0
    # Cache reads; None: the input price.
    cached_input_usd_per_mtok: Annotated[
        float, msgspec.Meta(ge=0, title="Cached-input price (USD / million tokens)")] | None = None
    request_timeout_s: Seconds = 600.0
    max_output_tokens: Annotated[int, msgspec.Meta(ge=1, title="Max output tokens")] = 4096
    # OpenAI-compatible only: the field that carries the answer's budget.  None sends none
    # (OpenAI's newer models refuse `max_tokens`; many local servers know only it).
    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] | None = None
    model_path: str | None = None  # kind "local": a GGUF file (default: the bundled model)
    tools: bool = True  # offer the built-in tools (a tiny local model cannot use them)
    # Whether its models see images (attachments go to them natively); None: known from the
    # kind and the model's name (`sees_images`).  `model_vision` overrides it per model name
    # (a session may pick another of the provider's models).
    vision: Annotated[bool, msgspec.Meta(title="Sees images")] | None = None
    model_vision: dict[ModelName, bool] = {}


# Model names that see images on OpenAI-compatible servers: OpenAI's vision families by
# prefix, and the open models' usual markers anywhere in the name.
VISION_PREFIXES = ("gpt-4o", "gpt-4.1", "gpt-4-turbo", "gpt-5", "o1", "o3", "o4", "chatgpt-4o")
VISION_MARKERS = ("vision", "-vl", "_vl", "llava", "pixtral", "gemma-3", "gemma3", "qwen2.5-vl",
                  "minicpm-v", "moondream", "bakllava", "gemini", "claude", "llama-4", "llama4")


def sees_images(cfg: ProviderConfig, model: str | None = None) -> bool:
    """Whether `model` (default: the provider's own) sees images: `model_vision[model]`,
    else the provider's `vision`, else the kind's rule (Anthropic's models all see; an
    OpenAI-compatible one by its name).  A local model never does: its prompt is text."""
    model = model or cfg.model
    if cfg.kind == "local":
        return False
    if model in cfg.model_vision:
        return cfg.model_vision[model]
    if cfg.vision is not None:
        return cfg.vision
    if cfg.kind == "anthropic":
        return True
    name = model.lower().rsplit("/", 1)[-1]  # "openai/gpt-4o" on a router
    return name.startswith(VISION_PREFIXES) or any(m in name for m in VISION_MARKERS)


class Approvals(Strict, frozen=True):
    mode: Annotated[ApprovalMode, msgspec.Meta(title="Approval mode")] = "smart"
    timeout_s: Seconds = 300


class Clarify(Strict, frozen=True):
    timeout_s: Seconds = 600  # a question nobody answers: the model is told so and goes on


class Limits(Strict, frozen=True):
    max_iterations: Positive = 90
    turn_timeout_s: Seconds = 3600
    tool_batch_deadline_s: Seconds = 420
    spill_chars: Positive = 100_000
    # The liveness watchdog: a turn with no progress (no delta from the model, no tool
    # running or finishing) for this long is interrupted, even while its lease refresher
    # runs.  Time spent waiting for a person's approval does not count; a quiet tool is
    # bounded by its own timeout and tool_batch_deadline_s instead.
    stall_timeout_s: Seconds = 900
    # Sub-agents (the delegate tool): how many levels below a person's session may delegate
    # (0: no delegate tool; 1: a session may, its sub-agents may not), and how many child
    # sessions run at once in the whole backend (the next call waits for a slot).
    delegate_depth: Annotated[int, msgspec.Meta(ge=0, le=4)] = 1
    delegate_concurrency: Annotated[int, msgspec.Meta(ge=1, le=16)] = 4


class Lease(Strict, frozen=True):
    """The per-session turn lease (backend/turn/lease.py)."""

    ttl_s: Seconds = 300
    refresh_s: Seconds = 60
    wait_s: Seconds = 1800
    # Backends sharing a PostgreSQL store beat a heartbeat every `heartbeat_s`; one silent
    # for `dead_after_s` while another beat is dead for everyone, and its sessions are
    # taken over at once.
    heartbeat_s: Seconds = 2
    dead_after_s: Seconds = 6


class Compression(Strict, frozen=True):
    enabled: bool = True  # false: never compress automatically (session.compress still does)
    threshold: Fraction = 0.50
    protect_first_n: NonNegative = 3
    tail_tokens_min: Positive = 10_000
    tail_tokens_max: Positive = 25_000
    rotate: bool = False


class Review(Strict, frozen=True):
    """`[review]`: after a person's turn completes, the auxiliary model reads it and may
    update memory and the person's skills (backend/turn/review.py).  Off by default."""

    enabled: bool = False
    # How long one review may take in all; a person's prompt stops it long before.
    timeout_s: Annotated[float, msgspec.Meta(ge=5, le=600)] = 120


class Sandbox(Strict, frozen=True):
    """How terminal commands are sandboxed (backend/tools/sandbox.py)."""

    enabled: bool = True  # false: no sandbox; `smart` then asks for every command not plainly read-only
    network: bool = False  # true: commands reach the network without asking
    env: list[EnvName] = []  # more variables commands may see (never a provider key's)


MCP_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9-]{0,31}$"
_MCP_NAME = re.compile(MCP_NAME_PATTERN)
McpServerName = Annotated[str, msgspec.Meta(pattern=MCP_NAME_PATTERN)]
HeaderName = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,128}$")]
class McpToolConfig(Strict, frozen=True):
    """One tool of an MCP server, by the server's own name for it."""

    approval: McpApproval | None = None  # None: the server's
    enabled: bool = True  # false: never offered to the model


class McpServerConfig(Strict, frozen=True):
    """`[mcp.servers.NAME]`: a stdio server (`command`) or a streamable HTTP one (`url`).

    Keys never sit in this file: `env_secrets` and `header_secrets` name secrets stored
    with `secret.set` (the OS keyring), by the variable or header they go into."""

    command: Annotated[list[str], msgspec.Meta(title="Command")] = []  # argv: program, arguments
    env: dict[EnvName, str] = {}
    env_secrets: dict[EnvName, SecretName] = {}
    cwd: Annotated[str, msgspec.Meta(title="Working folder")] | None = None  # None: the session's
    url: Annotated[str, msgspec.Meta(title="URL")] | None = None
    headers: dict[HeaderName, str] = {}
    header_secrets: dict[HeaderName, SecretName] = {}
    enabled: bool = True
    timeout_s: Annotated[float, msgspec.Meta(gt=0, title="Call timeout (s)")] = 120.0
    startup_timeout_s: Seconds = 30.0
    approval: Annotated[McpApproval, msgspec.Meta(title="Approval")] = "ask"
    tools: dict[str, McpToolConfig] = {}
    # A stdio server runs in the command sandbox (its folder writable, the data folder
    # hidden); unlike commands it has the network unless `network = false`.
    sandbox: bool = True
    network: bool = True

    @property
    def transport(self) -> Literal["stdio", "http"]:
        return "http" if self.url else "stdio"

    def tool_approval(self, tool: str) -> McpApproval:
        override = self.tools.get(tool)
        return override.approval if override is not None and override.approval else self.approval


class Mcp(Strict, frozen=True):
    servers: dict[McpServerName, McpServerConfig] = {}


HookEvent = Literal["session_start", "prompt_submit", "pre_tool", "post_tool", "turn_end"]
HOOK_EVENTS: tuple[HookEvent, ...] = ("session_start", "prompt_submit", "pre_tool", "post_tool",
                                      "turn_end")
TOOL_EVENTS: tuple[HookEvent, ...] = ("pre_tool", "post_tool")  # the events `tools` narrows
HOOK_NAME_PATTERN = MCP_NAME_PATTERN
HookName = Annotated[str, msgspec.Meta(pattern=HOOK_NAME_PATTERN)]
MAX_HOOK_TIMEOUT_S = 600.0
DEFAULT_HOOK_TIMEOUT_S = 10.0


class HookConfig(Strict, frozen=True):
    """`[hooks.NAME]`: a command of the person's run at a point of every turn
    (backend/tools/hooks.py).  It reads the event as one JSON object on stdin and may answer
    with one on stdout; it runs in the command sandbox, in the session's folder."""

    event: Annotated[HookEvent, msgspec.Meta(title="When it runs")]
    command: Annotated[list[str], msgspec.Meta(title="Command")]  # argv: program, arguments
    tools: list[str] = []  # pre_tool / post_tool: the tools it applies to; empty: every tool
    timeout_s: Annotated[float, msgspec.Meta(gt=0, le=MAX_HOOK_TIMEOUT_S, title="Timeout (s)")] = \
        DEFAULT_HOOK_TIMEOUT_S
    enabled: bool = True

    def applies_to(self, tool: str | None) -> bool:
        return tool is None or not self.tools or tool in self.tools


class MatrixDoorConfig(Strict, frozen=True):
    """`[doors.matrix]`: talk to the agent from Matrix rooms (backend/doors/matrix.py).

    The access token is never in this file: `access_token_secret` names a secret stored
    with `secret.set` (the OS keyring).  Only `allowed_users` may use the agent; anyone
    else in a room gets one refusal and nothing runs."""

    homeserver: Annotated[str, msgspec.Meta(title="Homeserver URL")]
    user_id: Annotated[str, msgspec.Meta(title="The agent's Matrix user id")]
    allowed_users: Annotated[list[str], msgspec.Meta(title="Who may use the agent")] = []
    access_token_secret: Annotated[SecretName, msgspec.Meta(title="Access token's secret name")] = \
        "doors.matrix"
    device_id: str | None = None  # None: the token's own (whoami)
    # Rooms bound to an existing session; any other room an allowed user invites the agent
    # into gets a session of its own at its first message.
    rooms: dict[str, str] = {}
    cwd: Annotated[str, msgspec.Meta(title="New sessions' folder")] | None = None  # None: home
    enabled: bool = True
    # The streamed reply is edited at most this often (homeservers rate-limit edits).
    edit_interval_s: Annotated[float, msgspec.Meta(ge=0.05, le=60)] = 1.5


class Doors(Strict, frozen=True):
    matrix: MatrixDoorConfig | None = None


STORE_SCHEMES = ("postgresql://", "postgres://")


def store_redacted(dsn: str) -> str:
    """A store's connection string without its password, for config.get, messages and logs."""
    try:
        parts = urlsplit(dsn)
        password = parts.password
    except ValueError:
        return "the configured PostgreSQL database"
    if password is None:
        return dsn
    return urlunsplit(parts._replace(netloc=parts.netloc.replace(f":{password}@", ":***@", 1)))


class Config(Strict, frozen=True):
    default_provider: Annotated[str, msgspec.Meta(title="Default provider")] | None = None
    fallback_providers: Annotated[list[str], msgspec.Meta(title="Fallback providers")] = []
    auxiliary_provider: Annotated[str, msgspec.Meta(title="Auxiliary provider")] | None = None
    # The backend exits after this long with no client, no turn running or queued and no
    # approval pending; front-ends start it again on demand.  0: never; fractions allowed.
    idle_exit_minutes: Annotated[float, msgspec.Meta(
        ge=0, title="Minutes idle before the backend exits (0 = never)")] = 30
    # The offline model's server (hundreds of MB) stops after this long with no request
    # and starts again, in about a second, on the next.  0: never; fractions allowed.
    local_model_idle_minutes: Annotated[float, msgspec.Meta(
        ge=0, title="Minutes idle before the offline model's server stops (0 = never)")] = 5
    allowed_origins: list[str] = []
    # Where sessions are kept: "" for DIR/state.db (SQLite), or a PostgreSQL connection
    # string (postgresql://USER@HOST:PORT/DB) that several backends may share.  Read at
    # start.  Keep its password out of this file: libpq reads PGPASSWORD or ~/.pgpass.
    store: Annotated[str, msgspec.Meta(title="Store (empty: this folder's SQLite file)")] = ""
    max_frame_bytes: Annotated[int, msgspec.Meta(ge=1024)] = DEFAULT_MAX_FRAME_BYTES
    providers: dict[str, ProviderConfig] = {}
    approvals: Approvals = Approvals()
    clarify: Clarify = Clarify()
    limits: Limits = Limits()
    lease: Lease = Lease()
    compression: Compression = Compression()
    review: Review = Review()
    sandbox: Sandbox = Sandbox()
    mcp: Mcp = Mcp()
    doors: Doors = Doors()
    hooks: dict[HookName, HookConfig] = {}

    def provider(self, name: str | None = None) -> tuple[str, ProviderConfig] | None:
        """The named provider, or the default one; None when nothing is configured."""
        name = name or self.default_provider
        if name is None and len(self.providers) == 1:
            name = next(iter(self.providers))
        if name is None or name not in self.providers:
            return None
        return name, self.providers[name]


# --- what config.get and config.set answer -----------------------------------------

KeyState = Literal["set", "unset"]


class ProviderView(ProviderConfig, forbid_unknown_fields=False, frozen=True):
    """A provider as `config.get` shows it: whether its key is set, never the key."""

    api_key: KeyState = "unset"


class ConfigView(Config, forbid_unknown_fields=False, frozen=True):
    """The effective config (defaults filled in) as `config.get` and `config.set` answer it.
    Unknown fields are ignored, so an older front-end reads a newer backend's answer.
    `active_provider` (an addition) is what turns use now, as `initialize` reports it: with
    nothing configured, possibly the small bundled offline model (`offline_default`)."""

    providers: dict[str, ProviderView] = {}  # type: ignore[assignment]
    active_provider: ProviderSummary | None = None


def validate(raw: dict[str, Any]) -> Config:
    """Raises ParamsError naming the first bad field (dotted path)."""
    # msgspec elides dict keys in error paths ("providers[...]"), so providers are
    # checked one by one first to name the provider in the field path.
    providers = raw.get("providers")
    if isinstance(providers, dict):
        for name, table in providers.items():
            _check_model_vision(table, f"providers.{name}.model_vision")
            try:
                convert(table, ProviderConfig)
            except ParamsError as exc:
                field = ".".join(f for f in ("providers", str(name), exc.field) if f)
                raise ParamsError(field, exc.message) from None
    mcp = raw.get("mcp")
    servers = mcp.get("servers") if isinstance(mcp, dict) else None
    if isinstance(servers, dict):
        for name, table in servers.items():
            field = f"mcp.servers.{name}"
            if not isinstance(name, str) or not _MCP_NAME.fullmatch(name):
                raise ParamsError(field, "a server's name is 1 to 32 letters, digits and '-', "
                                  "starting with a letter or digit (it becomes part of its "
                                  "tools' names: mcp__NAME__TOOL)")
            server = _mcp_server(table, field)
            if server is not None:
                check_mcp_server(server, field)
    hooks = raw.get("hooks")
    if isinstance(hooks, dict):
        for name, table in hooks.items():
            _check_hook(name, table, f"hooks.{name}")
    cfg = convert(raw, Config)
    if cfg.store and not cfg.store.startswith(STORE_SCHEMES):
        raise ParamsError("store", "a PostgreSQL connection string (postgresql://USER@HOST:PORT/"
                          "DATABASE), or empty for this folder's SQLite file")
    for i, name in enumerate(cfg.fallback_providers):
        if name not in cfg.providers:
            raise ParamsError(f"fallback_providers.{i}", f"no provider named {name!r}")
    for key in ("default_provider", "auxiliary_provider"):
        name = getattr(cfg, key)
        if name is not None and name not in cfg.providers:
            raise ParamsError(key, f"no provider named {name!r}; add [providers.{name}]")
    return cfg


def _check_model_vision(table: object, field: str) -> None:
    """`model_vision`'s values, named by model (msgspec's error paths elide dict keys)."""
    models = table.get("model_vision") if isinstance(table, dict) else None
    if not isinstance(models, dict):
        return
    for model, sees in models.items():
        if not isinstance(sees, bool):
            raise ParamsError(f"{field}.{model}", "true or false: whether this model sees images")


def _mcp_server(table: object, field: str) -> McpServerConfig | None:
    try:
        return convert(table, McpServerConfig)
    except ParamsError as exc:
        raise ParamsError(".".join(f for f in (field, exc.field) if f), exc.message) from None


def _check_hook(name: object, table: object, field: str) -> None:
    """A hook's table, its errors named by the hook (msgspec's paths elide dict keys)."""
    if not isinstance(name, str) or not _MCP_NAME.fullmatch(name):
        raise ParamsError(field, "a hook's name is 1 to 32 letters, digits and '-', starting "
                          "with a letter or digit")
    try:
        hook = convert(table, HookConfig)
    except ParamsError as exc:
        raise ParamsError(".".join(f for f in (field, exc.field) if f), exc.message) from None
    if not hook.command or not hook.command[0].strip():
        raise ParamsError(_sub(field, "command"), "give the program and its arguments: "
                          "command = [\"python3\", \"/path/to/hook.py\"]")
    if hook.tools and hook.event not in TOOL_EVENTS:
        raise ParamsError(_sub(field, "tools"), "only pre_tool and post_tool hooks apply to tools")


def _sub(field: str, key: str) -> str:
    return f"{field}.{key}" if field else key


def check_mcp_server(server: McpServerConfig, field: str) -> None:
    """What the schema cannot say: exactly one of `command` and `url`, an http(s) URL, no
    secret header given in clear as well.  Raises ParamsError naming the field."""
    if bool(server.command) == bool(server.url):
        raise ParamsError(field, "give either command = [program, args...] (a stdio server) or "
                          "url = \"https://...\" (a streamable HTTP server), not both or neither")
    if server.command and not server.command[0].strip():
        raise ParamsError(_sub(field, "command"), "the first item must name the program to run")
    if server.url and not server.url.startswith(("http://", "https://")):
        raise ParamsError(_sub(field, "url"), "must start with http:// or https://")
    clash = sorted(set(server.headers) & set(server.header_secrets))
    if clash:
        raise ParamsError(_sub(field, "headers"), f"{clash[0]!r} is also in header_secrets; keep a "
                          "key only in the keyring (secret.set) and name it in header_secrets")
    clash = sorted(set(server.env) & set(server.env_secrets))
    if clash:
        raise ParamsError(_sub(field, "env"), f"{clash[0]!r} is also in env_secrets; keep a key only "
                          "in the keyring (secret.set) and name it in env_secrets")


# --- fields for forms -----------------------------------------------------------------


@dataclass(frozen=True)
class Field:
    name: str
    label: str
    default: Any  # None when the field has none (or its default is None)


def fields(struct: type[msgspec.Struct]) -> dict[str, Field]:
    """A config table's fields, in declaration order, with their labels and defaults."""
    info = msgspec.inspect.type_info(struct)
    assert isinstance(info, msgspec.inspect.StructType)
    out: dict[str, Field] = {}
    for f in info.fields:
        default = None if f.default is msgspec.NODEFAULT else f.default
        out[f.name] = Field(f.name, _title(f.type) or f.name.replace("_", " ").capitalize(), default)
    return out


def _title(kind: msgspec.inspect.Type) -> str | None:
    if isinstance(kind, msgspec.inspect.Metadata):
        title = (kind.extra_json_schema or {}).get("title")
        return str(title) if title else _title(kind.type)
    if isinstance(kind, msgspec.inspect.UnionType):
        for member in kind.types:
            found = _title(member)
            if found:
                return found
    return None
