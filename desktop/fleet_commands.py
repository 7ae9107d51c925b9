"""`turnkey backends`: the backend processes on the store of the backend it talks to (this
computer's, or with --remote another one), as a table, or with --json as `backend.list`
answered (for scripts).  Needs a token with the admin scope."""

from __future__ import annotations

import argparse

import msgspec

from desktop.commands import connected
from desktop.state.fleet import table
from shared.client import Client
from shared.methods import BackendList


@connected
async def run(client: Client, args: argparse.Namespace) -> int:
    result = await client.call(BackendList(all=args.all))
    if args.json:
        print(msgspec.json.format(msgspec.json.encode(result), indent=2).decode())
    else:
        print(table(result))
    return 0
