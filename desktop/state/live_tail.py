"""A running command's output as a terminal would leave it: clean lines, progress bars redrawn, bounded.

`Lines` turns a stream of text (free of escape sequences) into finished lines:
`\\n` ends a line, a `\\r` not followed by `\\n` starts the line over (what
comes next replaces it: a progress bar redrawing itself), `\\b` takes back a
character.  `LiveTail` strips the escape sequences (`ansi.py`) and keeps the
last lines for a tool card, within its line and character bounds, however
much output goes by.
"""

from __future__ import annotations

import re
from collections import deque

from desktop.state.ansi import AnsiStripper

LINE_CHARS = 2_000  # of a longer line, its end is kept
KEEP_LINES = 400
KEEP_CHARS = 16_000

_BREAKS = re.compile(r"([\r\n\b])")


class Lines:
    """Feed it text in order; it returns the lines each piece finished."""

    def __init__(self) -> None:
        self.current = ""  # the line being written
        self._return = False  # the last character was a \r: the line starts over unless \n follows

    def feed(self, text: str) -> list[str]:
        done: list[str] = []
        for part in _BREAKS.split(text):
            if part == "\n":
                done.append(self.current)
                self.current, self._return = "", False
            elif part == "\r":
                self._return = True
            elif part:
                if self._return:
                    self.current, self._return = "", False
                if part == "\b":
                    self.current = self.current[:-1]
                else:
                    self.current = (self.current + part)[-LINE_CHARS:]
        return done


class LiveTail:
    """The last lines of a stream of raw output: `feed` chunks in order, read `text`."""

    def __init__(self, keep_lines: int = KEEP_LINES, keep_chars: int = KEEP_CHARS) -> None:
        self.keep_lines = keep_lines
        self.keep_chars = keep_chars
        self._ansi = AnsiStripper()
        self._lines = Lines()
        self._done: deque[str] = deque()
        self._chars = 0  # of the finished lines kept, a newline each included

    def feed(self, chunk: str) -> None:
        for line in self._lines.feed(self._ansi.feed(chunk))[-self.keep_lines:]:
            self._done.append(line)
            self._chars += len(line) + 1
        room = self.keep_chars - len(self._lines.current)
        while self._done and (len(self._done) > self.keep_lines or self._chars > room):
            self._chars -= len(self._done.popleft()) + 1

    @property
    def text(self) -> str:
        """The kept lines, each ended by a newline, then the unfinished one."""
        return "".join(line + "\n" for line in self._done) + self._lines.current
