"""Terminal control sequences taken out of command output, which arrives in pieces.

A command's output may hold ANSI escape sequences: colours (SGR), cursor
moves, erasing, window titles (OSC), device strings (DCS).  None of them
should ever be shown as text.  `AnsiStripper` removes them from a stream
whose pieces may cut a sequence anywhere; it keeps only its state between
pieces, never text, so it is bounded whatever it is fed.  `\\n`, `\\r`, `\\t`
and `\\b` pass through (a line model gives them meaning: `live_tail.py`);
other control characters are dropped.  With `keep` a terminal may still be
given some sequences as they came (the CLI keeps colours).
"""

from __future__ import annotations

import re
from enum import Enum

ESC = "\x1b"
# Runs of text with nothing to strip: C0 controls but \b \t \n \r, DEL, and C1 controls.
_PLAIN = re.compile(r"[^\x00-\x07\x0b\x0c\x0e-\x1f\x7f-\x9f]+")
_CSI_BODY = re.compile(r"[\x20-\x3f]*")  # parameter and intermediate bytes
_STRING_BODY = re.compile(r"[^\x07\x1b\x9c]*")  # up to BEL, ESC or ST
_ESC_INTERMEDIATE = re.compile(r"[\x20-\x2f]*")
_STRING_STARTS = {"]": "OSC", "P": "DCS", "X": "SOS", "^": "PM", "_": "APC"}
_C1_STRING_STARTS = "\x90\x98\x9d\x9e\x9f"  # DCS, SOS, OSC, PM, APC as single C1 characters
MAX_KEPT_SEQUENCE = 64  # a kept sequence longer than this is dropped instead


class _State(Enum):
    TEXT = 0
    ESC = 1  # after ESC (and any intermediate bytes)
    CSI = 2  # after ESC [ (and any parameter bytes)
    STRING = 3  # inside OSC / DCS / SOS / PM / APC, until BEL or ST
    STRING_ESC = 4  # an ESC inside a string: ST if a backslash follows


class AnsiStripper:
    """Feed it pieces of output in order; it returns each one without control sequences.

    `keep(sequence)` says which complete CSI sequences (e.g. `\\x1b[31m`) to pass on as
    they are; by default none.
    """

    def __init__(self, keep: re.Pattern[str] | None = None) -> None:
        self._keep = keep
        self._state = _State.TEXT
        self._csi = ""  # the CSI sequence so far, only while it may be kept

    def feed(self, text: str) -> str:
        out: list[str] = []
        i, n = 0, len(text)
        while i < n:
            state = self._state
            if state is _State.TEXT:
                m = _PLAIN.match(text, i)
                if m:
                    out.append(m.group())
                    i = m.end()
                    continue
                i = self._control(text[i], out, i)
            elif state is _State.ESC:
                i = self._escape(text, i)
            elif state is _State.CSI:
                i = self._csi_part(text, i, out)
            elif state is _State.STRING:
                i = _end(_STRING_BODY, text, i)
                if i < n:
                    c = text[i]
                    self._state = _State.STRING_ESC if c == ESC else _State.TEXT
                    i += 1
            else:  # STRING_ESC
                if text[i] == "\\":
                    self._state = _State.TEXT
                    i += 1
                else:
                    self._state = _State.ESC  # a new sequence ends the string; read it again
        return "".join(out)

    def _control(self, c: str, out: list[str], i: int) -> int:
        if c in "\n\r\t\b":
            out.append(c)
        elif c == ESC:
            self._state = _State.ESC
        elif c == "\x9b":
            self._start_csi("\x1b[")
        elif c in _C1_STRING_STARTS:
            self._state = _State.STRING
        return i + 1  # any other control character is dropped

    def _escape(self, text: str, i: int) -> int:
        i = _end(_ESC_INTERMEDIATE, text, i)
        if i >= len(text):
            return i
        c = text[i]
        if c == "[":
            self._start_csi("\x1b[")
        elif c in _STRING_STARTS:
            self._state = _State.STRING
        elif "\x30" <= c <= "\x7e":
            self._state = _State.TEXT  # a two-character sequence: ESC 7, ESC ( B, ESC = ...
        else:
            self._state = _State.TEXT  # not a sequence after all: read the character as text
            return i
        return i + 1

    def _start_csi(self, lead: str) -> None:
        self._state = _State.CSI
        self._csi = lead if self._keep is not None else ""

    def _csi_part(self, text: str, i: int, out: list[str]) -> int:
        end = _end(_CSI_BODY, text, i)
        if self._keep is not None and len(self._csi) <= MAX_KEPT_SEQUENCE:
            self._csi += text[i:end]
        i = end
        if i >= len(text):
            return i
        c = text[i]
        self._state = _State.TEXT
        if "\x40" <= c <= "\x7e":  # the final byte
            sequence = self._csi + c
            self._csi = ""
            if (self._keep is not None and len(sequence) <= MAX_KEPT_SEQUENCE
                    and self._keep.fullmatch(sequence)):
                out.append(sequence)
            return i + 1
        self._csi = ""
        return i  # broken off by a control character: that one is read again as text


def _end(pattern: re.Pattern[str], text: str, i: int) -> int:
    """Where a run of `pattern` (which may be empty) starting at `i` ends."""
    m = pattern.match(text, i)
    assert m is not None  # a `*` pattern always matches
    return m.end()


def strip_ansi(text: str) -> str:
    """`text`, whole, without control sequences."""
    return AnsiStripper().feed(text)


# Colours and text attributes (SGR), and erasing in the line (EL), which a progress bar
# redrawing its line after a `\r` relies on.
SGR_AND_EL = re.compile(r"\x1b\[[0-9;:]*[mK]")
