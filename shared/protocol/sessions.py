"""Sessions and their transcripts: objects, params, results, and their events."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from shared.literals import Role, SessionStatus
from shared.protocol.approvals import Approval
from shared.protocol.attachments import MessageAttachment
from shared.protocol.base import (
    Event,
    EventData,
    EventSpec,
    Folder,
    Id,
    ModelName,
    NonNegative,
    Params,
    RequestId,
    Title,
    Usage,
    UsageRow,
    Wire,
)
from shared.protocol.clarify import Question
from shared.protocol.tools import ToolCall
from shared.protocol.turns import Receipt


class Session(Wire):
    session_id: str
    title: str
    cwd: str
    model: str
    created_at: str
    updated_at: str
    status: SessionStatus
    message_count: int
    usage: Usage
    parent_session_id: str | None = None
    child_session_id: str | None = None
    latest_seq: int = 0
    # Addition: a sub-agent's session names the session and the `delegate` call that made it.
    delegated_from: str | None = None
    delegated_call_id: str | None = None
    # Addition: words for people when the folder is the home folder or / (or holds the home
    # folder), where the sandbox protects none of their files (`shared/folders.py`).
    folder_warning: str | None = None
    # Addition: the provider (a [providers.NAME] of config) this session's turns start on,
    # chosen with session.update; absent (null): the default provider.
    provider: str | None = None
    # Addition: a branch names the session it was forked from and the prompt (a message_id of
    # that session) it was forked at (`session.fork`).
    forked_from: str | None = None
    forked_at: str | None = None


class SearchMatch(Wire):
    """Where a `session.list` query matched one listed session.

    `message_id`: the session's best-matching message (by bm25), or null when only the
    title matched; `snippet` is then the title.  `snippet` is plain text, never markup:
    about a dozen words around the match, a message's markdown syntax left out (fence
    lines, a heading's #s, ** and backticks), runs of whitespace and control characters
    made one space, at most 160 characters (SNIPPET_MAX) with the first match in the
    middle, `…` where it was cut.  `highlights`: the matched words as [start, end)
    offsets into `snippet`, counted in Unicode code points (as Python indexes a str, not
    UTF-16 units), ascending, not overlapping.
    """

    session_id: str
    message_id: str | None
    snippet: str
    highlights: list[tuple[int, int]]


class Message(Wire):
    message_id: str
    session_id: str
    role: Role
    content: str
    compacted: bool
    created_at: str
    turn_id: str | None = None
    tool_calls: list[ToolCall] | None = None
    call_id: str | None = None
    tool_name: str | None = None
    status: str | None = None
    note_kind: str | None = None
    meta: dict[str, Any] | None = None
    # Addition: false on the rows of an answer that is not shown (another answer to the same
    # prompt was regenerated or chosen): the model does not read them, people page to them.
    active: bool = True
    # Addition: on a prompt, the sessions forked at it (`session.fork`), oldest first.
    branches: list[str] | None = None
    # Addition: on a prompt, the files sent with it (attachments), in the order given.
    attachments: list[MessageAttachment] | None = None


class SessionCreateParams(Params):
    title: Title | None = None
    cwd: Folder | None = None
    model: ModelName | None = None


MAX_SEARCH_QUERY = 1000  # characters of a session search; no NUL (SQLite's text ends there)


class SessionListParams(Params):
    limit: Annotated[int, msgspec.Meta(ge=1, le=500)] = 50
    cursor: Annotated[str, msgspec.Meta(max_length=1000)] | None = None
    query: Annotated[str, msgspec.Meta(max_length=MAX_SEARCH_QUERY, pattern=r"^[^\x00]*$")] \
        | None = None
    # Addition: sub-agents' sessions are left out unless asked for: all of them
    # (`include_delegated`), or the ones a session's delegate calls made (`delegated_from`).
    include_delegated: bool = False
    delegated_from: Id | None = None


class SessionIdParams(Params):
    session_id: Id


class SessionUpdateParams(Params):
    """`provider` (an addition): the configured provider this session's turns start on, from
    its next turn; "" goes back to the default provider.  Given without `model`, the model
    becomes that provider's configured one."""

    session_id: Id
    title: Title | None = None
    model: ModelName | None = None
    provider: Id | None = None


class SessionDeleteParams(Params):
    session_id: Id
    force: bool = False


class SessionMessagesParams(Params):
    session_id: Id
    before_id: Id | None = None
    limit: Annotated[int, msgspec.Meta(ge=1, le=1000)] = 100


class SessionSinceParams(Params):
    session_id: Id
    since_seq: NonNegative | None = None


class EventsSinceParams(Params):
    session_id: Id
    since_seq: NonNegative
    limit: Annotated[int, msgspec.Meta(ge=1, le=10000)] = 1000


FilePath = Folder  # a real path: bounded as a folder's (PATH_MAX)


class SessionUndoParams(Params):
    session_id: Id
    turn_id: Id | None = None
    # Addition: only these files of the turn (`turn_id` then required); each must be one the
    # turn changed, named as `session.changes` names it.
    paths: Annotated[list[FilePath], msgspec.Meta(min_length=1, max_length=1000)] | None = None


class SessionChooseParams(Params):
    session_id: Id
    turn_id: Id  # the answer to show: a turn of one of the session's prompts


class ChooseResult(Wire):
    message_id: str  # the prompt the answers answer
    turn_id: str  # the answer shown now, which the model reads
    turn_ids: list[str]  # every answer to that prompt, oldest first


class SessionForkParams(Params):
    session_id: Id
    message_id: Id  # one of the session's prompts: the branch holds what came before it
    request_id: RequestId  # the same request_id again answers with the same branch
    text: str | None = None  # the edited prompt, admitted as the branch's first turn
    restore_files: bool = False  # put the folder's files back as they were at that prompt


class ForkResult(Wire):
    session: Session  # the branch
    duplicate: bool = False  # the request_id was used before: the branch it made then
    receipt: Receipt | None = None  # the admission of `text`
    restored: list[str] = msgspec.field(default_factory=list)  # files put back (restore_files)


class SessionResult(Wire):
    session: Session


class SessionListResult(msgspec.Struct, kw_only=True, omit_defaults=True):
    """`next_cursor` is always present: null on the last page.  With a query, `matches`
    has one SearchMatch per listed session, in the order of `sessions`; without one (or
    when nothing matched) it is left out."""

    sessions: list[Session]
    next_cursor: str | None
    matches: list[SearchMatch] = msgspec.field(default_factory=list)


class MessagesResult(Wire):
    messages: list[Message]
    has_more: bool


class EventsResult(Wire):
    events: list[Event]
    latest_seq: int
    truncated: bool


class ResumeResult(Wire):
    session: Session
    status: SessionStatus
    messages: list[Message]
    has_more: bool
    latest_seq: int
    events: list[Event]
    truncated: bool
    pending_approvals: list[Approval]
    queue: list[Receipt]
    active_turn: ActiveTurn | None = None
    pending_questions: list[Question] = []  # addition: `clarify` questions waiting for an answer


class ActiveTurn(Wire):
    """The running turn, with the text its current assistant message has streamed so far."""

    turn_id: str
    admission_id: str
    text: str


class SessionUsageResult(Wire):
    usage: Usage
    rows: list[UsageRow]


class SessionCompressParams(Params):
    session_id: Id
    focus: str | None = None  # what the summary should keep in view, in the user's words


class CompressResult(Wire):
    compressed: bool
    before_tokens: int
    after_tokens: int
    session_id: str  # the session the conversation continues in
    reason: str | None = None  # why nothing was compressed, when `compressed` is false


class UndoResult(Wire):
    restored: list[str]
    turn_id: str | None = None


class UsageUpdate(EventData):
    usage: Usage


class FilesRestored(EventData):
    """`files.restored`: `session.undo` put back the files a turn's calls changed."""
    turn_id: str
    paths: list[str]  # the files put back (a file left as it was is not among them)
    call_ids: list[str]  # the calls whose changes were undone


class AnswerChosen(EventData):
    """`answer.chosen`: which answer to a prompt is shown and read by the model now."""
    message_id: str  # the prompt
    turn_id: str  # its answer shown now; the rows of its other answers are not active


class SessionForked(EventData):
    """`session.forked`: a branch was made at one of this session's prompts."""
    message_id: str  # the prompt it was forked at
    branch: Session


class SessionEvent(EventData):
    session: Session


class SessionCreated(SessionEvent):
    """`session.created`: a session was made (broadcast, no seq)."""


class SessionUpdated(SessionEvent):
    """`session.updated`: a session changed (stored, or broadcast with no seq)."""


class SessionDeletedEvent(EventData):
    session_id: str


class CompressionStart(EventData):
    reason: str
    tokens: int


class CompressionComplete(EventData):
    before_tokens: int
    after_tokens: int
    child_session_id: str | None = None


SESSION_EVENTS = (
    EventSpec("usage.update", UsageUpdate, "`usage` (the session's totals)"),
    EventSpec("session.created", SessionCreated, "`session`"),
    EventSpec("session.updated", SessionUpdated, "`session`"),
    EventSpec("session.deleted", SessionDeletedEvent, "`session_id`"),
    EventSpec("files.restored", FilesRestored,
              "addition: `turn_id`, `paths` (the files put back), `call_ids` (the calls whose "
              "changes were undone): `session.undo` restored a turn's files; stored, so every "
              "window of the session stops offering that turn's undo and marks its calls"),
    EventSpec("answer.chosen", AnswerChosen,
              "addition: `message_id` (a prompt), `turn_id` (its answer shown now): a "
              "regeneration's turn took the place of the answer shown (stored in that turn, "
              "right after its `turn.started`), or `session.choose` picked another answer; the "
              "rows of the prompt's other answers are not active from here on, those of "
              "`turn_id` are"),
    EventSpec("session.forked", SessionForked,
              "addition: `message_id` (the prompt), `branch` (a Session): `session.fork` made "
              "a branch at that prompt of this session"),
    EventSpec("compression.start", CompressionStart, "`reason`, `tokens`"),
    EventSpec("compression.complete", CompressionComplete,
              "`before_tokens`, `after_tokens`, `child_session_id?` (rotation only)"),
)
