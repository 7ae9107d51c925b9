"""A backend's messaging doors (Matrix) as the app shows them: each door's state in words and
its colour, and which session a room is bound to.  Qt-free.

What a door is comes from `door.list` and the session-less `door.state` event (a DoorStatus,
shared/protocol/doors.py); this module only words it.  Everything here is text from the backend or
the platform (a room's name is whatever its members called it): callers show it as plain text.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from shared import protocol as p

PLATFORMS = {"matrix": "Matrix"}
# A door's state as the app says it: words and a theme tone (desktop/qt/theme.py Colors).
STATES: dict[str, tuple[str, str]] = {
    "connected": ("connected", "success"),
    "starting": ("connecting…", "warning"),
    "failing": ("failing", "danger"),
    "stopped": ("stopped", "muted"),
}
AWAY = "The backend is not connected: this is the door as last seen."
HOW_TO = ("No messaging door is configured. A door lets the people you allow talk to Turnkey "
          "from a chat app (Matrix): store the agent account's access token with `turnkey secret "
          "set doors.matrix` and add a [doors.matrix] section to config.toml. README, “Talk to "
          "it from Matrix”, shows how, step by step.")


def platform_name(door: p.DoorStatus) -> str:
    return PLATFORMS.get(door.platform, door.platform.capitalize() or door.name)


def state_words(door: p.DoorStatus) -> tuple[str, str]:
    """(words, tone) of the door's state: ("connected", "success"), ("failing", "danger")."""
    return STATES.get(door.state, (door.state, "muted"))


def summary(door: p.DoorStatus) -> str:
    """One line for the sidebar: "Matrix · connected as @agent:server", "Matrix · failing"."""
    words, _tone = state_words(door)
    if door.state == "connected":
        return f"{platform_name(door)} · connected as {door.account}"
    return f"{platform_name(door)} · {words}"


def reason(door: p.DoorStatus) -> str:
    """Why a door is not connected (its `detail`), or "" when there is nothing to say."""
    if door.state == "connected":
        return ""
    return (door.detail or "").strip()


def tooltip(door: p.DoorStatus) -> str:
    """The sidebar row's tooltip: the state, the account, and the reason when failing."""
    lines = [f"{title(door)}: {state_words(door)[0]} "
             f"{since_words(door.since)}", f"Account: {door.account}"]
    why = reason(door)
    if why:
        lines.append(f"Why: {why}")
    lines.append("Click for details")
    return "\n".join(lines)


def since_words(stamp: float, now: float | None = None) -> str:
    """"since 14:05" (today), "since 2026-11-30 14:05" (before): when the state began."""
    when = time.localtime(stamp)
    today = time.localtime(now if now is not None else time.time())
    if when[:3] == today[:3]:
        return f"since {time.strftime('%H:%M', when)}"
    return f"since {time.strftime('%Y-%m-%d %H:%M', when)}"


def title(door: p.DoorStatus) -> str:
    """"Matrix", or "Matrix · work" for a door whose name is not its platform's."""
    platform = platform_name(door)
    return platform if door.name == door.platform else f"{platform} · {door.name}"


def room_label(room: p.DoorRoom) -> str:
    """A room by its name when it has one, else its id."""
    return room.name or room.room_id


def bound_words(door: p.DoorStatus, room: p.DoorRoom) -> str:
    """A bound session's tooltip line: "Also in Matrix: Ops (!abc:server) via @agent:server"."""
    name = f"{room.name} ({room.room_id})" if room.name else room.room_id
    return f"Also in {platform_name(door)}: {name} via {door.account}"


def header_words(door: p.DoorStatus, room: p.DoorRoom) -> str:
    """What the conversation's header says: "Matrix: Ops"."""
    return f"{platform_name(door)}: {room_label(room)}"


@dataclass
class DoorBook:
    """One backend's doors by name, kept current by `door.list` and `door.state`."""

    doors: dict[str, p.DoorStatus] = field(default_factory=dict)

    def load(self, doors: list[p.DoorStatus]) -> None:
        self.doors = {d.name: d for d in doors}

    def update(self, door: p.DoorStatus) -> None:
        self.doors[door.name] = door

    def clear(self) -> None:
        self.doors = {}

    def listed(self) -> list[p.DoorStatus]:
        return sorted(self.doors.values(), key=lambda d: d.name)

    def rooms_of(self, session_id: str) -> list[tuple[p.DoorStatus, p.DoorRoom]]:
        """Every room (of every door) bound to `session_id`."""
        return [(door, room) for door in self.listed() for room in door.rooms
                if room.session_id == session_id]

    def failing(self) -> list[p.DoorStatus]:
        return [d for d in self.listed() if d.state == "failing"]
