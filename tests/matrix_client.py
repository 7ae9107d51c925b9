"""A small synchronous Matrix client for tests: what a person's chat app does, over plain HTTP.

It plays the human side of a conversation with our door (create a room, invite the bot, send,
react) and reads the room back the way a person would see it: ``visible_messages`` applies
each message's edits (``m.replace``) the way Matrix clients do, so a test can say "the person
now sees exactly this reply, once".  It talks to the server directly with httpx; nothing here
comes from the product.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import quote

import httpx

API = "/_matrix/client/v3"
PAGE = 100  # events per /messages request
REQUEST_TIMEOUT_S = 30.0

T = TypeVar("T")


class MatrixRequestError(AssertionError):
    """The homeserver refused a request; carries the status and Matrix error code."""

    def __init__(self, what: str, status: int, errcode: str, error: str, log: str = "") -> None:
        super().__init__(f"{what}: HTTP {status} {errcode}: {error}" + (f"\n{log}" if log else ""))
        self.status = status
        self.errcode = errcode

    @classmethod
    def from_response(cls, response: httpx.Response, what: str, log: str = "") -> MatrixRequestError:
        try:
            body = response.json()
        except ValueError:
            body = {}
        if not isinstance(body, dict):
            body = {}
        return cls(what, response.status_code, str(body.get("errcode", "")),
                   str(body.get("error", response.text[:300])), log)


@dataclass(frozen=True)
class VisibleMessage:
    """One message as a person sees it: the original event with its last edit applied."""

    event_id: str  # the original's: what replies, reactions and edits point at
    sender: str
    body: str  # the final text
    content: dict[str, Any]  # the final content (the last edit's m.new_content, or the original)
    edits: int  # how many valid edits it had
    last_edit_id: str | None


def txn() -> str:
    """A fresh transaction id: a send with a new one is always a new event."""
    return f"tk{time.time_ns()}{secrets.token_hex(4)}"


def room_path(room_id: str) -> str:
    return f"{API}/rooms/{quote(room_id, safe='')}"


class MatrixClient:
    """One user's device (one access token) on a homeserver."""

    def __init__(self, url: str, user_id: str, access_token: str,
                 log_tail: Callable[[], str] | None = None) -> None:
        self.user_id = user_id
        self._log_tail = log_tail  # the server's log, for failure messages
        self._since: str | None = None  # the last /sync's next_batch
        self._invited: set[str] = set()
        self.http = httpx.Client(base_url=url, timeout=REQUEST_TIMEOUT_S,
                                 headers={"Authorization": f"Bearer {access_token}"})

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> MatrixClient:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def request(self, method: str, path: str, what: str, **kwargs: Any) -> dict[str, Any]:
        """One API call; raises MatrixRequestError (status, errcode) unless it answered 200."""
        response = self.http.request(method, path, **kwargs)
        if response.status_code != 200:
            log = self._log_tail() if self._log_tail is not None else ""
            raise MatrixRequestError.from_response(response, f"{self.user_id}: {what}", log)
        body: dict[str, Any] = response.json()
        return body

    # --- rooms --------------------------------------------------------------------------------

    def create_room(self, invite: list[str] | None = None, name: str | None = None) -> str:
        """A private room (invite only, history shared with members) -> its room id."""
        body: dict[str, Any] = {"preset": "private_chat", "invite": invite or []}
        if name is not None:
            body["name"] = name
        return str(self.request("POST", f"{API}/createRoom", "create a room", json=body)["room_id"])

    def invite(self, room_id: str, user_id: str) -> None:
        self.request("POST", f"{room_path(room_id)}/invite", f"invite {user_id}",
                     json={"user_id": user_id})

    def join(self, room_id: str) -> None:
        self.request("POST", f"{API}/join/{quote(room_id, safe='')}", f"join {room_id}", json={})

    def invites(self) -> list[str]:
        """Rooms this user is invited to and has not joined or left (a /sync that does not
        wait).  It syncs on from its last token, as real clients do: Synapse answers a repeated
        *initial* sync from a cache for two minutes, stale news included."""
        synced = self.sync(self._since)
        self._since = str(synced["next_batch"])
        rooms = synced.get("rooms", {})
        self._invited |= set(rooms.get("invite", {}))
        self._invited -= set(rooms.get("join", {})) | set(rooms.get("leave", {}))
        return sorted(self._invited)

    def sync(self, since: str | None = None, timeout_ms: int = 0) -> dict[str, Any]:
        """One /sync: everything new since the ``since`` token (its ``next_batch`` is the next)."""
        params = {"timeout": str(timeout_ms)} | ({"since": since} if since else {})
        return self.request("GET", f"{API}/sync", "sync", params=params,
                            timeout=REQUEST_TIMEOUT_S + timeout_ms / 1000)

    def joined_members(self, room_id: str) -> list[str]:
        found = self.request("GET", f"{room_path(room_id)}/joined_members", "joined members")
        return sorted(found.get("joined", {}))

    # --- sending ------------------------------------------------------------------------------

    def send(self, room_id: str, event_type: str, content: dict[str, Any],
             txn_id: str | None = None) -> str:
        """PUT one event with a transaction id (a new one unless given) -> its event id.  The
        same id again from the same device is the same event: the server deduplicates it."""
        path = f"{room_path(room_id)}/send/{quote(event_type, safe='')}/{quote(txn_id or txn(), safe='')}"
        return str(self.request("PUT", path, f"send {event_type}", json=content)["event_id"])

    def send_text(self, room_id: str, body: str, txn_id: str | None = None) -> str:
        return self.send(room_id, "m.room.message", {"msgtype": "m.text", "body": body}, txn_id)

    def upload(self, data: bytes, content_type: str, filename: str) -> str:
        """Puts a file in the homeserver's media repository -> its mxc:// URL."""
        found = self.request("POST", "/_matrix/media/v3/upload", f"upload {filename}",
                             params={"filename": filename}, content=data,
                             headers={"Content-Type": content_type})
        return str(found["content_uri"])

    def send_file(self, room_id: str, msgtype: str, url: str, body: str, *,
                  filename: str | None = None, info: dict[str, Any] | None = None) -> str:
        """An m.image / m.file event for an uploaded file (`filename` set: `body` is its
        caption, as Matrix 1.10 has it)."""
        content: dict[str, Any] = {"msgtype": msgtype, "body": body, "url": url,
                                   "info": info or {}}
        if filename is not None:
            content["filename"] = filename
        return self.send(room_id, "m.room.message", content)

    def edit(self, room_id: str, event_id: str, body: str, txn_id: str | None = None) -> str:
        """Replace the text of ``event_id`` (an m.replace edit, with the usual "* " fallback)."""
        content = {
            "msgtype": "m.text", "body": f"* {body}",
            "m.new_content": {"msgtype": "m.text", "body": body},
            "m.relates_to": {"rel_type": "m.replace", "event_id": event_id},
        }
        return self.send(room_id, "m.room.message", content, txn_id)

    def react(self, room_id: str, event_id: str, key: str, txn_id: str | None = None) -> str:
        content = {"m.relates_to": {"rel_type": "m.annotation", "event_id": event_id, "key": key}}
        return self.send(room_id, "m.reaction", content, txn_id)

    # --- reading ------------------------------------------------------------------------------

    def events(self, room_id: str) -> list[dict[str, Any]]:
        """Every event of the room's timeline from its creation on, oldest first (/messages
        forwards, page by page, until the server has nothing more)."""
        found: list[dict[str, Any]] = []
        params: dict[str, str] = {"dir": "f", "limit": str(PAGE)}
        while True:
            page = self.request("GET", f"{room_path(room_id)}/messages", "read messages",
                                params=params)
            found += page.get("chunk", [])
            end = page.get("end")
            if not page.get("chunk") or end is None:
                return found
            params["from"] = str(end)

    def messages(self, room_id: str) -> list[dict[str, Any]]:
        """All m.room.message events in timeline order, edits included (raw events)."""
        return [event for event in self.events(room_id) if event.get("type") == "m.room.message"]

    def reactions(self, room_id: str) -> list[dict[str, Any]]:
        """All m.reaction events in timeline order (raw events)."""
        return [event for event in self.events(room_id) if event.get("type") == "m.reaction"]

    def visible_messages(self, room_id: str) -> list[VisibleMessage]:
        return visible_messages(self.messages(room_id))


def replaced_id(event: dict[str, Any]) -> str | None:
    """The event id an m.replace edit replaces, or None when ``event`` is not an edit."""
    relation = event.get("content", {}).get("m.relates_to")
    if isinstance(relation, dict) and relation.get("rel_type") == "m.replace":
        target = relation.get("event_id")
        return target if isinstance(target, str) else None
    return None


def visible_messages(messages: list[dict[str, Any]]) -> list[VisibleMessage]:
    """The messages a person sees, from raw m.room.message events in timeline order: one per
    original, with the content of its latest edit (by origin_server_ts, then timeline order).
    As the Matrix spec requires of clients, an edit counts only when its sender is the
    original's sender and it carries ``m.new_content``: a stranger cannot rewrite a message."""
    originals = [event for event in messages if replaced_id(event) is None]
    by_id = {event["event_id"]: event for event in originals}
    edits: dict[str, list[tuple[int, int, dict[str, Any]]]] = {}
    for position, event in enumerate(messages):
        target = by_id.get(replaced_id(event) or "")
        new_content = event.get("content", {}).get("m.new_content")
        if target is None or event.get("sender") != target.get("sender") \
                or not isinstance(new_content, dict):
            continue
        edits.setdefault(target["event_id"], []).append(
            (int(event.get("origin_server_ts", 0)), position, event))
    seen = []
    for original in originals:
        its_edits = sorted(edits.get(original["event_id"], []), key=lambda item: item[:2])
        last = its_edits[-1][2] if its_edits else None
        content = dict(last["content"]["m.new_content"]) if last else dict(original["content"])
        seen.append(VisibleMessage(
            event_id=original["event_id"], sender=original["sender"],
            body=str(content.get("body", "")), content=content, edits=len(its_edits),
            last_edit_id=last["event_id"] if last else None))
    return seen


def wait_until(predicate: Callable[[], T], timeout: float = 20.0, interval: float = 0.1,
               what: str = "the condition") -> T:
    """Poll ``predicate`` until it returns something truthy, and return that; after ``timeout``
    seconds fail saying what was awaited and what the last poll returned."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}; "
                                 f"the last poll returned {value!r}")
        time.sleep(interval)


async def wait_until_async(predicate: Callable[[], T], timeout: float = 20.0,
                           interval: float = 0.1, what: str = "the condition") -> T:
    """``wait_until`` for async tests: each poll runs in a worker thread and the waits are
    asyncio sleeps, so the test's event loop (its wire connections to the backend) keeps
    running while the room is polled."""
    deadline = time.monotonic() + timeout
    while True:
        value = await asyncio.to_thread(predicate)
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}; "
                                 f"the last poll returned {value!r}")
        await asyncio.sleep(interval)
