"""The one loader of DIR/config.toml, its atomic updates, and provider keys.

The schema itself (every setting, its bounds and defaults) is `shared/config.py`."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import tomli_w

from backend.errors import ConfigError, InvalidParams
from shared.codec import ParamsError, convert
from shared.config import (
    PROVIDER_KINDS,
    Config,
    ConfigView,
    McpServerConfig,
    ProviderConfig,
    ProviderView,
    check_mcp_server,
    store_redacted,
    validate,
)


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

    def provider_preview(self, name: str, table: dict[str, Any]) -> ProviderConfig:
        """The provider `table` would make as `config.set {patch: {providers: {name: table}}}`
        (merged over the saved table of `name`, if any; None deletes a key), validated,
        without applying it.  Errors name `provider_config.FIELD`."""
        saved = self.raw.get("providers", {}).get(name)
        merged = _merge(saved if isinstance(saved, dict) else {}, table)
        try:
            return convert(merged, ProviderConfig)
        except ParamsError as exc:
            field = f"provider_config.{exc.field}" if exc.field else "provider_config"
            raise InvalidParams(field, exc.message) from None

    def mcp_server_preview(self, name: str, table: dict[str, Any]) -> McpServerConfig:
        """The server `table` would make as `config.set {patch: {mcp: {servers: {name: table}}}}`
        (merged over the saved table of `name`, if any), validated, without applying it.
        Errors name `server_config.FIELD`."""
        servers = self.raw.get("mcp", {}).get("servers", {})
        saved = servers.get(name) if isinstance(servers, dict) else None
        merged = _merge(saved if isinstance(saved, dict) else {}, table)
        try:
            server = convert(merged, McpServerConfig)
            check_mcp_server(server, "")
        except ParamsError as exc:
            field = f"server_config.{exc.field}" if exc.field else "server_config"
            raise InvalidParams(field, exc.message) from None
        return server

    def effective(self, secret: Callable[[str], str | None]) -> ConfigView:
        """The config with defaults filled in; keys shown only as "set"/"unset"."""
        providers = {
            name: ProviderView(**msgspec.structs.asdict(p),
                               api_key="set" if api_key(p, secret) else "unset")
            for name, p in self.config.providers.items()
        }
        return msgspec.structs.replace(ConfigView(**msgspec.structs.asdict(self.config)),
                                       providers=providers,
                                       store=store_redacted(self.config.store))


def api_key(p: ProviderConfig, secret: Callable[[str], str | None]) -> str | None:
    """The provider's key: its environment variable, else the named stored secret."""
    if p.api_key_env and os.environ.get(p.api_key_env):
        return os.environ[p.api_key_env]
    if p.api_key_secret:
        return secret(p.api_key_secret)
    return None


KEY_STAYS = ("The saved key is sent only to the address it was saved for. Paste the key in the "
             "form to test it with another address, or save the provider first.")


def key_destination(kind: Any, base_url: Any, key_env: Any, key_secret: Any) -> tuple[str, ...]:
    """Where a provider's key goes and which key it is: its kind, its base URL (the kind's
    default when unset, without a trailing slash) and where the key is read from."""
    info = next((v for k, v in PROVIDER_KINDS.items() if k == kind), None)
    url = base_url if isinstance(base_url, str) and base_url else (info.base_url if info else "")
    return (str(kind), str(url or "").rstrip("/"), str(key_env or ""), str(key_secret or ""))


def same_destination(saved: ProviderConfig | None, tried: ProviderConfig) -> bool:
    """Whether `tried` sends its key where the saved provider `saved` sends it."""
    if saved is None:
        return False
    return key_destination(saved.kind, saved.base_url, saved.api_key_env, saved.api_key_secret) \
        == key_destination(tried.kind, tried.base_url, tried.api_key_env, tried.api_key_secret)


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


