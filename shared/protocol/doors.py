"""Messaging doors (addition): a door's status, door.list and the door.state event."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from shared.protocol.base import EventData, EventSpec, Id, Params, Wire

DoorState = Literal["starting", "connected", "failing", "stopped"]
DoorName = Literal["matrix"]  # a door's [doors.NAME] table; one per platform so far
# A homeserver's URL, a Matrix user id: bounded (they go into config.toml, errors and events).
DoorUrl = Annotated[str, msgspec.Meta(max_length=2048)]
DoorUser = Annotated[str, msgspec.Meta(max_length=255)]  # the spec's limit for a user id
MAX_ALLOWED_USERS = 100


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


class DoorTestParams(Params):
    """Addition: checks a door's settings for real, saving nothing.  `homeserver` must answer
    as a Matrix homeserver, and the access token must be valid there and belong to `user_id`.
    `access_token` is used for this check only (a secret param: never stored, logged or
    echoed); without it the token stored for the saved door is used, and only when
    `homeserver` is the saved door's (a stored token is never sent anywhere else)."""

    homeserver: DoorUrl
    user_id: DoorUser
    name: DoorName = "matrix"
    access_token: str | None = None


class DoorTestResult(Wire):
    """`reached`: the homeserver answered as one.  `account` and `device_id`: whom the token
    belongs to, when the homeserver accepted it.  `error`: what failed and what to do, for
    people (never the token)."""

    ok: bool
    reached: bool
    account: str | None = None
    device_id: str | None = None
    latency_ms: int = 0
    error: str | None = None


class DoorSetParams(Params):
    """Addition: creates or updates the door `name` (`[doors.NAME]` in config.toml) with these
    settings, merged over its saved table (its rooms, folder and other keys are kept).
    `access_token` (a secret param) is stored as the door's secret (its
    `access_token_secret`, by default `doors.NAME`) in the keyring, never in config.toml;
    omitted, the stored one is kept (a new door needs one).  The door starts again at once."""

    homeserver: DoorUrl
    user_id: DoorUser
    name: DoorName = "matrix"
    allowed_users: Annotated[list[DoorUser], msgspec.Meta(max_length=MAX_ALLOWED_USERS)] = []
    access_token: str | None = None
    enabled: bool = True


class DoorSetResult(Wire):
    """`door`: the door as `door.list` now gives it (usually `starting`; `door.state` events
    follow).  `stored`/`warning`: where a token sent with it went, as `secret.set` says."""

    door: DoorStatus
    stored: Literal["keyring", "file"] | None = None
    warning: str | None = None


class DoorEvent(EventData):
    door: DoorStatus


DOOR_EVENTS = (
    EventSpec("door.state", DoorEvent,
              "addition, session-less (`session_id` `\"\"`, no `seq`, sent to every connection "
              "with `read`): `door`, a DoorStatus as `door.list` gives, when a door connects, "
              "starts failing (and why) or stops, and when a room is bound to a session (its "
              "first message, `/new`, a rotation)"),
)
