"""The Skills page's words and rules, without Qt: the skills `skill.list` found as rows (where
each lives, on or off, its problem), what a chosen skill shows (`skill.get`), which controls
apply to it, and the question a removal asks.

A person's own skills (DIR/skills) can be turned off and removed here.  A project's skills are
the project's files (its `.agents/skills`, in the repository): they can be turned off, but the
page offers no removal, and says so.  A skill with a problem (a link, no front matter, a name
not its folder's) is never used, so it has no switch either.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from shared import protocol as p

WHERE: dict[p.SkillScope, str] = {"user": "Yours", "project": "This project's"}

INTRO = ("Skills are folders of instructions for one kind of task (SKILL.md). Every turn the agent "
         "sees their names and descriptions, and reads one when a task matches it. A skill turned "
         "off leaves that list from the next turn on.")
EMPTY = ("No skills yet. Put a folder with a SKILL.md in the data folder's skills/, or in a "
         "project's .agents/skills/; the agent can also write one with its skill_manage tool.")
NOT_CHOSEN = "Choose a skill to see its instructions and files."
PROJECT_KEPT = ("A project's skills are the project's files: remove its folder in the project "
                "(or ask the agent) to delete one. Turning it off here is yours alone.")


NAME = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$")  # as shared.protocol.SkillName


@dataclass(frozen=True)
class SkillRow:
    name: str
    scope: p.SkillScope
    where: str  # "Yours", "This project's"
    state: str  # "On", "Off", "Not used"
    about: str  # the description, or the problem
    folder: str  # the skills folder it is in
    enabled: bool
    problem: str | None

    @property
    def key(self) -> tuple[p.SkillScope, str]:
        return (self.scope, self.name)

    @property
    def label(self) -> str:
        """Its name as listed: a skills folder that cannot be read at all has none."""
        return self.name or "(the skills folder)"

    @property
    def readable(self) -> bool:
        """skill.get may be asked for it: a valid name and no problem (a problem row's
        SKILL.md is never read)."""
        return self.problem is None and bool(NAME.match(self.name))


def rows(result: p.SkillsResult) -> list[SkillRow]:
    """The skills in skill.list's order (by name)."""
    return [SkillRow(s.name, s.scope, WHERE[s.scope], state_word(s), s.problem or s.description,
                     s.folder, s.enabled, s.problem)
            for s in result.skills]


def state_word(skill: p.SkillInfo) -> str:
    if skill.problem:
        return "Not used"
    return "On" if skill.enabled else "Off"


def project_note(result: p.SkillsResult) -> str:
    """Where project skills were looked for: the folder of the session the main window shows."""
    if result.project_folder is None:
        return "Project skills show when a session is open: those of its folder's .agents/skills."
    return f"Project skills from {result.project_folder} (the folder of the session shown)."


def can_toggle(row: SkillRow | None) -> bool:
    return row is not None and row.readable


def toggle_words(row: SkillRow | None) -> str:
    """The switch's text for the chosen skill."""
    return "Turn &on" if row is not None and not row.enabled else "Turn o&ff"


def can_delete(row: SkillRow | None) -> bool:
    """Only a person's own skill, by a name the backend takes (a broken one too)."""
    return row is not None and row.scope == "user" and bool(NAME.match(row.name))


def delete_note(row: SkillRow | None) -> str:
    """Why Delete does not apply to the chosen skill ("" when it does, or nothing is chosen)."""
    return PROJECT_KEPT if row is not None and row.scope == "project" else ""


def delete_question(row: SkillRow) -> tuple[str, str]:
    """The confirmation a removal asks: the question, and what it means."""
    return (f"Delete your skill “{row.name}”?",
            f"Its whole folder ({row.folder}/{row.name}), SKILL.md and the files beside it, is "
            "removed. This cannot be undone.")


def heading(row: SkillRow) -> str:
    return f"{row.label} — {row.where.lower()}, {row.state.lower()}"


def problem_words(row: SkillRow) -> str:
    """What the viewer says of a skill with a problem (shown above whatever could be read)."""
    return f"Not used: {row.problem}" if row.problem else ""


def files_words(detail: p.SkillDetail) -> list[str]:
    """The files beside SKILL.md, or one line saying there are none."""
    return list(detail.files) or ["(no files beside SKILL.md)"]


def toggled_words(detail: p.SkillDetail) -> str:
    s = detail.skill
    if s.enabled:
        return f"“{s.name}” is on: the agent sees it from the next turn."
    return f"“{s.name}” is off: the agent no longer sees it, from the next turn."
