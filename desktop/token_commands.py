"""`turnkey token create|list|revoke`: pairing another computer with this backend.

`create` mints a scoped token (the `token.create` method, owner only, so it talks to the
folder's own backend) and prints it as a connection string, the one thing a person copies
to the other computer: `turnkey://HOST:PORT?token=SECRET&fp=SHA256` (shared/remote.py).
"""

from __future__ import annotations

import argparse
import sys

from desktop.commands import connected
from shared import protocol as p
from shared.client import Client
from shared.launcher import BackendInfo
from shared.methods import TokenCreate, TokenList, TokenRevoke
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
    return await _create(client, args)


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
    scopes = [s.strip() for s in args.scopes.split(",") if s.strip()]
    made = await client.call(TokenCreate(scopes=scopes, label=args.label))  # the backend checks each scope
    target = RemoteTarget(host, args.port or info.port, made.token, info.tls_fingerprint)
    print(target.connection_string())
    print(f"token {made.token_id} ({', '.join(made.scopes)}) for {made.label!r}: the string above "
          "is shown only now; revoke it with `turnkey token revoke "
          f"{made.token_id}`", file=sys.stderr)
    return 0


def _print_list(result: p.TokensResult) -> int:
    if not result.tokens:
        print("no tokens (pair a computer: turnkey token create --scopes read,submit --label NAME)")
        return 0
    for t in result.tokens:
        state = f"revoked {t.revoked_at[:19]}" if t.revoked and t.revoked_at else "active"
        print(f"{t.token_id}  {state:<27} {','.join(t.scopes):<28} {t.label}")
    return 0
