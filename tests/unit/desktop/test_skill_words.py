"""The Skills page's rows and rules without Qt: where a skill lives, on, off or not used, what
the switch and Delete apply to (a project's skill is never offered for deletion), and the words."""

from __future__ import annotations

from desktop.state import skills as words
from desktop.state.skills import rows
from shared import protocol as p


def _info(name: str, scope: p.SkillScope = "user", enabled: bool = True,
          problem: str | None = None) -> p.SkillInfo:
    folder = "/data/skills" if scope == "user" else "/work/app/.agents/skills"
    return p.SkillInfo(name=name, scope=scope, description=f"About {name}.", folder=folder,
                       enabled=enabled, problem=problem)


def _rows(*infos: p.SkillInfo, project: str | None = None) -> list[words.SkillRow]:
    return rows(p.SkillsResult(skills=list(infos), project_folder=project))


def test_rows_say_where_state_and_problem() -> None:
    on, off, broken, deploy = _rows(_info("a"), _info("b", enabled=False),
                                    _info("c", problem="SKILL.md is a link: not read"),
                                    _info("deploy", "project"))
    assert (on.where, on.state, on.about) == ("Yours", "On", "About a.")
    assert off.state == "Off"
    assert (broken.state, broken.about) == ("Not used", "SKILL.md is a link: not read")
    assert deploy.where == "This project's"
    assert words.heading(off) == "b — yours, off"
    assert words.problem_words(broken) == "Not used: SKILL.md is a link: not read"


def test_what_applies_to_which_skill() -> None:
    mine, broken, folder, theirs = _rows(_info("a"), _info("c", problem="no front matter"),
                                         _info("", problem="the skills folder is a link"),
                                         _info("deploy", "project", enabled=False))
    assert words.can_toggle(mine)
    assert words.can_delete(mine)
    assert words.delete_note(mine) == ""
    assert not words.can_toggle(broken)
    assert words.can_delete(broken)
    assert not words.can_toggle(folder)
    assert not words.can_delete(folder)
    assert folder.label == "(the skills folder)"
    assert words.can_toggle(theirs)
    assert not words.can_delete(theirs)
    assert words.delete_note(theirs) == words.PROJECT_KEPT
    assert words.toggle_words(theirs) == "Turn &on"
    assert words.toggle_words(mine) == "Turn o&ff"
    assert not words.can_toggle(None)
    assert not words.can_delete(None)


def test_the_question_and_the_notes() -> None:
    (mine,) = _rows(_info("release-notes"))
    question, detail = words.delete_question(mine)
    assert question == "Delete your skill “release-notes”?"
    assert "/data/skills/release-notes" in detail
    assert "cannot be undone" in detail
    assert "when a session is open" in words.project_note(p.SkillsResult(skills=[],
                                                                         project_folder=None))
    assert "/w/.agents/skills" in words.project_note(p.SkillsResult(
        skills=[], project_folder="/w/.agents/skills"))
    detail_none = p.SkillDetail(skill=_info("a"), body="x", files=[])
    assert words.files_words(detail_none) == ["(no files beside SKILL.md)"]
    assert "is on" in words.toggled_words(detail_none)
