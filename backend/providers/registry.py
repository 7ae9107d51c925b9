"""Chooses and builds the providers for a turn from the current config.

A turn works down a chain: the session's own provider (session.update's `provider`) or
else the default provider, then each of `fallback_providers` in order, none twice.
Clients are cached per provider name and settings (and key), so a connection pool lives
across turns but a config change or a new key takes effect on the next call.  Adding a
provider kind is one module and one line in `_build`.

A kind's module (and httpx under it) is imported when a provider of that kind
is first built, not when the backend starts; `warm` loads the default one's in
a thread after READY, so the first call does not wait for it either.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from backend.config import api_key
from backend.errors import ProviderError
from backend.providers.base import ChatProvider
from backend.providers.errors import SETTINGS
from backend.providers.local import (
    LOCAL_DEFAULT,
    LOCAL_NAME,
    local_available,
    sized,
)
from backend.secrets import Secrets
from shared.config import PROVIDER_KINDS, Config, ProviderConfig
from shared.protocol import ProviderSummary


@dataclass(frozen=True)
class ConfiguredProvider:
    """One provider of a turn's chain: its config name, its settings and its client."""

    name: str
    cfg: ProviderConfig
    provider: ChatProvider


log = logging.getLogger("providers")

WIRE_MODULES: dict[str, str] = {  # the module each kind's calls go through (`warm`)
    "openai": "backend.providers.openai",
    "anthropic": "backend.providers.anthropic",
    "local": "backend.providers.openai",  # its llama.cpp server (on 127.0.0.1) speaks OpenAI's
}

class Providers:
    def __init__(self, secrets: Secrets, data_dir: Path,
                 local_idle_minutes: Callable[[], float] = lambda: 0.0) -> None:
        self.secrets = secrets
        self.data_dir = data_dir
        self.local_idle_minutes = local_idle_minutes  # read live: config.set applies
        self._cache: dict[str, tuple[ProviderConfig, str | None, ChatProvider]] = {}
        self._retired: list[ChatProvider] = []

    def chain(self, config: Config, config_path: Path,
              first: str | None = None) -> list[ConfiguredProvider]:
        """The session's own provider (`first`, a [providers.NAME]) or else the default one,
        then the fallbacks not already in the chain, built; raises ProviderError
        ("not_configured") when there is no provider at all, or `first` is not configured
        (any more)."""
        name, cfg = self.starting(config, config_path, first)
        if name == LOCAL_NAME and cfg is LOCAL_DEFAULT:
            # Nothing configured: the bundled offline model, so a fresh install answers.
            return [ConfiguredProvider(LOCAL_NAME, LOCAL_DEFAULT, self.get(LOCAL_NAME, LOCAL_DEFAULT))]
        names = list(dict.fromkeys([name, *config.fallback_providers]))
        chain = []
        for i, n in enumerate(names):
            cfg = _effective(config.providers[n])
            try:
                chain.append(ConfiguredProvider(n, cfg, self.get(n, cfg)))
            except ProviderError as exc:
                if i == 0:
                    raise
                # A fallback that cannot even be built must not take the first down with it.
                log.warning("fallback provider %r is unusable: %s", n, exc.message)
        return chain

    def starting(self, config: Config, config_path: Path,
                 first: str | None = None) -> tuple[str, ProviderConfig]:
        """The provider a chain starts on, not built: `first` when configured, else the
        default; raises ProviderError ("not_configured") as `chain` does."""
        if first is not None and first in config.providers:
            return first, config.providers[first]
        chosen = self.default(config)
        if first is not None and (chosen is None or chosen[0] != first):
            raise ProviderError(
                "not_configured",
                f"this session's provider {first!r} is not configured (no [providers.{first}] "
                f"in {config_path}); choose another with session.update's provider, or add it",
                words=f"This session uses the provider “{first}”, which is not set up any more. "
                      "Choose another provider for it in the model box above the conversation, "
                      f"or add “{first}” again in {SETTINGS}.",
            )
        if chosen is None:
            raise ProviderError(
                "not_configured",
                f"no model provider is configured: add one in the app (File → Settings → "
                f"Add…), or a [providers.NAME] table and default_provider in {config_path} "
                f"(see the README), or use config.set",
            )
        return chosen

    def default(self, config: Config) -> tuple[str, ProviderConfig] | None:
        """The provider turns start on, without building it: the configured default, or the
        bundled offline model when nothing is configured and it is installed."""
        chosen = config.provider()
        if chosen is None and not config.providers and local_available():
            return LOCAL_NAME, LOCAL_DEFAULT
        return chosen

    def primary(self, config: Config, config_path: Path,
                first: str | None = None) -> ConfiguredProvider:
        """The first link of `chain`: what a turn would call first (provider.test, and
        session.compress with the session's provider as `first`)."""
        return self.chain(config, config_path, first)[0]

    def get(self, name: str, cfg: ProviderConfig) -> ChatProvider:
        key = api_key(cfg, self.secrets.get)
        cached = self._cache.get(name)
        if cached and cached[0] == cfg and cached[1] == key:
            return cached[2]
        provider = self._build(name, cfg, key)
        self._cache[name] = (cfg, key, provider)
        if cached is not None:
            # Settings or key changed: the old client (a local server, a pool) goes, once idle.
            self._retired.append(cached[2])
        return provider

    def trial(self, name: str, cfg: ProviderConfig, key: str | None) -> ChatProvider:
        """A client for settings that are not saved (provider.test of a settings form), with
        `key`: never cached, so the clients and keys turns use are untouched.  The caller
        closes it (`aclose`)."""
        return self._build(name, _effective(cfg), key)

    def _build(self, name: str, cfg: ProviderConfig, key: str | None) -> ChatProvider:
        base_url = _base_url(cfg)
        if cfg.kind == "openai":
            from backend.providers.openai import OpenAIChat

            return OpenAIChat(name, base_url, cfg.model, key, cfg.request_timeout_s,
                              cfg.max_tokens_field)
        if cfg.kind == "anthropic":
            from backend.providers.anthropic import AnthropicChat

            return AnthropicChat(name, base_url, cfg.model, key, cfg.request_timeout_s)
        if cfg.kind == "local":
            from backend.providers.local import LocalChat

            return LocalChat(name, cfg, self.data_dir, self.local_idle_minutes)
        raise ProviderError(
            "not_configured",
            f"provider {name!r} has kind {cfg.kind!r}, which this backend cannot call yet; "
            "use kind = \"openai\" with an OpenAI-compatible base_url",
            words=f"Turnkey cannot call providers of the kind “{cfg.kind}”. Choose another kind "
                  f"for “{name}” in {SETTINGS}.",
        )

    def warm(self, config: Config) -> None:
        """Imports the default provider's module and the HTTP stack under it, and builds the
        TLS context its URL needs: what its first call would otherwise do on the way (~0.1 s
        on 2 cores).  Blocking, and it reads no key: for a thread at start-up."""
        chosen = self.default(config)
        if chosen is None or chosen[1].kind not in WIRE_MODULES:
            return
        cfg = chosen[1]
        importlib.import_module(WIRE_MODULES[cfg.kind])
        from backend.providers import transport

        transport.warm("http://127.0.0.1" if cfg.kind == "local" else _base_url(cfg))

    async def aclose(self) -> None:
        for provider in [*self._retired, *(c[2] for c in self._cache.values())]:
            await provider.aclose()
        self._cache.clear()
        self._retired.clear()


def _base_url(cfg: ProviderConfig) -> str:
    return cfg.base_url or PROVIDER_KINDS[cfg.kind].base_url or ""


def _effective(cfg: ProviderConfig) -> ProviderConfig:
    """Settings as the turn should see them (a local model's real window)."""
    return sized(cfg) if cfg.kind == "local" else cfg


def summary(providers: Providers, config: Config) -> ProviderSummary:
    """What turns will use, so a front-end can say so (and warn about the tiny model):
    `initialize`'s `capabilities.provider`, before the backend's build and after it."""
    chosen = providers.default(config)
    if chosen is None:
        return ProviderSummary(configured=False)
    name, cfg = chosen
    offline = name == LOCAL_NAME and cfg is LOCAL_DEFAULT
    return ProviderSummary(configured=not offline, name=name, model=cfg.model, kind=cfg.kind,
                           offline_default=offline)
