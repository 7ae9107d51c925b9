"""Providers as the settings screens see them: `provider.test` (a saved provider, or a form's
values not saved) and which provider turns will use, in the effective config; and as a
session's model box sees them: `provider.list`, the providers a session can choose."""

from __future__ import annotations

import msgspec

from backend.config import KEY_STAYS, ConfigFile, api_key, same_destination
from backend.errors import InvalidParams, ProviderError
from backend.providers.base import ChatProvider
from backend.providers.errors import told
from backend.providers.probe import PROBE_TIMEOUT_S, probe
from backend.providers.registry import ConfiguredProvider, Providers, summary
from backend.secrets import Secrets, checked
from shared import protocol as p
from shared.config import ConfigView, sees_images


class ProviderService:
    def __init__(self, config: ConfigFile, secrets: Secrets, providers: Providers) -> None:
        self.config = config
        self.secrets = secrets
        self.providers = providers

    def summary(self) -> p.ProviderSummary:
        """What turns will use, so a front-end can say so (and warn about the tiny model)."""
        return summary(self.providers, self.config.config)

    def listing(self) -> p.ProviderListResult:
        """The providers a session can start its turns on (provider.list, and what
        session.update's `provider` accepts): the default first, then the others in
        config's order; the offline model alone when nothing is configured."""
        config = self.config.config
        chosen = self.providers.default(config)
        default = chosen[0] if chosen is not None else None
        named = dict(config.providers)
        if chosen is not None and chosen[0] not in named:  # the bundled offline model
            named[chosen[0]] = chosen[1]
        order = sorted(named, key=lambda n: n != default)  # stable: config's order after it
        return p.ProviderListResult(providers=[
            p.ProviderChoice(name=n, model=named[n].model, kind=named[n].kind, default=n == default,
                             vision=sees_images(named[n]))
            for n in order])

    def effective(self) -> ConfigView:
        """The effective config, with what turns use now (the offline model, perhaps)."""
        view = self.config.effective(self.secrets.get)
        return msgspec.structs.replace(view, active_provider=self.summary())

    async def test(self, params: p.ProviderTestParams) -> p.ProviderTestResult:
        """One tiny request, timed; a provider's failure is the answer, not an error."""
        self._check(params)
        inline_key = checked(params.api_key, "api_key") if params.api_key is not None else None
        chosen = self._link(params, inline_key)
        if isinstance(chosen, p.ProviderTestResult):
            return chosen
        link, key, trial = chosen
        try:
            result = await probe(link.provider, min(PROBE_TIMEOUT_S, link.cfg.request_timeout_s),
                                 key)
        finally:
            if trial is not None:
                await trial.aclose()
        error = None
        if result.error_kind is not None:
            error = p.ProviderFailure(kind=result.error_kind, message=result.error_message or "",
                                      detail=result.error_detail)
        return p.ProviderTestResult(ok=result.ok, provider=link.name, model=link.provider.model,
                                    latency_ms=result.latency_ms, error=error)

    def _check(self, params: p.ProviderTestParams) -> None:
        config = self.config.config
        inline = params.provider_config is not None or params.api_key is not None
        if inline and params.provider is None:
            raise InvalidParams("provider", "provider_config and api_key need provider: the name "
                                "of the provider they are for (saved or not)")
        if params.provider is not None and params.provider not in config.providers \
                and params.provider_config is None:
            names = ", ".join(sorted(config.providers)) or "none"
            raise InvalidParams(
                "provider", f"no provider named {params.provider!r} in config (configured: {names})"
            )

    def _link(
        self, params: p.ProviderTestParams, inline_key: str | None
    ) -> tuple[ConfiguredProvider, str | None, ChatProvider | None] | p.ProviderTestResult:
        """What to call, with which key, and the throwaway client to close after (a form's);
        or the test's answer already, when nothing can be called."""
        config = self.config.config
        name, model = params.provider or "", ""
        try:
            if params.provider_config is not None or params.api_key is not None:
                # A settings form's values, not saved: a client of their own, never cached.
                cfg = (self.config.provider_preview(name, params.provider_config)
                       if params.provider_config is not None else config.providers[name])
                model = cfg.model
                key = inline_key or api_key(cfg, self.secrets.get)
                if inline_key is None and key is not None \
                        and not same_destination(config.providers.get(name), cfg):
                    # A stored key goes only where it was saved to go: a form's other URL,
                    # kind or key source (an admin token's, say) gets no stored key.
                    failure = p.ProviderFailure(kind="auth", message=KEY_STAYS, detail=(
                        f"{name}: the form changes where the key is sent (kind, base_url, "
                        "api_key_env or api_key_secret); the saved key was not used"))
                    return p.ProviderTestResult(ok=False, provider=name, model=model,
                                                latency_ms=0, error=failure)
                trial = self.providers.trial(name, cfg, key)
                return ConfiguredProvider(name, cfg, trial), key, trial
            if params.provider is None:
                link = self.providers.primary(config, self.config.path)
                return link, api_key(link.cfg, self.secrets.get), None
            cfg = config.providers[params.provider]
            model = cfg.model
            link = ConfiguredProvider(name, cfg, self.providers.get(name, cfg))
            return link, api_key(cfg, self.secrets.get), None
        except ProviderError as exc:  # none configured, or a kind this backend cannot call
            failure = p.ProviderFailure(kind=exc.kind, message=told(exc), detail=exc.message)
            return p.ProviderTestResult(ok=False, provider=name, model=model, latency_ms=0,
                                        error=failure)
