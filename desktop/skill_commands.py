"""`turnkey skill list|show|rm`: the agent's skills (SKILL.md folders) as the backend finds them.

The person's skills live in the data folder's `skills/`; a project's in its folder's
`.agents/skills/`, which the backend reaches through a session (`--session ID`): the
folder a session works in is the project it knows.
"""

from __future__ import annotations

import argparse

from desktop.commands import connected
from shared import protocol as p
from shared.client import Client
from shared.methods import SkillDelete, SkillGet, SkillList


def skill_lines(result: p.SkillsResult) -> list[str]:
    """`turnkey skill list`: one line per skill, its scope and state, then its description
    or its problem."""
    if not result.skills:
        where = f" nor in {result.project_folder}" if result.project_folder else ""
        return [f"no skills (none in the data folder's skills/{where})"]
    width = max(len(s.name) for s in result.skills)
    lines = []
    for s in result.skills:
        state = "problem" if s.problem else ("on" if s.enabled else "off")
        lines.append(f"{s.name:<{width}}  {s.scope:<7}  {state:<7}  {s.problem or s.description}")
    return lines


def detail_lines(detail: p.SkillDetail) -> list[str]:
    s = detail.skill
    head = [f"{s.name} ({s.scope}, {'on' if s.enabled else 'off'}) in {s.folder}",
            s.description, ""]
    files = ["", "Files:", *(f"  {f}" for f in detail.files)] if detail.files else []
    return [*head, *detail.body.rstrip("\n").split("\n"), *files]


@connected
async def run(client: Client, args: argparse.Namespace) -> int:
    if args.action == "list":
        print("\n".join(skill_lines(await client.call(SkillList(session_id=args.session)))))
        return 0
    scope: p.SkillScope = "project" if args.project else "user"
    if args.action == "show":
        detail = await client.call(SkillGet(name=args.name, scope=scope, session_id=args.session))
        print("\n".join(detail_lines(detail)))
        return 0
    await client.call(SkillDelete(name=args.name, scope=scope, session_id=args.session))
    print(f"removed {scope} skill {args.name}")
    return 0
