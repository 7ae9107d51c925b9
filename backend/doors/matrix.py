"""The Matrix platform for the door, over matrix-nio's asyncio client.

The door's account is a Matrix user with an access token (kept in the keyring, never in
config.toml); every message is sent from that token's one device, because Matrix
deduplicates a transaction id per device: a repeat after a crash or an outage returns
the first event instead of posting a second.  Text goes as Markdown in `body` and as
HTML in `formatted_body` (raw HTML in the model's text is escaped, never passed on).
Edits are `m.replace` relations.  Encrypted rooms are not supported: their messages
cannot be read without the end-to-end keys, and the door says so in the room.

Images and files (`m.image`, `m.file`, and `m.audio`/`m.video`, refused by the door) are
downloaded from the homeserver's authenticated media API, streamed and cut off at the
door's limit: matrix-nio's `download` reads a whole body into memory whatever its size.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any
from urllib.parse import quote, urlsplit

from markdown_it import MarkdownIt

from backend.doors.base import Batch, File, Invite, Message, Reaction, TooLarge, TransportError
from shared.uploads import attachment_name

log = logging.getLogger("doors")

POLL_MS = 25_000  # the sync long-poll
REQUEST_TIMEOUT_S = 45.0  # longer than the long-poll
MAX_EVENT_BYTES = 60_000  # Matrix refuses events over 65,536 bytes
DOWNLOAD_TIMEOUT_S = 300.0  # a whole file (32 MiB over a slow link)
FILE_TYPES = ("m.image", "m.file", "m.audio", "m.video")
_md = MarkdownIt("commonmark", {"html": False, "linkify": False})
# Only what the door reads: messages, reactions and membership; no presence or receipts.
SYNC_FILTER: dict[str, Any] = {
    "presence": {"types": []},
    "account_data": {"types": []},
    "room": {
        "timeline": {"types": ["m.room.message", "m.reaction", "m.room.encrypted"], "limit": 100},
        "state": {"types": ["m.room.name", "m.room.member"], "lazy_load_members": True},
        "ephemeral": {"types": []},
        "account_data": {"types": []},
    },
}


class MatrixTransport:
    platform = "matrix"

    def __init__(self, homeserver: str, user_id: str, token: str, device_id: str | None) -> None:
        from nio import AsyncClient, AsyncClientConfig  # loaded only when a door is configured

        self.account = user_id
        self.homeserver = homeserver
        config = AsyncClientConfig(max_timeouts=0, request_timeout=REQUEST_TIMEOUT_S,
                                   store_sync_tokens=False, encryption_enabled=False)
        self._client = AsyncClient(homeserver, user_id, device_id=device_id or "", config=config)
        self._client.access_token = token
        self._client.user_id = user_id
        self._device = device_id

    async def connect(self) -> None:
        from nio import WhoamiResponse

        resp = await self._call(self._client.whoami())
        if not isinstance(resp, WhoamiResponse):
            raise TransportError(_refused(resp, f"{self.homeserver} did not accept the access token"))
        if resp.user_id != self.account:
            raise TransportError(
                f"the access token belongs to {resp.user_id}, not {self.account}: set user_id "
                "in [doors.matrix] or store this account's token")
        if resp.device_id and not self._device:
            self._client.device_id = resp.device_id

    async def poll(self, cursor: str | None) -> Batch:
        from nio import SyncResponse

        resp = await self._call(self._client.sync(
            timeout=POLL_MS if cursor else 0, since=cursor, sync_filter=SYNC_FILTER,
            full_state=cursor is None))
        if not isinstance(resp, SyncResponse):
            raise TransportError(_refused(resp, f"{self.homeserver} refused to sync"))
        batch = Batch(cursor=resp.next_batch, first=cursor is None)
        for room_id, invite in resp.rooms.invite.items():
            inviter = _inviter(invite.invite_state, self.account)
            if inviter:
                batch.invites.append(Invite(room_id, inviter))
        for room_id, info in resp.rooms.join.items():
            for event in list(info.state) + list(info.timeline.events):
                name = _room_name(event)
                if name:
                    batch.room_names[room_id] = name
            for event in info.timeline.events:
                item = _item(room_id, event)
                if item is not None:
                    batch.items.append(item)
        return batch

    async def send(self, room_id: str, txn_id: str, text: str, *, notice: bool = False) -> str:
        return await self._send(room_id, txn_id, _content(text, notice))

    async def edit(self, room_id: str, target: str, txn_id: str, text: str, *,
                   notice: bool = False) -> str:
        new = _content(text, notice)
        content: dict[str, Any] = {
            "msgtype": new["msgtype"], "body": f"* {new['body']}", "m.new_content": new,
            "m.relates_to": {"rel_type": "m.replace", "event_id": target},
        }
        if "formatted_body" in new:
            content["format"] = new["format"]
            content["formatted_body"] = f"* {new['formatted_body']}"
        if len(json.dumps(content).encode()) > MAX_EVENT_BYTES:
            for part in (content, new):
                part.pop("format", None)
                part.pop("formatted_body", None)
        return await self._send(room_id, txn_id, content)

    async def download(self, url: str, limit: int) -> bytes:
        """The bytes at `url` (mxc://SERVER/MEDIA), through the homeserver, with the token
        in a header (never in the URL, which proxies log)."""
        import aiohttp

        server, media = _mxc(url)
        path = f"{quote(server, safe='')}/{quote(media, safe='')}"
        headers = {"Authorization": f"Bearer {self._client.access_token}"}
        timeout = aiohttp.ClientTimeout(total=DOWNLOAD_TIMEOUT_S)
        try:
            async with aiohttp.ClientSession(timeout=timeout) as http:
                # The authenticated media API (Matrix 1.11); the older one for a homeserver
                # that does not know it.
                for api in ("_matrix/client/v1/media/download", "_matrix/media/v3/download"):
                    async with http.get(f"{self.homeserver}/{api}/{path}", headers=headers,
                                        allow_redirects=True) as resp:
                        if resp.status in (404, 405) and api.startswith("_matrix/client") \
                                and await _unrecognized(resp):
                            continue
                        if resp.status != 200:
                            raise TransportError(
                                f"{self.homeserver} did not serve the file ({resp.status} "
                                f"{(await resp.text())[:200]})")
                        if (resp.content_length or 0) > limit:
                            raise TooLarge(resp.content_length)
                        data = bytearray()
                        async for chunk in resp.content.iter_chunked(256 * 1024):
                            data += chunk
                            if len(data) > limit:
                                raise TooLarge(len(data))
                        return bytes(data)
        except (TransportError, TooLarge):
            raise
        except Exception as exc:  # aiohttp's errors, timeouts
            raise TransportError(f"cannot download from {self.homeserver}: {_reason(exc)}") from None
        raise TransportError(f"{self.homeserver} has no media download API")

    async def join(self, room_id: str) -> None:
        from nio import JoinResponse

        resp = await self._call(self._client.join(room_id))
        if not isinstance(resp, JoinResponse):
            raise TransportError(_refused(resp, f"could not join {room_id}"))

    async def leave(self, room_id: str) -> None:
        await self._call(self._client.room_leave(room_id))

    async def close(self) -> None:
        await self._client.close()

    async def _send(self, room_id: str, txn_id: str, content: dict[str, Any]) -> str:
        from nio import RoomSendResponse

        resp = await self._call(self._client.room_send(
            room_id, "m.room.message", content, tx_id=txn_id, ignore_unverified_devices=True))
        if not isinstance(resp, RoomSendResponse):
            raise TransportError(_refused(resp, f"could not post to {room_id}"))
        log.debug("posted %s to %s as %s", txn_id, room_id, resp.event_id)
        return str(resp.event_id)

    async def _call(self, request: Any) -> Any:
        """Runs a client request; a network failure becomes a TransportError naming the
        homeserver (never the token)."""
        try:
            return await request
        except TransportError:
            raise
        except Exception as exc:  # aiohttp's errors, timeouts, nio's protocol errors
            raise TransportError(f"cannot reach {self.homeserver}: {_reason(exc)}; retrying") from None


def _mxc(url: str) -> tuple[str, str]:
    """An mxc:// URL's server and media id; TransportError for anything else."""
    parts = urlsplit(url)
    media = parts.path.lstrip("/")
    if parts.scheme != "mxc" or not parts.netloc or not media or "/" in media:
        raise TransportError(f"not a Matrix media URL: {url[:100]!r}")
    return parts.netloc, media


async def _unrecognized(resp: Any) -> bool:
    """A homeserver's answer for an endpoint it does not have (M_UNRECOGNIZED)."""
    try:
        body = await resp.json(content_type=None)
    except Exception:  # not JSON: a proxy's page
        return False
    return isinstance(body, dict) and body.get("errcode") == "M_UNRECOGNIZED"


def _reason(exc: BaseException) -> str:
    """Why a request failed, in words: the system's for a refused or unroutable connection."""
    os_error = getattr(exc, "os_error", None)
    if isinstance(os_error, OSError) and os_error.errno:
        return os.strerror(os_error.errno).lower()
    if isinstance(exc, TimeoutError):
        return f"no answer within {REQUEST_TIMEOUT_S:g} s"
    text = str(exc)
    return f"{type(exc).__name__}: {text[:200]}" if text else type(exc).__name__


def _content(text: str, notice: bool) -> dict[str, Any]:
    content: dict[str, Any] = {"msgtype": "m.notice" if notice else "m.text", "body": text}
    html = _md.render(text).strip()
    if html and html != f"<p>{_escape(text)}</p>":
        content["format"] = "org.matrix.custom.html"
        content["formatted_body"] = html
    return content


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def _item(room_id: str, event: Any) -> Message | File | Reaction | None:
    source = getattr(event, "source", None) or {}
    kind = source.get("type")
    content = source.get("content") or {}
    sender = source.get("sender") or getattr(event, "sender", "")
    event_id = source.get("event_id") or getattr(event, "event_id", "")
    if not sender or not event_id:
        return None
    relates = content.get("m.relates_to") or {}
    if kind == "m.reaction":
        if relates.get("rel_type") != "m.annotation" or not relates.get("event_id"):
            return None
        return Reaction(room_id, event_id, sender, str(relates["event_id"]), str(relates.get("key", "")))
    if kind == "m.room.encrypted":
        return Message(room_id, event_id, sender, "", None, encrypted=True)  # the door says so
    if kind != "m.room.message" or relates.get("rel_type") == "m.replace":
        return None  # an edit of an earlier message is not a new prompt
    if content.get("msgtype") in FILE_TYPES:
        return _file(room_id, event_id, sender, content)
    if content.get("msgtype") not in ("m.text", "m.notice", "m.emote"):
        return None
    body = content.get("body")
    if not isinstance(body, str):
        return None
    reply_to = (relates.get("m.in_reply_to") or {}).get("event_id")
    if reply_to:
        body = _strip_reply_fallback(body)
    return Message(room_id, event_id, sender, body, reply_to if isinstance(reply_to, str) else None)


def _file(room_id: str, event_id: str, sender: str, content: dict[str, Any]) -> File:
    """An image or file event.  Since Matrix 1.10 `filename` names the file and a `body`
    that differs from it is the caption; before, `body` was the name alone."""
    body, filename = _text(content, "body"), _text(content, "filename")
    caption = body if filename and body != filename else ""
    raw_info = content.get("info")
    info: dict[str, Any] = raw_info if isinstance(raw_info, dict) else {}
    size = info.get("size")
    url = _text(content, "url")  # an encrypted file has `file` (its keys) instead
    return File(room_id, event_id, sender, attachment_name(filename or body or "file"), caption,
                url or None, _text(info, "mimetype") or None,
                size if isinstance(size, int) and not isinstance(size, bool) else None,
                _text(content, "msgtype"))


def _text(content: dict[str, Any], key: str) -> str:
    value = content.get(key)
    return value if isinstance(value, str) else ""


def _strip_reply_fallback(body: str) -> str:
    """A reply's body quotes the message it answers in lines starting `> `, then a blank
    line: the person's own text is what follows."""
    lines = body.split("\n")
    i = 0
    while i < len(lines) and lines[i].startswith(">"):
        i += 1
    if i and i < len(lines) and lines[i] == "":
        i += 1
    return "\n".join(lines[i:]) if i else body


def _inviter(state: list[Any], me: str) -> str | None:
    """Who invited us, from the invitation's stripped state (nio keeps the membership as an
    attribute of its InviteMemberEvent, not in `source`)."""
    for event in state:
        if getattr(event, "state_key", None) == me and getattr(event, "membership", None) == "invite":
            sender = getattr(event, "sender", None)
            return str(sender) if sender else None
    return None


def _room_name(event: Any) -> str | None:
    source = getattr(event, "source", None) or {}
    if source.get("type") == "m.room.name":
        name = (source.get("content") or {}).get("name")
        return str(name) if name else None
    return None


def _refused(resp: Any, what: str) -> str:
    code = getattr(resp, "status_code", None)
    message = getattr(resp, "message", None)
    if code == "M_UNKNOWN_TOKEN":
        return (f"{what}: the access token is not valid (revoked or logged out); store a new "
                "one with `turnkey secret set` under the name in access_token_secret")
    return f"{what}: {code or 'error'} {message or ''}".strip()
