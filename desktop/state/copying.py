"""What copying from the transcript takes: a selection of text across its items, and an exchange as
markdown.  Qt-free.

A selection runs from an anchor (where the mouse was pressed) to a focus (where it is now), each
a `Spot`: a row of the transcript and a character offset in that row's shown text.  The view
measures the offsets in its documents, keeps the rows right as rows come and go (`inserted`,
`removed`), and asks each row for its part.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from desktop.state.transcript import TOOL_STATUS_WORDS, AssistantItem, Item, NoteItem, ToolItem, UserItem
from shared.mcp_names import shown_name, shown_summary


@dataclass(frozen=True, order=True)
class Spot:
    """A place in the transcript's text: before the character `offset` of row `row`."""

    row: int
    offset: int


@dataclass(frozen=True)
class Selection:
    """The text from `anchor` to `focus` (either may come first); empty when they are equal."""

    anchor: Spot
    focus: Spot

    @property
    def start(self) -> Spot:
        return min(self.anchor, self.focus)

    @property
    def end(self) -> Spot:
        return max(self.anchor, self.focus)

    @property
    def empty(self) -> bool:
        return self.anchor == self.focus

    @property
    def rows(self) -> range:
        return range(self.start.row, self.end.row + 1)

    def part(self, row: int, length: int) -> tuple[int, int] | None:
        """The selected [start, end) characters of a row whose text is `length` long, or None
        when none of it is selected."""
        if self.empty or row not in self.rows:
            return None
        start = self.start.offset if row == self.start.row else 0
        end = self.end.offset if row == self.end.row else length
        start, end = min(max(0, start), length), min(max(0, end), length)
        return (start, end) if end > start else None

    def whole(self, row: int, length: int) -> bool:
        """Whether all of a row's text is selected."""
        return self.part(row, length) == (0, length)

    def inserted(self, at: int, count: int) -> Selection:
        """The same text after `count` rows were inserted at row `at`."""
        def moved(spot: Spot) -> Spot:
            return Spot(spot.row + count, spot.offset) if spot.row >= at else spot
        return Selection(moved(self.anchor), moved(self.focus))

    def removed(self, at: int, count: int) -> Selection | None:
        """The same text after rows `at` to `at + count - 1` were removed; None when some of it
        was in them (what it held is gone)."""
        if at <= self.end.row and self.start.row < at + count:
            return None
        def moved(spot: Spot) -> Spot:
            return Spot(spot.row - count, spot.offset) if spot.row >= at + count else spot
        return Selection(moved(self.anchor), moved(self.focus))


def joined(parts: Iterable[str]) -> str:
    """The selected parts of rows as one text: in order, a blank line between two items."""
    return "\n\n".join(part.strip("\n") for part in parts if part.strip())


def quoted(text: str) -> str:
    """`text` as a markdown block quote: each line after "> " (a blank one just ">")."""
    return "\n".join(f"> {line}".rstrip() for line in text.strip("\n").splitlines())


def code_span(text: str) -> str:
    """`text` as a markdown code span, fenced by more backticks than it holds in a row."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def exchange_rows(items: Sequence[Item], row: int) -> range:
    """The exchange row `row` is part of: the person's prompt at or above it (or the first
    row, when that prompt is not loaded) up to the next prompt."""
    start = row
    while start > 0 and not isinstance(items[start], UserItem):
        start -= 1
    end = start + 1
    while end < len(items) and not isinstance(items[end], UserItem):
        end += 1
    return range(start, end)


def tool_line(item: ToolItem) -> str:
    """A call in one markdown line: "- `terminal` `ls -la` — done"."""
    name, origin = shown_name(item.name or "tool")
    summary = shown_summary(item.name, item.summary).strip()
    what = f" {code_span(summary)}" if summary else ""
    source = f" ({origin})" if origin else ""
    status = TOOL_STATUS_WORDS.get(item.status, item.status)
    return f"- {code_span(name)}{source}{what} — {status}"


def exchange_markdown(items: Sequence[Item]) -> str:
    """An exchange as markdown: the prompt quoted, each answer's markdown as written, each tool
    call a list line (calls in a row make one list), a note in bold words."""
    blocks: list[str] = []
    calls: list[str] = []
    for item in items:
        if item.hidden:
            continue  # an answer not shown (state/answers.py)
        if isinstance(item, ToolItem):
            calls.append(tool_line(item))
            continue
        if calls:
            blocks.append("\n".join(calls))
            calls = []
        if isinstance(item, UserItem) and item.text.strip():
            blocks.append(quoted(item.text))
        elif isinstance(item, AssistantItem) and item.text.strip():
            blocks.append(item.text.strip("\n"))
        elif isinstance(item, NoteItem) and item.text.strip():
            blocks.append(f"**Note:** {item.text.strip()}")
    if calls:
        blocks.append("\n".join(calls))
    return "\n\n".join(blocks) + "\n"
