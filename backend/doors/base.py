"""The seam between the door (door.py) and one chat platform: what a platform module provides.

A platform module turns the platform's sync into `Batch`es of plain items and sends text;
everything else (who may talk, which session, commands, the durable outbox, streaming
edits) is the door's, the same for every platform.  Identities (`sender`) and message ids
(`event_id`) are the platform's own, taken from what its server vouches for, never from
the message's text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True)
class Message:
    """A person's text message in a room."""

    room_id: str
    event_id: str
    sender: str
    text: str
    reply_to: str | None = None  # the platform id of the message it answers, if any
    encrypted: bool = False  # end-to-end encrypted: the door cannot read it


@dataclass(frozen=True)
class File:
    """A person's file or image in a room: a prompt carrying it.  `url` is where the
    platform serves its bytes (None: end-to-end encrypted, the door cannot read it);
    `declared_*` are what the sender's client said, checked against the bytes."""

    room_id: str
    event_id: str
    sender: str
    name: str
    caption: str  # the text sent with it ("" when none)
    url: str | None
    declared_type: str | None = None
    declared_bytes: int | None = None
    kind: str = "m.file"  # the platform's kind of message: m.image, m.file, m.audio, m.video


@dataclass(frozen=True)
class Reaction:
    """A person's reaction (an emoji) to a message."""

    room_id: str
    event_id: str
    sender: str
    target: str  # the platform id of the message reacted to
    key: str


@dataclass(frozen=True)
class Invite:
    room_id: str
    inviter: str


@dataclass(frozen=True)
class Batch:
    """What one sync brought: `cursor` is where the next starts.  `first`: the very first
    sync of this account, whose messages are history the door must not act on."""

    cursor: str
    first: bool
    invites: list[Invite] = field(default_factory=list)
    items: list[Message | File | Reaction] = field(default_factory=list)
    room_names: dict[str, str] = field(default_factory=dict)


class TransportError(Exception):
    """The platform could not be reached or refused; the message is for people (no secret
    in it) and says what to do when it is something they can fix."""


class TooLarge(Exception):
    """A file's bytes went past the limit its download was given."""


class Transport(Protocol):
    platform: str
    account: str  # the identity the door speaks as

    async def connect(self) -> None:
        """Checks the credentials (raises TransportError saying what is wrong)."""

    async def poll(self, cursor: str | None) -> Batch:
        """Waits (up to the platform's long-poll) for new items after `cursor`."""

    async def send(self, room_id: str, txn_id: str, text: str, *, notice: bool = False) -> str:
        """Posts `text` (Markdown); returns its platform id.  The same `txn_id` again posts
        nothing new and returns the same id: the platform deduplicates on it."""

    async def edit(self, room_id: str, target: str, txn_id: str, text: str, *,
                   notice: bool = False) -> str:
        """Replaces the text of our message `target`; idempotent on `txn_id` as `send`."""

    async def download(self, url: str, limit: int) -> bytes:
        """A file's bytes from the platform; raises TooLarge past `limit` bytes (read no
        further), TransportError when it cannot be had."""

    async def join(self, room_id: str) -> None: ...

    async def leave(self, room_id: str) -> None: ...

    async def close(self) -> None: ...
