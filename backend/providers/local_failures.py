"""What a person is told when the offline model's server stops: which signal or exit, what
it means, and what to do; never "could not reach the provider's server" for a server that
died (issue 31).

Pure: a returncode and what the server was doing go in, a `ProviderError` of kind
`crashed` comes out (not retried by the turn: `LocalChat` already started the server
once more, and a crash is not a network blip).
"""

from __future__ import annotations

import signal
import sys
from typing import Literal

from backend.errors import ProviderError
from backend.providers.errors import SETTINGS

Phase = Literal["start", "check", "answer"]

_DOING: dict[Phase, str] = {
    "start": "while starting",
    "check": "during its first test answer",
    "answer": "in the middle of an answer",
}
# What each signal means for a server that received it, in words.
_SIGNALS: dict[int, str] = {
    signal.SIGILL: "an illegal instruction (SIGILL): it was built for a processor feature this "
                   "machine does not allow",
    signal.SIGSEGV: "a memory fault (SIGSEGV)",
    signal.SIGBUS: "a memory fault (SIGBUS)",
    signal.SIGABRT: "an internal error (SIGABRT)",
    signal.SIGFPE: "an arithmetic fault (SIGFPE)",
    signal.SIGKILL: "SIGKILL: something killed it, most often the system running out of memory",
}


def rebuild_hint(portable: bool, baseline: bool) -> str:
    """What to do about a server that cannot run on this processor; `baseline`: it already
    ran the portable build's plain x86-64 library."""
    if getattr(sys, "frozen", False):
        return f"Add a provider in {SETTINGS} to keep working."
    if portable and not baseline:
        return ("From now on it uses its plain x86-64 build, which runs on any processor: send "
                "your message again.")
    if portable:
        return ("Report this with its log (logs/llama-server.log in the data folder), and add "
                f"a provider in {SETTINGS} to keep working.")
    return ("Rebuild it for any processor with scripts/bootstrap local (once, about ten "
            f"minutes), or add a provider in {SETTINGS}.")


def crashed(name: str, returncode: int, phase: Phase, log_tail: str, *,
            portable: bool, baseline: bool = False) -> ProviderError:
    """The error for a server that ended with `returncode` (negative: killed by a signal);
    `portable` and `baseline` as for `rebuild_hint`."""
    doing = _DOING[phase]
    if returncode < 0:
        number = -returncode
        try:
            signame = signal.Signals(number).name
        except ValueError:
            signame = f"signal {number}"
        meaning = _SIGNALS.get(number, signame)
        words = f"The offline model stopped {doing} with {meaning}. "
        if number == signal.SIGILL:
            words += rebuild_hint(portable, baseline)
        elif number == signal.SIGKILL:
            words += f"Close other programs and try again, or add a provider in {SETTINGS}."
        else:
            words += ("Its log (logs/llama-server.log in the data folder) may say why. Try again, "
                      f"or add a provider in {SETTINGS}.")
        how = f"was killed by {signame} {doing}"
    else:
        words = (f"The offline model's server exited {doing} (status {returncode}). Its log "
                 f"(logs/llama-server.log in the data folder) says why; add a provider in "
                 f"{SETTINGS} to keep working.")
        how = f"exited {doing} (status {returncode})"
    return ProviderError("crashed", f"{name}: the offline model's server {how}\n{log_tail}",
                         words=words)
