"""`turnkey schedule create|list|update|delete`: scheduled prompts from the command line."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from pathlib import Path

from desktop.commands import connected
from desktop.state.schedules import next_words, repeat_words, when_words
from shared import protocol as p
from shared.client import Client
from shared.methods import ScheduleCreate, ScheduleDelete, ScheduleList, ScheduleUpdate


@connected
async def run(client: Client, args: argparse.Namespace) -> int:
    if args.action == "list":
        return _print_list((await client.call(ScheduleList())).schedules)
    if args.action == "delete":
        await client.call(ScheduleDelete(schedule_id=args.schedule_id))
        print(f"deleted {args.schedule_id}")
        return 0
    schedule = await (_create(client, args) if args.action == "create" else _update(client, args))
    print(_line(schedule, datetime.now(UTC)))
    return 0


async def _create(client: Client, args: argparse.Namespace) -> p.Schedule:
    new = None
    if args.new:
        cwd = (args.cwd or Path.cwd()).expanduser().resolve()
        new = p.NewSessionSpec(title=args.title, cwd=str(cwd), model=args.model)
    request = ScheduleCreate(
        text=args.text, session_id=args.session, new_session=new, cron=args.cron, at=args.at,
        timezone=args.timezone, missed=args.missed or "run_once",
    )
    return (await client.call(request)).schedule


async def _update(client: Client, args: argparse.Namespace) -> p.Schedule:
    request = ScheduleUpdate(
        schedule_id=args.schedule_id, text=args.text, cron=args.cron, at=args.at,
        timezone=args.timezone, missed=args.missed, enabled=args.enabled,
    )
    return (await client.call(request)).schedule


def _print_list(schedules: list[p.Schedule]) -> int:
    if not schedules:
        print('no schedules (create one: turnkey schedule create --new --cron "0 9 * * 1-5" TEXT)')
        return 0
    now = datetime.now(UTC)
    for s in schedules:
        print(_line(s, now))
    return 0


def _line(s: p.Schedule, now: datetime) -> str:
    """One schedule: id, next run, repeat, where, the prompt's start, and its last run."""
    where = s.session_id or "new session"
    text = " ".join(s.text.split())
    text = text if len(text) <= 50 else text[:49] + "…"
    last = f"  last: {when_words(s.last_fired_at, now)} ({s.last_session_id})" if s.last_fired_at else ""
    return (f"{s.schedule_id}  next: {next_words(s, now)}  {repeat_words(s)} ({s.timezone})  "
            f"in {where}  {text!r}{last}")
