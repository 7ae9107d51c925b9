"""`turnkey backends`: the backend processes on the store of the backend it talks to (this
computer's, or with --remote another one), as a table, or with --json as `backend.list`
answered (for scripts), then this backend's fleet counters from backend.stats.  Needs a
token with the admin scope."""

from __future__ import annotations

import argparse

import msgspec

from desktop.commands import connected
from desktop.state.fleet import table
from shared.client import Client
from shared.methods import BackendList, BackendStats


@connected
async def run(client: Client, args: argparse.Namespace) -> int:
    result = await client.call(BackendList(all=args.all))
    if args.json:
        print(msgspec.json.format(msgspec.json.encode(result), indent=2).decode())
        return 0
    print(table(result))
    fleet = (await client.call(BackendStats())).fleet
    print(f"this backend since it started: {fleet.takeovers} turns taken over from others, "
          f"{fleet.fenced_writes} writes of its own refused after a takeover")
    return 0
