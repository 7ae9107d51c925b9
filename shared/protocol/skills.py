"""Skills (addition): the SKILL.md folders the agent reads, listed, shown, turned off and removed."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from shared.protocol.base import EventData, EventSpec, Id, Params, Wire

SkillScope = Literal["user", "project"]
# As backend/tools/skills.NAME: a-z, 0-9 and -, 1 to 64, not starting or ending with -.
SkillName = Annotated[str, msgspec.Meta(min_length=1, max_length=64,
                                        pattern=r"^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$")]


class SkillInfo(Wire):
    """One skill folder as found.  `problem` (None: usable) says why it is left out: a link,
    no front matter, a name that is not its folder's.  `enabled` is the person's choice."""

    name: str
    scope: SkillScope
    description: str
    folder: str  # the skills folder it is in: DIR/skills, or <session folder>/.agents/skills
    enabled: bool
    problem: str | None = None


class SkillsResult(Wire):
    skills: list[SkillInfo]  # by name, the person's before the project's of the same name
    project_folder: str | None  # the session's .agents/skills looked in (None: no session given)


class SkillDetail(Wire):
    skill: SkillInfo
    body: str  # SKILL.md after its front matter
    files: list[str]  # beside SKILL.md, paths in its folder (a link is listed as such, never read)


class SkillListParams(Params):
    """The person's skills, and with `session_id` that session folder's project skills."""

    session_id: Id | None = None


class SkillParams(Params):
    """One skill: a project one needs the `session_id` whose folder holds it."""

    name: SkillName
    scope: SkillScope
    session_id: Id | None = None


class SkillEnableParams(Params):
    """Turns a skill on or off for every session (a person's choice, DIR/skills.json)."""

    name: SkillName
    scope: SkillScope
    enabled: bool
    session_id: Id | None = None


class SkillsChanged(EventData):
    """Addition: a skill was written, removed, or turned on or off (by `skill_manage` or a
    skill.* method); session-less (`session_id` ""), sent to every reader."""

    name: str
    scope: SkillScope
    folder: str  # the skills folder it is in, as SkillInfo.folder


SKILL_EVENTS = (
    EventSpec("skills.changed", SkillsChanged,
              "addition, session-less (`session_id` `\"\"`, no `seq`, sent to every connection "
              "with `read`): `name`, `scope`, `folder` (as a SkillInfo's), after `skill_manage` "
              "or `skill.set_enabled` / `skill.delete` changed a skill"),
)
