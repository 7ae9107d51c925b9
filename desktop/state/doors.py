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
HOW_TO = ("No messaging door yet. A door lets the people you allow talk to Turnkey from a "
          "Matrix chat app (Element, on a phone too): each room gets a session of its own. "
          "Fill in the form below, press Test connection, then Save.")
TOKEN_HELP = ("Make a Matrix account for the agent and log in as it once (in Element: Settings → "
              "Help & About → Access token). The token is kept in the system keyring, never in "
              "config.toml; don't log that session out.")
# door.set's and door.test's fields as the form names them.
FIELD_LABELS = {"homeserver": "Homeserver URL", "user_id": "Account",
                "access_token": "Access token", "allowed_users": "Allowed users"}


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


# --- the Messaging form ------------------------------------------------------------------


def parse_users(text: str) -> list[str]:
    """The allowed users as typed: one per line (commas and spaces separate too), each once."""
    found: list[str] = []
    for user in text.replace(",", " ").split():
        if user not in found:
            found.append(user)
    return found


def form_error(field: str, message: str, users: list[str]) -> str:
    """A refusal of door.set or door.test (-32602 naming `field`) in the form's words:
    "Account: 'agent' is not a Matrix user id …", "Allowed users, “bob”: …"."""
    name, _, index = field.partition(".")
    label = FIELD_LABELS.get(name)
    if label is None:
        return message
    if name == "allowed_users" and index.isdigit() and int(index) < len(users):
        return f"{label}, “{users[int(index)]}”: {message}"
    return f"{label}: {message}"


def test_words(result: p.DoorTestResult) -> tuple[str, str]:
    """door.test's answer as the form says it: (text, tone)."""
    if result.ok:
        device = f" (device {result.device_id})" if result.device_id else ""
        return (f"Connection works: the homeserver answered and accepted the token for "
                f"{result.account}{device}, in {result.latency_ms} ms."), "success"
    return f"Test failed. {result.error or 'The homeserver did not say why.'}", "danger"


def saved_words(result: p.DoorSetResult) -> tuple[str, str]:
    """door.set's answer as the form says it: (text, tone)."""
    text = "Saved. The door is starting with these settings; its state shows above."
    if result.stored == "keyring":
        text += " The token is in the system keyring."
    if result.warning:
        return f"{text} Warning: {result.warning}.", "warning"
    return text, "success"
