"""What a stage of the turn loop tells the loop to do next."""

from __future__ import annotations

from enum import Enum


class Action(Enum):
    PROCEED = "proceed"    # go on to the next stage of this iteration
    CONTINUE = "continue"  # start the next iteration (a tool round finished, a retry)
    BREAK = "break"        # leave the loop and finalize
