"""Typed configuration: defaults, the one loader of DIR/config.toml, and atomic updates."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec
import tomli_w

from backend.errors import ConfigError, InvalidParams
from shared.codec import ParamsError, convert
from shared.protocol import ModelName

DEFAULT_MAX_FRAME_BYTES = 4 * 1024 * 1024
DEFAULT_CONTEXT_WINDOW = 128_000

Positive = Annotated[int, msgspec.Meta(ge=1)]
NonNegative = Annotated[int, msgspec.Meta(ge=0)]
Price = Annotated[float, msgspec.Meta(ge=0)]
Fraction = Annotated[float, msgspec.Meta(gt=0, le=1)]


class Strict(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    pass


class ProviderConfig(Strict, kw_only=True, frozen=True):
    model: ModelName  # bounded: a session created without a model takes this one
    kind: Literal["openai", "anthropic", "local"] = "openai"
    base_url: str | None = None  # None: the kind's public API (OpenAI's, Anthropic's)
    context_window: Positive = DEFAULT_CONTEXT_WINDOW
    api_key_env: str | None = None
    api_key_secret: str | None = None
    input_usd_per_mtok: Price = 0.0
    output_usd_per_mtok: Price = 0.0
    cached_input_usd_per_mtok: Price | None = None  # cache reads; None: the input price
    request_timeout_s: Annotated[float, msgspec.Meta(gt=0)] = 600.0
    max_output_tokens: Positive = 4096  # the answer's budget, lowered to fit the window
    # OpenAI-compatible only: the field that carries the answer's budget.  None sends none
    # (OpenAI's newer models refuse `max_tokens`; many local servers know only it).
    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] | None = None
    model_path: str | None = None  # kind "local": a GGUF file (default: the bundled model)
    tools: bool = True  # offer the built-in tools (a tiny local model cannot use them)


class Approvals(Strict, frozen=True):
    mode: Literal["ask", "smart", "off"] = "smart"
    timeout_s: Annotated[float, msgspec.Meta(gt=0)] = 300


Seconds = Annotated[float, msgspec.Meta(gt=0)]


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


class Lease(Strict, frozen=True):
    """The per-session turn lease (turn/lease.py)."""

    ttl_s: Seconds = 300
    refresh_s: Seconds = 60
    wait_s: Seconds = 1800


class Compression(Strict, frozen=True):
    enabled: bool = True  # false: never compress automatically (session.compress still does)
    threshold: Fraction = 0.50
    protect_first_n: NonNegative = 3
    tail_tokens_min: Positive = 10_000
    tail_tokens_max: Positive = 25_000
    rotate: bool = False


EnvName = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")]


class Sandbox(Strict, frozen=True):
    """How terminal commands are sandboxed (backend/tools/sandbox.py)."""

    enabled: bool = True  # false: no sandbox; `smart` then asks for every command not plainly read-only
    network: bool = False  # true: commands reach the network without asking
    env: list[EnvName] = []  # more variables commands may see (never a provider key's)


class Config(Strict, frozen=True):
    default_provider: str | None = None
    fallback_providers: list[str] = []
    auxiliary_provider: str | None = None
    idle_exit_minutes: Annotated[float, msgspec.Meta(ge=0)] = 0  # fractions allowed
    allowed_origins: list[str] = []
    max_frame_bytes: Annotated[int, msgspec.Meta(ge=1024)] = DEFAULT_MAX_FRAME_BYTES
    providers: dict[str, ProviderConfig] = {}
    approvals: Approvals = Approvals()
    limits: Limits = Limits()
    lease: Lease = Lease()
    compression: Compression = Compression()
    sandbox: Sandbox = Sandbox()

    def provider(self, name: str | None = None) -> tuple[str, ProviderConfig] | None:
        """The named provider, or the default one; None when nothing is configured."""
        name = name or self.default_provider
        if name is None and len(self.providers) == 1:
            name = next(iter(self.providers))
        if name is None or name not in self.providers:
            return None
        return name, self.providers[name]


def validate(raw: dict[str, Any]) -> Config:
    """Raises ParamsError naming the first bad field (dotted path)."""
    # msgspec elides dict keys in error paths ("providers[...]"), so providers are
    # checked one by one first to name the provider in the field path.
    providers = raw.get("providers")
    if isinstance(providers, dict):
        for name, table in providers.items():
            try:
                convert(table, ProviderConfig)
            except ParamsError as exc:
                field = ".".join(f for f in ("providers", str(name), exc.field) if f)
                raise ParamsError(field, exc.message) from None
    cfg = convert(raw, Config)
    for i, name in enumerate(cfg.fallback_providers):
        if name not in cfg.providers:
            raise ParamsError(f"fallback_providers.{i}", f"no provider named {name!r}")
    for key in ("default_provider", "auxiliary_provider"):
        name = getattr(cfg, key)
        if name is not None and name not in cfg.providers:
            raise ParamsError(key, f"no provider named {name!r}; add [providers.{name}]")
    return cfg


class ConfigFile:
    """DIR/config.toml: loaded at start, rewritten atomically by `patch`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.raw: dict[str, Any] = {}
        self.config = Config()

    def load(self) -> Config:
        if self.path.exists():
            try:
                self.raw = tomllib.loads(self.path.read_text())
            except tomllib.TOMLDecodeError as exc:
                raise ConfigError(f"{self.path} is not valid TOML: {exc}") from None
        try:
            self.config = validate(self.raw)
        except ParamsError as exc:
            raise ConfigError(f"{self.path}: field {exc.field!r}: {exc.message}") from None
        return self.config

    def preview(self, patch: dict[str, Any]) -> Config:
        """The config `patch` would make, validated, without applying it."""
        return self._merged(patch)[1]

    def patch(self, patch: dict[str, Any]) -> Config:
        """Merges `patch` (a value of None deletes a key), validates, writes, applies."""
        merged, cfg = self._merged(patch)
        write_atomic(self.path, tomli_w.dumps(merged).encode())
        self.raw, self.config = merged, cfg
        return cfg

    def _merged(self, patch: dict[str, Any]) -> tuple[dict[str, Any], Config]:
        merged = _merge(self.raw, patch)
        try:
            return merged, validate(merged)
        except ParamsError as exc:
            raise InvalidParams(f"patch.{exc.field}" if exc.field else "patch", exc.message) from None

    def effective(self, secret: Callable[[str], str | None]) -> dict[str, Any]:
        """The config with defaults filled in; keys shown only as "set"/"unset"."""
        out: dict[str, Any] = msgspec.to_builtins(self.config)
        for name, p in self.config.providers.items():
            out["providers"][name]["api_key"] = "set" if api_key(p, secret) else "unset"
        return out


def api_key(p: ProviderConfig, secret: Callable[[str], str | None]) -> str | None:
    """The provider's key: its environment variable, else the named stored secret."""
    if p.api_key_env and os.environ.get(p.api_key_env):
        return os.environ[p.api_key_env]
    if p.api_key_secret:
        return secret(p.api_key_secret)
    return None


def _merge(base: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def write_atomic(path: Path, data: bytes, mode: int = 0o600) -> None:
    """Write to a temporary file, fsync, then rename over: readers see old or new, never half."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


