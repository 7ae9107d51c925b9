"""This process's count of what happened between backends sharing one store.

`takeovers`: turns of another holder (a dead backend's, or one whose lease ran out)
that this backend ended `unknown` and whose session it freed.  `fenced_writes`: writes
of a turn of this backend refused because its lease no longer named it (it was paused
past its lease and taken over).  backend.stats reports both.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class FleetCounts:
    takeovers: int = 0
    fenced_writes: int = 0


COUNTS = FleetCounts()
