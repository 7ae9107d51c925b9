"""The operator's methods: config.set, secret.set, provider.test and provider.list, and tokens."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from shared.literals import Scope
from shared.protocol.base import Id, Params, Wire


class ConfigSetParams(Params):
    patch: dict[str, Any]


SecretName = Annotated[str, msgspec.Meta(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")]


class SecretSetParams(Params):
    """`value` is trimmed of surrounding whitespace, then must be 1 byte to 8 KiB (UTF-8)."""

    name: SecretName
    value: str


class ProviderTestParams(Params):
    """`provider`: a [providers.NAME] of config; default: what turns use first.

    Additions, to test a settings form before it is saved: `provider_config` is a provider
    table as in `config.set {patch: {providers: {NAME: ...}}}` (merged over NAME's saved table
    when there is one, null deleting a key; validated the same way, errors naming
    `provider_config.FIELD`), and NAME may then be a provider not saved yet.  `api_key` is a key
    used for this one request only: never stored, logged or echoed (a secret param, like
    `secret.set`'s value).  Either needs `provider`.  Nothing is saved."""

    provider: Id | None = None
    provider_config: dict[str, Any] | None = None
    api_key: str | None = None


MAX_TOKEN_LABEL = 100
MAX_TOKEN_LIFETIME_S = 10 * 365 * 24 * 3600  # ten years; longer: leave expires_in_s out

Scopes = Annotated[list[Scope], msgspec.Meta(min_length=1)]


class TokenCreateParams(Params):
    """`scopes`: a non-empty subset of the four (repeats are ignored); `label`: a name for
    people, 1-100 characters, trimmed of surrounding whitespace.  `expires_in_s` (an
    addition): the token stops working that many seconds from now (1 to ten years); left
    out, it works until revoked."""

    scopes: Scopes
    label: Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_TOKEN_LABEL)]
    expires_in_s: Annotated[int, msgspec.Meta(ge=1, le=MAX_TOKEN_LIFETIME_S)] | None = None


class TokenIdParams(Params):
    token_id: str


class TokenUpdateParams(Params):
    """`scopes`: the token's scopes from now on, a non-empty subset of the four (repeats are
    ignored).  Its open connections close (1008), on every backend: they reconnect with
    these."""

    token_id: str
    scopes: Scopes


class SecretSetResult(Wire):
    """`warning` (an addition) is present when the key went to the plain-text file."""

    stored: Literal["keyring", "file"]
    warning: str | None = None


class ProviderFailure(Wire):
    kind: str  # a ProviderError kind (providers/errors.py), or "timeout"
    message: str  # for a person: what happened and what to do
    detail: str | None = None  # addition: the raw detail (provider, HTTP status, its words)


class ProviderTestResult(Wire):
    """`provider` (an addition) names the provider tested; `error` is present unless ok."""

    ok: bool
    provider: str
    model: str
    latency_ms: int
    error: ProviderFailure | None = None


class ProviderChoice(Wire):
    """A configured provider a session can use: its name, its model and kind; `default`: the
    one a session without a provider of its own starts on; `vision` (an addition): whether
    its model sees images (config `vision`; a model that does not gets a note instead)."""

    name: str
    model: str
    kind: str
    default: bool = False
    vision: bool = True


class ProviderListResult(Wire):
    """The default provider first, then the others in config's order."""

    providers: list[ProviderChoice]


class TokenCreateResult(Wire):
    """`token` is the secret: it is in this result and nowhere else (only its hash is kept).
    `expires_at` (an addition): when it stops working; absent when it never expires."""

    token_id: str
    token: str
    scopes: list[Scope]
    label: str
    expires_at: str | None = None


class TokenInfo(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One minted token as `token.list` shows it: never the secret or its hash.
    `expires_at` (an addition) is absent when it never expires; a token past it is expired
    (it names nobody), whatever `revoked` says."""

    token_id: str
    label: str
    scopes: list[Scope]
    created_at: str
    revoked: bool
    revoked_at: str | None
    expires_at: str | None = None


class TokensResult(Wire):
    tokens: list[TokenInfo]


class TokenResult(Wire):
    """One token as it is now (`token.update`): `token` is its TokenInfo, never the secret."""

    token: TokenInfo
