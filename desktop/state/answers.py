"""A prompt's answers as the transcript shows them: one answer per prompt, the others hidden,
and under a prompt's shown answer an `AnswerBar` (‹ 2/3 ›) to page through them.  Qt-free.

A prompt is a `UserItem` that opened its turn (a steer's joined a turn already running).  The
rows after it up to the next prompt are its answers, one per turn: its own turn's and those of
each regeneration (`session.regenerate`, a turn without a user row).  Rows of answers not shown
are `hidden` (their messages came with `active: false`, or `answer.chosen` named another);
notes that belong to the session (a summary, a rotation's, a notice) are never an answer's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from desktop.state.items import Item, NoteItem, UserItem

SESSION_NOTES = frozenset({"summary", "continued", "notice", "review"})


@dataclass(eq=False)
class AnswerBar(Item):
    """Under a prompt's shown answer, when it has more than one: which one is shown of how
    many (`turns`, oldest first), and whether it is the session's last prompt's (its answer
    can be regenerated)."""

    prompt_key: str = ""
    turns: list[str] = field(default_factory=list)
    shown: int = 0
    last: bool = False

    @property
    def words(self) -> str:
        return f"{self.shown + 1} / {len(self.turns)}"


@dataclass(frozen=True)
class Exchange:
    """A prompt (its row; None when the page starts below it) and the rows of its answers,
    `start` to `end` (the next prompt's row, or the end); `turns` oldest first."""

    prompt: int | None
    start: int
    end: int
    turns: tuple[str, ...]
    shown: str | None

    @property
    def shown_index(self) -> int:
        """Which answer is shown (the newest when none has a visible row yet)."""
        return self.turns.index(self.shown) if self.shown in self.turns else len(self.turns) - 1


def is_prompt(item: Item) -> bool:
    return isinstance(item, UserItem) and not item.steer


def of_answer(item: Item) -> bool:
    """A row that belongs to one of a prompt's answers (by its turn)."""
    if item.turn_id is None or isinstance(item, AnswerBar):
        return False
    return not (isinstance(item, NoteItem) and item.kind in SESSION_NOTES)


def exchanges(items: Sequence[Item]) -> list[Exchange]:
    """The exchanges of the loaded rows, in order."""
    out: list[Exchange] = []
    prompt: int | None = None
    start = 0
    turns: list[str] = []
    shown: str | None = None
    for i, item in enumerate(items):
        if is_prompt(item):
            if prompt is not None or turns:
                out.append(Exchange(prompt, start, i, tuple(turns), shown))
            prompt, start, shown = i, i + 1, None
            turns = [item.turn_id] if item.turn_id else []
            continue
        if not of_answer(item):
            continue
        turn = item.turn_id
        assert turn is not None
        if turn not in turns:
            turns.append(turn)
        if shown is None and not item.hidden:
            shown = turn
    if prompt is not None or turns:
        out.append(Exchange(prompt, start, len(items), tuple(turns), shown))
    return out


def exchange_of(items: Sequence[Item], prompt_key: str) -> Exchange | None:
    """The exchange of the prompt whose key is `prompt_key`, if it is loaded."""
    for ex in exchanges(items):
        if ex.prompt is not None and items[ex.prompt].key == prompt_key:
            return ex
    return None


def exchange_at(items: Sequence[Item], row: int) -> Exchange | None:
    """The exchange row `row` belongs to."""
    for ex in exchanges(items):
        if (ex.prompt if ex.prompt is not None else ex.start) <= row < ex.end:
            return ex
    return None


@dataclass(frozen=True)
class Wanted:
    """Where an exchange's bar goes (the row before which it sits) and what it says."""

    row: int
    prompt_key: str
    turns: tuple[str, ...]
    shown: int
    last: bool


def wanted_bars(items: Sequence[Item], running: str | None,
                busy_prompt: str | None = None) -> list[Wanted]:
    """The bars the rows call for: one under each loaded prompt's answers when it has more
    than one (so some rows are hidden: a page that starts inside a turn is not taken for a
    second answer), placed after its last row; none for the exchange whose turn runs (its
    rows are still coming), nor for `busy_prompt`'s (a regeneration of it runs, maybe with
    no row yet)."""
    found = exchanges(items)
    out: list[Wanted] = []
    for n, ex in enumerate(found):
        if ex.prompt is None or len(ex.turns) < 2 or running in ex.turns \
                or (busy_prompt is not None and items[ex.prompt].key == busy_prompt) \
                or not any(items[i].hidden for i in range(ex.start, ex.end)):
            continue
        end = ex.end
        while end > ex.start and isinstance(items[end - 1], AnswerBar):
            end -= 1  # (a bar there already: it is replaced or kept, not counted)
        out.append(Wanted(end, items[ex.prompt].key, ex.turns, ex.shown_index,
                          n == len(found) - 1))
    return out


def visible(items: Sequence[Item]) -> list[Item]:
    """The rows people see: not hidden, no bars."""
    return [it for it in items if not it.hidden and not isinstance(it, AnswerBar)]
