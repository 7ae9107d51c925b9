"""A conversation's paging without Qt: which older page to ask for next (scrolling to the top,
looking for a search match), and when reading back over a finished turn stops.

`ConversationLoading` in `desktop/qt/conversation_loading.py` asks for the pages.
"""

from __future__ import annotations

from collections.abc import Sequence

from shared import protocol as p

PAGE = 100  # messages per session.messages (and session.resume's first page)
RECONCILE_PAGES = 20  # a turn longer than this many pages keeps its live items
MATCH_PAGES = 20  # how far back a search match is looked for before giving up
TOP_SLACK = 4  # pixels from the top of the transcript that count as the top


def older_page(has_more: bool, oldest_message_id: str | None, fetching: bool = False) -> str | None:
    """The `before_id` of the next older page to read, or None: one is being read already,
    there is none older, or nothing is loaded to page back from."""
    if fetching or not has_more or not oldest_message_id:
        return None
    return oldest_message_id


def at_top(value: int, minimum: int, loaded: bool) -> bool:
    """The transcript is scrolled to its top (within `TOP_SLACK`), with a session loaded."""
    return loaded and value <= minimum + TOP_SLACK


def turn_read(turn_id: str, page: Sequence[p.Message], has_more: bool,
              rows: Sequence[p.Message]) -> bool:
    """Reading back over the finished turn `turn_id` stops after `page` (`rows`: everything
    read so far, oldest first, `page` included): nothing older, nothing read, the turn's
    prompt read, or the oldest row read belongs to an earlier turn."""
    return (not has_more or not rows or rows[0].turn_id != turn_id
            or any(m.turn_id == turn_id and m.role == "user" for m in page))
