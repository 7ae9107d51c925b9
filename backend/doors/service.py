"""A door as a settings form sees it: `door.test` (the homeserver and the access token checked
for real, nothing saved) and `door.set` (the door's `[doors.NAME]` table in config.toml, its
token in the keyring, then the door started again at once).

The token goes to the keyring (or the 0600 secrets file) as the door's secret, never into
config.toml, the store, an event or a log line; a stored token is sent only to the homeserver
its door was saved with, as a provider's stored key goes only where its provider was saved to
send it (`backend/providers/service.py`).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from backend.authority import loosening
from backend.config import ConfigFile
from backend.doors.manager import Doors
from backend.errors import InvalidParams
from backend.secrets import Secrets, checked
from shared import protocol as p
from shared.config import MatrixDoorConfig, fields

TOKEN_STAYS = ("The saved access token is sent only to the homeserver it was saved for. Paste "
               "the token in the form to test another homeserver, or save the door first.")
NO_TOKEN = "No access token is stored for this door yet: paste the account's token."
DEFAULT_SECRET = str(fields(MatrixDoorConfig)["access_token_secret"].default)


class DoorService:
    def __init__(self, config: ConfigFile, secrets: Secrets, doors: Doors | None) -> None:
        self.config = config
        self.secrets = secrets
        self.doors = doors

    async def test(self, params: p.DoorTestParams) -> p.DoorTestResult:
        """One check of a form's values (saved or not); a failure is the answer, not an error."""
        homeserver = homeserver_url(params.homeserver, "homeserver")
        user_id = params.user_id.strip()
        _check_user(user_id, "user_id")
        if params.access_token is not None:
            token = checked(params.access_token, "access_token")
        else:
            saved = self._saved(params.name)
            if saved is None:
                raise InvalidParams("access_token", NO_TOKEN)
            if homeserver_url(saved.homeserver, "homeserver") != homeserver:
                return p.DoorTestResult(ok=False, reached=False, error=TOKEN_STAYS)
            stored = await asyncio.to_thread(self.secrets.get, saved.access_token_secret)
            if not stored:
                return p.DoorTestResult(ok=False, reached=False, error=NO_TOKEN)
            token = stored
        from backend.doors import matrix_check  # httpx: loaded on the first test, not at start

        return await matrix_check.check(homeserver, user_id, token)

    def loosened(self, params: p.DoorSetParams) -> list[str]:
        """What `door.set` would loosen (`doors.NAME`): a new or re-enabled door, another
        account, homeserver or token, more allowed users.  Validates the params first."""
        found = loosening.of_patch(self.config, self._patch(params))
        door = f"doors.{params.name}"
        if params.access_token is not None and params.enabled and door not in found:
            found.append(door)  # another token is another account's power
        return found

    async def set(self, params: p.DoorSetParams) -> p.DoorSetResult:
        """Stores the token (when sent), writes the door's table, starts the door again."""
        patch = self._patch(params)
        saved = self._saved(params.name)
        secret = saved.access_token_secret if saved is not None else DEFAULT_SECRET
        token = checked(params.access_token, "access_token") if params.access_token is not None \
            else None
        if token is None and not await asyncio.to_thread(self.secrets.get, secret):
            raise InvalidParams("access_token", NO_TOKEN)
        self.config.preview(patch)  # refused before anything is stored
        stored = await self.secrets.store(secret, token) if token is not None else None
        self.config.patch(patch)
        status = None
        if self.doors is not None:
            await self.doors.apply(self.config.config, secret=secret if token is not None else None)
            status = next((s for s in await self.doors.statuses() if s.name == params.name), None)
        if status is None:  # disabled (or no door manager): as configured, not running
            status = p.DoorStatus(name=params.name, platform=params.name, state="stopped",
                                  account=params.user_id.strip(), since=time.time(),
                                  allowed_users=sorted(set(params.allowed_users)),
                                  token_secret=secret)
        return p.DoorSetResult(door=status, stored=stored.stored if stored else None,
                               warning=stored.warning if stored else None)

    def _saved(self, name: str) -> MatrixDoorConfig | None:
        found = getattr(self.config.config.doors, name, None)
        return found if isinstance(found, MatrixDoorConfig) else None

    def _patch(self, params: p.DoorSetParams) -> dict[str, Any]:
        """The config.set patch `params` make: the form's keys over the door's saved table."""
        homeserver = homeserver_url(params.homeserver, "homeserver")
        _check_user(params.user_id, "user_id")
        allowed: list[str] = []
        for i, user in enumerate(params.allowed_users):
            user = user.strip()
            _check_user(user, f"allowed_users.{i}")
            if user not in allowed:
                allowed.append(user)
        table = {"homeserver": homeserver, "user_id": params.user_id.strip(),
                 "allowed_users": allowed, "enabled": params.enabled}
        return {"doors": {params.name: table}}


def homeserver_url(raw: str, field: str) -> str:
    """A homeserver's URL as kept: trimmed, without a trailing slash; http(s) with a host."""
    url = raw.strip().rstrip("/")
    scheme, sep, rest = url.partition("://")
    if scheme not in ("http", "https") or not sep or not rest or any(c.isspace() for c in url):
        raise InvalidParams(field, "give the homeserver's URL, starting with https:// "
                            "(e.g. https://matrix.org)")
    return url


def _check_user(user_id: str, field: str) -> None:
    from backend.doors import matrix_check

    problem = matrix_check.user_id_problem(user_id.strip())
    if problem is not None:
        raise InvalidParams(field, problem)
