"""Messaging doors (addition): a door's status, door.list and the door.state event."""

from __future__ import annotations

from typing import Literal

from shared.protocol.base import EventData, EventSpec, Id, Wire

DoorState = Literal["starting", "connected", "failing", "stopped"]


class DoorRoom(Wire):
    """A chat room a door serves and the session its messages go to."""

    room_id: str
    session_id: Id
    name: str | None = None  # the room's name on the platform, when it has one


class DoorStatus(Wire):
    """Addition: a configured messaging door (`[doors.NAME]`) and where it is.  `detail` says,
    for people, why it is `failing` (and what to do); `account` is the identity the door
    speaks as on the platform (for Matrix, its user id)."""

    name: str
    platform: str
    state: DoorState
    account: str
    since: float  # when it entered `state`
    detail: str | None = None
    rooms: list[DoorRoom] = []
    allowed_users: list[str] = []
    # The name of the secret (secret.set) holding the door's access token, never its value:
    # a front-end offers to store it there when the door says the token is missing or refused.
    token_secret: str | None = None


class DoorListResult(Wire):
    doors: list[DoorStatus]


class DoorEvent(EventData):
    door: DoorStatus


DOOR_EVENTS = (
    EventSpec("door.state", DoorEvent,
              "addition, session-less (`session_id` `\"\"`, no `seq`, sent to every connection "
              "with `read`): `door`, a DoorStatus as `door.list` gives, when a door connects, "
              "starts failing (and why) or stops, and when a room is bound to a session (its "
              "first message, `/new`, a rotation)"),
)
