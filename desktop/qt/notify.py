"""Desktop notifications over D-Bus (org.freedesktop.Notifications), for desktops without a tray.

GNOME and most Wayland desktops have no status area, but every one of them runs a
notification server on the session bus.  `DesktopNotifications` shows, replaces and
closes notifications there by a key of ours, and reports the buttons a person presses
(`invoked`: the key and the action's name, "default" for a click on the body).

The bus is spoken through jeepney on the asyncio (qasync) loop, not PySide6.QtDBus:
PySide6 6.12 cannot put a D-Bus `uint` into a message (a Python int goes out as `i`, or
as `q` through QDBusArgument), and Notify's `replaces_id` and CloseNotification's id are
`uint`s; servers reject the call.  jeepney is pure Python and already installed with
keyring on Linux.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import logging
from collections.abc import Sequence
from typing import Any

from jeepney import DBusAddress, HeaderFields, MatchRule, MessageType, new_method_call
from jeepney.bus_messages import message_bus
from jeepney.io.asyncio import DBusConnection, DBusRouter, open_dbus_connection
from PySide6.QtCore import QObject, Signal

from desktop.qt.compat import emit

log = logging.getLogger("ui")

SERVICE = "org.freedesktop.Notifications"
PATH = "/org/freedesktop/Notifications"
SERVER = DBusAddress(PATH, bus_name=SERVICE, interface=SERVICE)
CALL_TIMEOUT_S = 3.0  # a server that takes longer is treated as absent
URGENCY = {"low": 0, "normal": 1, "critical": 2}



def plain_body(text: str, markup: bool) -> str:
    """A body as plain text on a server that reads markup: the words in it are often the
    model's (a question, a command), and `<a href>` or `<img src="file://…">` in them must be
    shown, never followed or loaded."""
    return html.escape(text, quote=False) if markup else text

class BusError(Exception):
    """The session bus or the notification server failed or is not there (the reason as text)."""


class DesktopNotifications(QObject):
    """One connection to the session bus and the notifications shown through it.

    `await start()` first; it returns False (and nothing else works) when no server answers.
    Then `show`/`close` as often as needed, and `await stop()` at the end.  What is still
    shown stays (the server keeps it); close first what must not outlive the app.
    """

    invoked = Signal(str, str)  # key, action ("default" for a click on the notification itself)
    closed = Signal(str)  # key: the notification went away (dismissed, expired, closed by us)

    def __init__(self, app_name: str = "Turnkey", parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.app_name = app_name
        self.actions = False  # the server shows buttons (its capability "actions")
        self.markup = False  # the server reads the body as markup (its capability "body-markup")
        self.server = ""  # the server's name and version, for the log
        self._conn: DBusConnection | None = None
        self._router: DBusRouter | None = None
        self._listener: asyncio.Task[None] | None = None
        self._ids: dict[str, int] = {}  # our key -> the server's id
        self._pending: set[asyncio.Task[Any]] = set()

    @property
    def running(self) -> bool:
        return self._router is not None

    async def start(self) -> bool:
        """Connects and asks the server what it can do; False when there is no bus or no server."""
        try:
            self._conn = await asyncio.wait_for(open_dbus_connection("SESSION"), CALL_TIMEOUT_S)
            self._router = DBusRouter(self._conn)
            rule = MatchRule(type="signal", interface=SERVICE, path=PATH)
            await self._call(new_method_call(message_bus, "AddMatch", "s", (rule.serialise(),)))
            queue: asyncio.Queue[Any] = asyncio.Queue(256)
            handle = self._router.filter(rule, queue=queue)
            self._listener = asyncio.ensure_future(self._listen(queue, handle))
            (caps,) = await self._call(new_method_call(SERVER, "GetCapabilities"))
            self.actions = "actions" in caps
            self.markup = "body-markup" in caps
            with contextlib.suppress(BusError):
                self.server = " ".join(await self._call(new_method_call(SERVER, "GetServerInformation")))
        except (BusError, OSError, KeyError, ValueError, EOFError, StopIteration, TimeoutError) as exc:
            log.info("no desktop notifications: %s", exc or type(exc).__name__)
            await self.stop()
            return False
        log.info("desktop notifications through %s (buttons: %s)", self.server or "a server",
                 "yes" if self.actions else "no")
        return True

    def show(self, key: str, title: str, body: str, actions: Sequence[tuple[str, str]] = (),
             urgency: str = "normal", timeout_ms: int = -1) -> None:
        """Shows (or replaces) the notification `key`; `actions` are (name, label) pairs,
        dropped when the server has no buttons.  A click on the body always reports "default"."""
        pairs = [("default", "Open")]
        if self.actions:
            pairs += [a for a in actions if a[0] != "default"]
        flat = [s for pair in pairs for s in pair]
        body = plain_body(body, self.markup)
        hints = {"urgency": ("y", URGENCY[urgency]), "desktop-entry": ("s", "turnkey")}
        self._spawn(self._notify(key, title, body, flat, hints, timeout_ms))

    def close(self, key: str) -> None:
        """Takes the notification `key` away, if it is still shown."""
        nid = self._ids.pop(key, None)
        if nid is not None:
            self._spawn(self._call(new_method_call(SERVER, "CloseNotification", "u", (nid,))))

    def shown(self) -> list[str]:
        return list(self._ids)

    async def flush(self) -> None:
        """Waits for the calls already sent (before the app exits, so a last notice gets out)."""
        if self._pending:
            await asyncio.wait(list(self._pending), timeout=CALL_TIMEOUT_S)

    async def stop(self) -> None:
        """Sends what is pending, then closes the connection."""
        await self.flush()
        if self._listener is not None:
            self._listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._listener
            self._listener = None
        router, conn = self._router, self._conn
        self._router = self._conn = None
        if router is not None:
            with contextlib.suppress(Exception):
                await router.__aexit__(None, None, None)
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close()

    # --- the bus -------------------------------------------------------------------

    async def _notify(self, key: str, title: str, body: str, actions: list[str],
                      hints: dict[str, tuple[str, Any]], timeout_ms: int) -> None:
        replaces = self._ids.get(key, 0)
        (nid,) = await self._call(new_method_call(
            SERVER, "Notify", "susssasa{sv}i",
            (self.app_name, replaces, "turnkey", title, body, actions, hints, timeout_ms)))
        self._ids[key] = nid

    async def _call(self, message: Any) -> Any:
        """Sends a method call and returns the reply's body; BusError on an error or no reply."""
        if self._router is None:
            raise BusError("not connected to the session bus")
        try:
            reply = await asyncio.wait_for(self._router.send_and_get_reply(message), CALL_TIMEOUT_S)
        except TimeoutError:
            raise BusError("the notification server did not answer") from None
        except Exception as exc:  # jeepney's RouterClosed, a broken socket
            raise BusError(str(exc) or type(exc).__name__) from exc
        if reply.header.message_type == MessageType.error:
            name = reply.header.fields.get(HeaderFields.error_name, "error")
            raise BusError(f"{name}: {reply.body[0] if reply.body else ''}")
        return reply.body

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._pending.add(task)

        def done(t: asyncio.Task[Any]) -> None:
            self._pending.discard(t)
            if not t.cancelled() and t.exception() is not None:
                log.warning("desktop notification failed: %s", t.exception())

        task.add_done_callback(done)

    async def _listen(self, queue: asyncio.Queue[Any], handle: Any) -> None:
        with handle:
            while True:
                msg = await queue.get()
                member = msg.header.fields.get(HeaderFields.member)
                key = self._key_of(msg.body[0]) if msg.body else None
                if key is None:
                    continue  # another app's notification
                if member == "ActionInvoked":
                    emit(self.invoked, key, str(msg.body[1]))
                elif member == "NotificationClosed":
                    self._ids.pop(key, None)
                    emit(self.closed, key)

    def _key_of(self, nid: int) -> str | None:
        return next((k for k, v in self._ids.items() if v == nid), None)
