"""`turnkey token create|list|scopes|revoke`: pairing another computer with this backend.

`create` mints a scoped token (the `token.create` method, owner only, so it talks to the
folder's own backend) and prints it as a connection string, the one thing a person copies
to the other computer: `turnkey://HOST:PORT?token=SECRET&fp=SHA256` (shared/remote.py).
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from typing import Any

from desktop.commands import connected
from shared import protocol as p
from shared.client import Client
from shared.launcher import BackendInfo
from shared.methods import TokenCreate, TokenList, TokenRevoke, TokenUpdate
from shared.remote import RemoteTarget, is_loopback

WILDCARDS = ("", "0.0.0.0", "::")


def pairing_host(info: BackendInfo, given: str | None) -> str | None:
    """The host the other computer should dial: --host, else where the backend listens;
    None when it listens on every address (which one the other computer reaches is
    not knowable here)."""
    if given:
        return given
    return None if info.host in WILDCARDS else info.host


@connected
async def run(client: Client, args: argparse.Namespace) -> int:
    if args.action == "list":
        return _print_list(await client.call(TokenList()))
    if args.action == "revoke":
        await client.call(TokenRevoke(token_id=args.token_id))
        print(f"revoked {args.token_id}; its open connections are closed")
        return 0
    if args.action == "scopes":
        changed = await client.call(TokenUpdate(token_id=args.token_id,
                                                scopes=_scopes(args.scopes)))
        print(f"{changed.token.token_id} now has {', '.join(changed.token.scopes)}; its open "
              "connections are closed and reconnect with these")
        return 0
    return await _create(client, args)


def _scopes(text: str) -> list[Any]:
    """The comma-separated scopes as given, unchecked: the backend checks each (-32602 names
    a bad one)."""
    return [s.strip() for s in text.split(",") if s.strip()]


async def _create(client: Client, args: argparse.Namespace) -> int:
    info = BackendInfo.read(client.data_dir)
    if info is None:  # connected a moment ago, so it is being restarted
        print("turnkey: the backend's backend.json is gone; try again", file=sys.stderr)
        return 1
    host = pairing_host(info, args.host)
    if host is None:
        print(f"turnkey: the backend listens on every address ({info.host}); say which one the "
              "other computer reaches with --host HOST", file=sys.stderr)
        return 2
    if not info.tls_fingerprint and not is_loopback(host):
        print(f"turnkey: this backend serves plain ws on {info.host}, which only this computer "
              "reaches; to pair another one, run it with `turnkey backend serve --listen "
              "HOST:PORT` (TLS)", file=sys.stderr)
        return 2
    made = await client.call(TokenCreate(scopes=_scopes(args.scopes), label=args.label,
                                         expires_in_s=args.expires_in))
    target = RemoteTarget(host, args.port or info.port, made.token, info.tls_fingerprint)
    print(target.connection_string())
    until = f", until {_shown(made.expires_at)}" if made.expires_at else ""
    print(f"token {made.token_id} ({', '.join(made.scopes)}) for {made.label!r}{until}: the "
          "string above is shown only now; revoke it with `turnkey token revoke "
          f"{made.token_id}`", file=sys.stderr)
    return 0


def _print_list(result: p.TokensResult) -> int:
    if not result.tokens:
        print("no tokens (pair a computer: turnkey token create --scopes read,submit --label NAME)")
        return 0
    for t in result.tokens:
        print(f"{t.token_id}  {state(t):<27} {','.join(t.scopes):<28} {t.label}")
    return 0


def state(token: p.TokenInfo, at: datetime | None = None) -> str:
    """A token's state in `list`: revoked (when), expired (when), expiring (when) or active."""
    if token.revoked:
        return f"revoked {_shown(token.revoked_at)}" if token.revoked_at else "revoked"
    if token.expires_at is None:
        return "active"
    expired = _instant(token.expires_at) <= (at or datetime.now(UTC))
    return f"{'expired' if expired else 'expires'} {_shown(token.expires_at)}"


def _instant(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def _shown(stamp: str) -> str:
    """An RFC 3339 UTC stamp to the second, as the list shows it (UTC)."""
    return stamp[:19]
