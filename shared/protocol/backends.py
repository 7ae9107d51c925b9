"""backend.list: the backend processes that share the answering backend's store."""

from __future__ import annotations

from typing import Literal

import msgspec

from shared.literals import BackendState
from shared.protocol.base import Params, Wire

StoreKind = Literal["sqlite", "postgresql"]
RECENT_S = 24 * 3600  # backends gone for longer than this are listed only with `all`


class BackendListParams(Params):
    """`all`: also the backends that stopped or died more than a day ago (the store forgets
    them after a week)."""

    all: bool = False


class BackendSummary(msgspec.Struct, kw_only=True):
    """One backend process on the store, as the answering backend sees it now."""

    epoch: int  # unique per start: what leases and admissions name
    host: str
    pid: int  # on `host`
    started_at: str  # RFC 3339 UTC
    heartbeat_at: str  # its latest heartbeat, RFC 3339 UTC
    heartbeat_age_s: float  # seconds since then, on the answering backend's clock (>= 0)
    state: BackendState
    dead_at: str | None  # when a peer declared it dead (state "dead"), else null
    sessions_held: int  # sessions whose turn lease it holds now (a turn running there)
    this: bool  # the backend that answered


class BackendListResult(Wire):
    """`backends`: live ones first, then by `started_at`.  `store`: "sqlite" (one backend,
    this one) or "postgresql".  `dead_after_s`: how long a backend may be silent before it
    counts as dead (`[lease] dead_after_s` of the answering backend)."""

    store: StoreKind
    dead_after_s: float
    backends: list[BackendSummary]
