"""The preflight gate before every model call: a pass-through until compression lands.

It is a stage of its own so that compression (and a fallback provider's
smaller window) has one place to measure the request and decide.
"""

from __future__ import annotations

from backend.providers.base import ChatRequest
from backend.turn.stages import Action


def preflight(request: ChatRequest) -> Action:
    """Continue as assembled; the compression issue makes this measure and compress."""
    return Action.PROCEED
