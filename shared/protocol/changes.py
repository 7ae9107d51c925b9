"""A session's file changes by turn, as the changes panel reads them: `session.changes`."""

from __future__ import annotations

from typing import Annotated

import msgspec

from shared.protocol.base import Id, Params, Wire

CHANGES_TURNS_MAX = 200


class SessionChangesParams(Params):
    session_id: Id
    # The newest turns that changed files, at most this many (older ones: `has_more`).
    limit: Annotated[int, msgspec.Meta(ge=1, le=CHANGES_TURNS_MAX)] = 50


class FileChange(Wire):
    """What one turn did to one file: from before its first change in the turn to as the turn
    left it (the next turn's checkpoint of the file, else the file as it is now)."""

    path: str  # the real path, as `session.undo`'s `paths` and `files.restored` name it
    label: str  # for people: relative to the session folder when inside it, else absolute
    call_ids: list[str]  # the calls that changed it, in order
    diff: str  # unified; or a note in parentheses when there is none to show
    created: bool  # it did not exist before the turn
    deleted: bool  # it does not exist after the turn
    restored: bool  # `session.undo` put it back: `diff` is then the calls' own diffs


class TurnChanges(Wire):
    turn_id: str
    prompt: str  # the first non-empty line of the turn's prompt
    at: str  # when the turn's prompt was stored (RFC 3339 UTC)
    files: list[FileChange]  # in the order the turn first changed them


class ChangesResult(Wire):
    turns: list[TurnChanges]  # oldest first
    has_more: bool  # older turns changed files too (raise `limit` to see them)
