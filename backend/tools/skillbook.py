"""The skills as `skill.list`, `skill.get`, `skill.set_enabled` and `skill.delete` see them (the
settings' Skills page, `turnkey skill`): the same folders and refusals as the `skill` tool's."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from backend.errors import EnvironmentFault, NotFound
from backend.store import sessions
from backend.store.db import Database
from backend.tools import skill_writes, skills
from backend.tools.skills import Skill, SkillScope, SkillUnsafe
from shared import protocol as p


class Skillbook:
    def __init__(self, db: Database, data_dir: Path,
                 changed: Callable[[str, SkillScope, str], None] = lambda n, s, f: None) -> None:
        self.db, self.data_dir = db, data_dir
        self.changed = changed  # (name, scope, skills folder) after a change: announced

    async def listing(self, session_id: str | None) -> p.SkillsResult:
        cwd = await self._cwd(session_id, "user")

        def read() -> p.SkillsResult:
            off = skills.disabled(self.data_dir)
            found = skills.found(self.data_dir, cwd)
            folder = None if cwd is None else str(Path(cwd, *skills.PROJECT_PARTS))
            return p.SkillsResult(skills=[_info(s, off) for s in found], project_folder=folder)

        return await asyncio.to_thread(read)

    async def get(self, params: p.SkillParams | p.SkillEnableParams) -> p.SkillDetail:
        cwd = await self._cwd(params.session_id, params.scope)

        def read() -> p.SkillDetail:
            try:
                loaded = skills.load(params.scope, params.name, self.data_dir, cwd)
            except FileNotFoundError:
                raise NotFound("skill", params.name) from None
            except SkillUnsafe as exc:
                raise EnvironmentFault(f"skill {params.name!r} is not read: {exc}") from None
            return p.SkillDetail(skill=_info(loaded.skill, skills.disabled(self.data_dir)),
                                 body=loaded.body, files=list(loaded.files))

        return await asyncio.to_thread(read)

    async def set_enabled(self, params: p.SkillEnableParams) -> p.SkillDetail:
        """A person's choice, kept in DIR/skills.json: a disabled skill leaves the index from
        the next turn on, and the `skill` tool refuses it."""
        detail = await self.get(params)
        key = _skill(detail.skill).key
        await asyncio.to_thread(skill_writes.set_enabled, self.data_dir, key, params.enabled)
        self.changed(params.name, params.scope, detail.skill.folder)
        return await self.get(params)

    async def delete(self, params: p.SkillParams) -> p.SkillsResult:
        """Removes the skill's whole folder (never through a link) and forgets its switch."""
        cwd = await self._cwd(params.session_id, params.scope)

        def remove() -> None:
            try:
                skill_writes.remove(params.scope, params.name, self.data_dir, cwd)
            except FileNotFoundError:
                raise NotFound("skill", params.name) from None
            except SkillUnsafe as exc:
                raise EnvironmentFault(f"skill {params.name!r} is not removed: {exc}") from None
            key = Skill(params.name, params.scope, "", _root(params.scope, self.data_dir, cwd)).key
            skill_writes.set_enabled(self.data_dir, key, True)

        await asyncio.to_thread(remove)
        self.changed(params.name, params.scope, _root(params.scope, self.data_dir, cwd))
        return await self.listing(params.session_id)

    async def _cwd(self, session_id: str | None, scope: SkillScope = "project") -> Path | None:
        """The session's folder; a project skill needs one (NotFound without it)."""
        if session_id is None:
            if scope == "project":
                raise NotFound("session", "")
            return None
        row = await self.db.read(lambda tx: sessions.row(tx, session_id))
        if row is None:
            raise NotFound("session", session_id)
        return Path(row.cwd)


def _root(scope: SkillScope, data_dir: Path, cwd: Path | None) -> str:
    where = skills.root_of(scope, data_dir, cwd)
    assert where is not None
    return str(Path(where[0], *where[1]))


def _info(skill: Skill, off: frozenset[str]) -> p.SkillInfo:
    return p.SkillInfo(name=skill.name, scope=skill.scope, description=skill.description,
                       folder=skill.root, enabled=skill.key not in off, problem=skill.problem)


def _skill(info: p.SkillInfo) -> Skill:
    return Skill(info.name, info.scope, info.description, info.folder, info.problem)
