"""Chooses and builds the provider for a call from the current config.

Clients are cached per provider name and settings, so a connection pool
lives across turns but a config change takes effect on the next call.
"""

from __future__ import annotations

from pathlib import Path

from backend.config import Config, ProviderConfig, api_key
from backend.errors import ProviderError
from backend.providers.base import ChatProvider
from backend.providers.openai import OpenAIChat


class Providers:
    def __init__(self) -> None:
        self._cache: dict[str, tuple[ProviderConfig, str | None, ChatProvider]] = {}

    def primary(self, config: Config, config_path: Path) -> tuple[ChatProvider, ProviderConfig]:
        """The default provider and its settings; raises ProviderError("not_configured")."""
        chosen = config.provider()
        if chosen is None:
            raise ProviderError(
                "not_configured",
                f"no model provider is configured: add a [providers.NAME] table and "
                f"default_provider to {config_path} (see the README), or use config.set",
            )
        return self.get(*chosen), chosen[1]

    def get(self, name: str, cfg: ProviderConfig) -> ChatProvider:
        key = api_key(cfg)
        cached = self._cache.get(name)
        if cached and cached[0] == cfg and cached[1] == key:
            return cached[2]
        if cfg.kind != "openai":
            raise ProviderError(
                "not_configured",
                f"provider {name!r} has kind {cfg.kind!r}, which this backend cannot call yet; "
                "use kind = \"openai\" with an OpenAI-compatible base_url",
            )
        provider = OpenAIChat(name, cfg.base_url, cfg.model, key, cfg.request_timeout_s)
        self._cache[name] = (cfg, key, provider)
        return provider

    async def aclose(self) -> None:
        for _, _, provider in self._cache.values():
            await provider.aclose()
        self._cache.clear()
