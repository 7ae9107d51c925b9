"""How long to wait before retrying a failed model call (pure; the call stage waits).

A provider that says how long (`Retry-After`, capped at 600 s) is believed;
otherwise the wait grows exponentially with jitter, so many clients that
failed together do not come back together.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from backend.errors import ProviderError
from backend.providers.errors import RETRY_AFTER_CAP_S

MAX_ATTEMPTS = 3  # per call and provider, the first one included
BASE_DELAY_S = 1.0
MAX_BACKOFF_S = 30.0


def delay_for(err: ProviderError, attempt: int, rand: Callable[[], float] = random.random) -> float:
    """The wait before attempt `attempt + 1`, after attempt `attempt` failed with `err`."""
    if err.retry_after is not None:
        return min(max(err.retry_after, 0.0), RETRY_AFTER_CAP_S)
    ceiling = min(BASE_DELAY_S * 2 ** (attempt - 1), MAX_BACKOFF_S)
    return round(float(ceiling * (0.5 + rand() / 2)), 3)  # "equal jitter": half fixed, half random
