"""The `skill` tool (a skill's body and files, read without links) and `skill_manage` (its writes).

`skill` reads only inside the two skills folders (tools/skills.py), so it never asks.
`skill_manage` writes the person's folder without asking, like memory, and the project's
folder (`.agents/skills/` in the session folder) the way write_file does: judged by
`policy.file_guard` where the path really lands, asked in smart mode when that is outside
the session folder, checkpointed before the change (so undo and `session.changes` see it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from backend.tools import policy, skill_writes, skills
from backend.tools.base import Guard, ToolContext, ToolResult
from backend.tools.files import _FileChange
from backend.tools.filetool import error, ok, schema, text
from backend.tools.skill_writes import SkillRefused
from backend.tools.skills import SKILL_FILE, SkillScope, SkillUnsafe
from shared.config import ApprovalMode

SCOPE = {**text("Whose skill: 'user' (the user's own skills folder, the default) or 'project' "
                "(the session folder's .agents/skills)."), "enum": list(skills.SCOPES)}
CUT_NOTE = f"\n[... {SKILL_FILE} is longer than {skills.MAX_SKILL_BYTES:,} bytes and was cut here]"


def _scope(args: dict[str, Any]) -> SkillScope:
    return "project" if args.get("scope") == "project" else "user"


class SkillTool:
    """`skill`: loads one skill's instructions and lists the files beside them, or reads one."""

    name = "skill"
    spill = True
    changes_files = False
    description = (
        "Load a skill listed under 'Skills' in your context: its full instructions (SKILL.md) and "
        "the files in its folder. Pass file (a path from that list) to read one of them. scope "
        "picks the user's or the project's skill of that name; without it the user's wins. Project "
        "skills are files from the session folder: weigh them like any file there."
    )
    parameters = schema({
        "name": text("The skill's name, as the index lists it."),
        "scope": {**SCOPE, "description": "user or project; omit to take the user's skill if there is one."},
        "file": text("A file of the skill's folder to read, e.g. 'reference/api.md'."),
    }, ["name"])

    def summary(self, args: dict[str, Any]) -> str:
        extra = f" {args['file']}" if args.get("file") else ""
        return f"skill {args.get('name', '?')}{extra}"

    def guard(self, args: dict[str, Any], cwd: Path, mode: ApprovalMode, data_dir: Path) -> Guard | None:
        return None  # it reads only the skills folders, never through a link

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return await asyncio.to_thread(self._load, args, ctx)

    def _load(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        name = str(args["name"])
        scope = self._which(name, args.get("scope"), ctx)
        label = f"skill {name} ({scope})"
        try:
            loaded = skills.load(scope, name, ctx.data_dir, ctx.cwd)
            if loaded.skill.problem is not None:
                return error(f"{label} cannot be used: {loaded.skill.problem}")
            if loaded.skill.key in skills.disabled(ctx.data_dir):
                return error(f"{label} is turned off by the user; do without it")
            if args.get("file"):
                content, cut = skills.read_file(scope, name, str(args["file"]), ctx.data_dir, ctx.cwd)
                more = f"\n[... cut at {skills.MAX_FILE_BYTES:,} bytes]" if cut else ""
                return ok(content + more, f"read {args['file']} of {label}")
        except SkillUnsafe as exc:
            return error(f"refused: {label}: {exc}")
        except FileNotFoundError:
            return error(f"no {args.get('file') or 'such skill'} in {label}; the index in your "
                         "context lists the skills, a skill's listing its files")
        except (ValueError, OSError) as exc:
            return error(f"{label}: {exc}")
        return ok(_shown(loaded, scope), f"loaded {label}", scope=scope, files=len(loaded.files))

    @staticmethod
    def _which(name: str, asked: object, ctx: ToolContext) -> SkillScope:
        if asked in skills.SCOPES:
            return "project" if asked == "project" else "user"
        try:
            skills.load("user", name, ctx.data_dir, None)
        except SkillUnsafe:
            return "user"  # there, and refused when loaded
        except OSError:
            return "project"
        return "user"


def _shown(loaded: skills.Loaded, scope: SkillScope) -> str:
    name = loaded.skill.name
    where = ("from the user's skills folder" if scope == "user"
             else f"from the project's {skills.project_file(name)}: text from the project, not from the user")
    files = ("\n".join(f"- {f}" for f in loaded.files) if loaded.files else "(none)")
    return (f"Skill {name} ({where}). {loaded.skill.description}\n\n{loaded.body.rstrip()}"
            f"{CUT_NOTE if loaded.cut else ''}\n\nFiles beside {SKILL_FILE} (read one with the skill "
            f"tool's file argument):\n{files}")


class _ProjectSkillFile(_FileChange):
    """A project skill's SKILL.md changed through the file tools' machinery."""

    name = "skill_manage"
    verb = "write"


class SkillManage:
    """`skill_manage`: the agent writes a skill of its own, improves one, or deletes one."""

    name = "skill_manage"
    spill = False
    changes_files = True  # a project skill's change is checkpointed like write_file's
    description = (
        "Save what you learned as a reusable skill, improve one, or delete one. A skill is "
        "instructions for a kind of task (a SKILL.md with a one-line description that says when "
        "to use it); the index of names and descriptions is in your context from the next turn. "
        "action 'create' needs name, description and body; 'update' replaces description and/or "
        "body; 'delete' removes it. scope 'user' (default) is the user's own skills folder, "
        "written without asking; 'project' is the session folder's .agents/skills, changed like "
        "any project file (the user may be asked). Names: a-z, 0-9 and -, at most 64. Never put "
        "secrets in a skill."
    )
    parameters = schema({
        "action": {**text("create, update or delete."), "enum": ["create", "update", "delete"]},
        "name": text("The skill's name: a-z, 0-9 and -, 1 to 64 characters."),
        "description": text("One line: what the skill does and when to use it."),
        "body": text("The instructions (markdown), without front matter."),
        "scope": SCOPE,
    }, ["action", "name"])

    def __init__(self) -> None:
        self._project = _ProjectSkillFile()
        # Called after each change: (name, scope, skills folder); the backend announces it.
        self.changed: Callable[[str, SkillScope, str], None] = lambda name, scope, folder: None

    def summary(self, args: dict[str, Any]) -> str:
        return f"skill_manage {args.get('action', '?')} {args.get('name', '?')} ({_scope(args)})"

    def guard(self, args: dict[str, Any], cwd: Path, mode: ApprovalMode, data_dir: Path) -> Guard | None:
        if _scope(args) == "user":
            return None  # the agent's own folder, like its memory
        name = str(args.get("name", ""))
        if not skills.valid_name(name):
            return None  # run refuses it without touching anything
        return policy.file_guard(self.name, skills.project_file(name), cwd, mode, data_dir)

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        result = await self._run(args, ctx)
        if result.status == "ok":  # readers (the settings' Skills page) list it again
            scope = _scope(args)
            self.changed(str(args["name"]), scope, skills.folder_of(scope, ctx.data_dir, ctx.cwd))
        return result

    async def _run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        action, name = str(args["action"]), str(args["name"])
        desc, body = args.get("description"), args.get("body")
        if not skills.valid_name(name):
            return error(f"{name!r} is not a skill name: 1 to 64 of a-z, 0-9 and -, not starting or "
                         "ending with -")
        if action == "create" and (desc is None or body is None):
            return error("action 'create' needs 'description' and 'body'")
        if action not in ("create", "update", "delete"):
            return error(f"argument 'action' must be create, update or delete, got {action!r}")
        if _scope(args) == "project":
            return await self._in_project(action, name, desc, body, ctx)
        try:
            await asyncio.to_thread(_in_user, action, name, desc, body, ctx.data_dir)
        except SkillRefused as exc:
            return error(str(exc))
        except SkillUnsafe as exc:
            return error(f"refused: {exc}")
        except FileNotFoundError:
            return error(f"there is no skill {name!r} in the user's folder")
        except OSError as exc:
            return error(f"could not save skill {name!r}: {exc.strerror or exc}")
        done = {"create": "created", "update": "updated", "delete": "deleted"}[action]
        return ok(f"{done} skill {name} in the user's skills folder; the index shows it from the "
                  "next turn.", f"skill {name} {done} (user)", scope="user")

    async def _in_project(self, action: str, name: str, desc: object, body: object,
                          ctx: ToolContext) -> ToolResult:
        path = skills.project_file(name)
        if action == "delete":
            return await self._project.remove(path, ctx)

        def edit(old: bytes | None, label: str) -> tuple[bytes, str] | ToolResult:
            try:
                if action == "create":
                    if old is not None:
                        return error(f"a skill {name!r} exists already in the project; use 'update'")
                    content = skill_writes.compose(name, str(desc), str(body))
                else:
                    if old is None:
                        return error(f"there is no project skill {name!r}; use 'create'")
                    content = skill_writes.updated(
                        name, old.decode("utf-8", "replace"),
                        None if desc is None else str(desc), None if body is None else str(body))
            except SkillRefused as exc:
                return error(str(exc))
            return content.encode(), f"skill {name}"

        return await self._project.change(path, ctx, edit)


def _in_user(action: str, name: str, desc: object, body: object, data_dir: Path) -> None:
    if action == "delete":
        skill_writes.remove("user", name, data_dir, None)
        return
    if action == "create":
        skill_writes.write_user(data_dir, name, skill_writes.compose(name, str(desc), str(body)),
                                create=True)
        return
    current = skill_writes.read_user(data_dir, name)
    if current is None:
        raise SkillRefused(f"there is no skill {name!r} to update; use action 'create'")
    new = skill_writes.updated(name, current, None if desc is None else str(desc),
                               None if body is None else str(body))
    skill_writes.write_user(data_dir, name, new, create=False)
