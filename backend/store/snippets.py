"""Search snippets as plain text plus offsets, so no user text is ever read as markup.

FTS5's snippet() marks the matched terms by inserting strings into the message text; the
strings used here carry a fresh random nonce (`Markers`), and a message that contains the
nonce is never parsed with it (the caller checks, see sessions.matches), so every marker
found in snippet()'s output is one snippet() inserted.  `render` then turns the text and
the marked spans into what a client gets: a message's markdown syntax left out (a code
fence's line, a heading's #s, bold's ** and code's backticks: a snippet shows words, and the
message's are mostly markdown), whitespace and control characters collapsed to one space, at
most SNIPPET_MAX characters with the first match in their middle, and the spans as [start,
end) code-point offsets into that text.

snippet() copies the text between marks with printf's `%.*s`, which stops at a NUL: in a
message holding one, what follows the NUL up to the next mark is left out of the snippet.
The marks stay exact, and the text is still the message's own.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import re
import unicodedata
from secrets import token_hex

from shared.literals import SNIPPET_MAX

Span = tuple[int, int]

ELLIPSIS = "\u2026"
_WORD_SLACK = 20  # how far a cut moves to fall between words
# Markdown's syntax a snippet leaves out (never a marked word): a fence's line (its marker and
# language), a heading's #s, ** and runs of backticks.
_SYNTAX = re.compile(r"^[ \t]*(?P<fence>`{3,}|~{3,})(?P<info>[^\n]*)$|^[ \t]{0,3}#{1,6}(?=[ \t]|$)"
                     r"|\*\*|`+", re.MULTILINE)
_BLANK = re.compile(r"[\s\x00-\x1f\x7f-\x9f]+")
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


class Markers:
    """What snippet() is asked to insert: before and after a match, and where it cut."""

    def __init__(self) -> None:
        self.nonce = token_hex(16)
        self.open = f"\x01{self.nonce}("
        self.close = f"\x01{self.nonce})"
        self.cut = f"\x01{self.nonce}."
        # The nonce is hex and each marker fences it with non-hex characters, so in text
        # that does not contain the nonce every match of this pattern is a whole marker.
        self.pattern = re.compile(f"\x01{self.nonce}([().])")


def parse(marked: str, markers: Markers) -> tuple[str, list[Span], bool, bool]:
    """snippet() output made with `markers` → (text, spans, cut before, cut after).

    Only valid when the message the output came from does not contain `markers.nonce`.
    """
    parts: list[str] = []
    spans: list[Span] = []
    length = 0
    start: int | None = None
    cut_before = cut_after = False
    pos = 0
    for m in markers.pattern.finditer(marked):
        piece = marked[pos:m.start()]
        parts.append(piece)
        length += len(piece)
        pos = m.end()
        kind = m.group(1)
        if kind == "(":
            start = length if start is None else start
        elif kind == ")":
            if start is not None and length > start:
                spans.append((start, length))
            start = None
        elif length == 0:
            cut_before = True
        else:
            cut_after = True
    parts.append(marked[pos:])
    return "".join(parts), spans, cut_before, cut_after


def title_spans(title: str, query: str) -> list[Span]:
    """Where `query` occurs in `title` as `LIKE '%query%'` finds it (the stripped query as
    one substring, case folded for ASCII letters only), left to right, not overlapping."""
    needle = query.strip().translate(_ASCII_LOWER)
    if not needle:
        return []
    hay = title.translate(_ASCII_LOWER)  # one character for one: offsets hold
    spans: list[Span] = []
    i = hay.find(needle)
    while i >= 0:
        spans.append((i, i + len(needle)))
        i = hay.find(needle, i + len(needle))
    return spans


def word_spans(text: str, query: str) -> list[Span]:
    """Where the words of `query` begin words of `text` (each word taken whole, as a prefix
    search matches it), case folded, left to right, not overlapping: the marks of a match
    found by the PostgreSQL store's full-text search, which has no snippet() of its own
    that could be trusted with user text."""
    words = sorted({_fold(w) for w in query.split() if w.strip()}, key=len, reverse=True)
    if not words:
        return []
    pattern = re.compile("|".join(rf"(?<!\w){re.escape(w)}\w*" for w in words), re.IGNORECASE)
    folded = _fold(text)  # one character for one: offsets hold
    return [(m.start(), m.end()) for m in pattern.finditer(folded) if m.end() > m.start()]


def _fold(text: str) -> str:
    """`text` with each character's accents taken off, one character for one ("ï" → "i")."""
    return "".join(_fold_char(c) for c in text)


@functools.lru_cache(maxsize=4096)
def _fold_char(c: str) -> str:
    base = unicodedata.normalize("NFD", c)[:1]
    return base if base and len(unicodedata.normalize("NFD", c)) > 1 else c


def render(
    text: str, spans: list[Span], cut_before: bool = False, cut_after: bool = False,
    limit: int = SNIPPET_MAX, markdown: bool = True,
) -> tuple[str, list[Span]]:
    """The snippet a client shows, and `spans` moved into it (see the module doc); `markdown`
    False for a text that is not a message's (a title keeps its backticks)."""
    if markdown:
        text, spans = _unmark(text, spans)
    text, spans = _collapse(text, spans)
    if len(text) + cut_before + cut_after > limit:
        text, spans, cut_before, cut_after = _window(text, spans, limit, cut_before, cut_after)
    if cut_before:
        text = ELLIPSIS + text
        spans = [(s + 1, e + 1) for s, e in spans]
    if cut_after:
        text += ELLIPSIS
    return text, spans


def _unmark(text: str, spans: list[Span]) -> tuple[str, list[Span]]:
    """`text` without markdown's syntax (`_SYNTAX`), except where a span is: a fence whose
    language matched keeps the language."""
    marked = sorted(spans)
    starts = [s for s, _ in marked]
    ends = list(itertools.accumulate((e for _, e in marked), max))  # the furthest end so far

    def free(lo: int, hi: int) -> bool:
        i = bisect.bisect_left(starts, hi) - 1  # the last span that starts before hi
        return i < 0 or ends[i] <= lo

    cuts: list[Span] = []
    for m in _SYNTAX.finditer(text):
        cut = m.span()
        if m.group("fence") is not None and not free(*cut):
            cut = (m.start(), m.end("fence"))
        if free(*cut):
            cuts.append(cut)
    if not cuts:
        return text, spans
    kept: list[str] = []
    removed = [0]  # characters removed before each cut's end
    pos = 0
    for lo, hi in cuts:
        kept.append(text[pos:lo])
        removed.append(removed[-1] + hi - lo)
        pos = hi
    kept.append(text[pos:])
    cut_ends = [hi for _, hi in cuts]

    def moved(p: int) -> int:
        return p - removed[bisect.bisect_right(cut_ends, p)]

    return "".join(kept), [(moved(s), moved(e)) for s, e in spans]


def _collapse(text: str, spans: list[Span]) -> tuple[str, list[Span]]:
    """Each run of whitespace or control characters becomes one space; none at the ends."""
    runs: list[tuple[int, int, int]] = []  # (start, length, characters dropped before it)
    parts: list[str] = []
    dropped = pos = 0
    for m in _BLANK.finditer(text):
        parts += [text[pos:m.start()], " "]
        runs.append((m.start(), m.end() - m.start(), dropped))
        dropped += m.end() - m.start() - 1
        pos = m.end()
    parts.append(text[pos:])
    out = "".join(parts)
    starts = [r[0] for r in runs]

    def moved(p: int) -> int:
        i = bisect.bisect_left(starts, p) - 1  # the last run that starts before p
        if i < 0:
            return p
        start, length, before = runs[i]
        return p - before - min(p - start - 1, length - 1)

    lead = 1 if out.startswith(" ") else 0
    out = out[lead:].rstrip(" ")
    return out, _clip([(moved(s) - lead, moved(e) - lead) for s, e in spans], 0, len(out))


def _window(
    text: str, spans: list[Span], limit: int, cut_before: bool, cut_after: bool,
) -> tuple[str, list[Span], bool, bool]:
    """A part of `text` around the first span (in the middle of it, or from the span's start
    when the span is longer) that fits in `limit` characters with an ellipsis at each end that
    is cut (or was cut already)."""
    first, first_end = spans[0] if spans else (0, 0)
    width = limit - 2
    lead = max(0, (width - (first_end - first)) // 2)
    start = max(0, min(first - lead, len(text) - width))
    if start == 0 and not cut_before:
        width += 1  # the front is the text's own: no ellipsis there
    elif start + width == len(text) and not cut_after:
        start, width = start - 1, width + 1  # the same at the back
    end = min(len(text), start + width)
    if start > 0:  # begin after a space, if one is near and before the match
        space = text.find(" ", start, min(first, start + _WORD_SLACK))
        start = space + 1 if space >= 0 else start
    if end < len(text):  # end at a space, if one is near and after the match's start
        space = text.rfind(" ", max(first + 1, end - _WORD_SLACK), end)
        end = space if space > start else end
    return (text[start:end], [(s - start, e - start) for s, e in _clip(spans, start, end)],
            cut_before or start > 0, cut_after or end < len(text))


def _clip(spans: list[Span], lo: int, hi: int) -> list[Span]:
    """`spans` cut to [lo, hi), empty ones dropped and overlapping ones merged, in order."""
    out: list[Span] = []
    for s, e in sorted(spans):
        s, e = max(s, lo), min(e, hi)
        if e <= s:
            continue
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out
