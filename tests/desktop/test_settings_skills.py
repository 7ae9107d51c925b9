"""Settings → Skills against a real backend process: the person's skills and a project's listed
with where they live and any problem, one viewed (its instructions and the files beside it),
turned off and on (skill.list agrees), a person's own skill deleted after a confirmation, and a
project's skill shown but never offered for deletion."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")  # before any QApplication exists

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pytestqt.qtbot import QtBot

from desktop.link import Link
from desktop.qt.settings import SettingsDialog
from desktop.qt.settings_skills import SkillsPage
from shared.methods import SessionCreate, SkillList, SkillSetEnabled
from tests.integration.backend_proc import Backend

from .conftest import drive

WAIT_MS = 30_000


def write_skill(skills: Path, name: str, description: str, body: str) -> Path:
    folder = skills / name
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {description}\n---\n{body}")
    return folder


@pytest.fixture
def skills_dir(desk_backend: Backend, tmp_path: Path) -> Path:
    skills = desk_backend.data_dir / "skills"
    notes = write_skill(skills, "release-notes", "Write release notes from the git log.",
                        "1. Run `git log --oneline`.\n2. Group by feature.\n")
    (notes / "scripts").mkdir()
    (notes / "scripts" / "tags.sh").write_text("git tag\n")
    (notes / "template.md").write_text("# Release\n")
    write_skill(skills, "tidy-imports", "Sort a Python file's imports.", "Use ruff.\n")
    secret = tmp_path / "secret.txt"
    secret.write_text("---\nname: linked\ndescription: x\n---\nnever shown\n")
    (skills / "linked").mkdir()
    (skills / "linked" / "SKILL.md").symlink_to(secret)
    return skills


@pytest.fixture
def link(desk_backend: Backend, qloop: asyncio.AbstractEventLoop, qtbot: QtBot) -> Iterator[Link]:
    made = Link(desk_backend.data_dir, restart_after_s=None)
    task = qloop.create_task(made.start())
    qtbot.waitUntil(lambda: made.current == "connected" or task.done(), timeout=WAIT_MS)
    assert made.current == "connected", task.exception() if task.done() else "not connected"
    yield made
    drive(qtbot, made.close())


@pytest.fixture
def dialog(link: Link, desk_backend: Backend, skills_dir: Path,
           qtbot: QtBot) -> Iterator[SettingsDialog]:
    d = SettingsDialog(link, desk_backend.data_dir)
    qtbot.addWidget(d)
    d.resize(900, 700)
    d.show()
    d.show_tab("Skills")
    qtbot.waitUntil(lambda: not d.busy and bool(d.skills_page.shown), timeout=WAIT_MS)
    yield d
    qtbot.waitUntil(lambda: not d.busy, timeout=WAIT_MS)


@pytest.fixture
def page(dialog: SettingsDialog) -> SkillsPage:
    return dialog.skills_page


def table_rows(page: SkillsPage) -> list[list[str]]:
    return [[page.table.topLevelItem(i).text(c) for c in range(4)]  # type: ignore[union-attr]
            for i in range(page.table.topLevelItemCount())]


def view(page: SkillsPage, qtbot: QtBot, name: str) -> None:
    with qtbot.waitSignal(page.viewed, timeout=WAIT_MS):
        page.select(name)


def test_lists_views_and_turns_a_skill_off(page: SkillsPage, link: Link, qtbot: QtBot) -> None:
    listed = table_rows(page)
    assert [r[:3] for r in listed] == [["linked", "Yours", "Not used"],
                                      ["release-notes", "Yours", "On"],
                                      ["tidy-imports", "Yours", "On"]]
    assert "link" in listed[0][3]  # the problem, in place of a description never read
    assert listed[1][3] == "Write release notes from the git log."
    assert "when a session is open" in page.project_label.text()

    # A skill with a problem: its problem, no switch, nothing read.
    page.select("linked")
    assert page.problem_label.isVisible()
    assert "link" in page.problem_label.text()
    assert page.body.toPlainText() == ""
    assert not page.toggle_button.isEnabled()

    view(page, qtbot, "release-notes")
    assert page.body.isReadOnly()
    assert page.body.toPlainText() == "1. Run `git log --oneline`.\n2. Group by feature.\n"
    assert [page.files.item(i).text() for i in range(page.files.count())] == \
        ["scripts/tags.sh", "template.md"]
    assert not page.problem_label.isVisible()
    assert page.toggle_button.isEnabled()
    assert page.toggle_button.text() == "Turn o&ff"
    assert page.delete_button.isEnabled()
    assert not page.delete_note.isVisible()

    with qtbot.waitSignal(page.toggled, timeout=WAIT_MS):
        page.toggle_button.click()
    qtbot.waitUntil(lambda: table_rows(page)[1][2] == "Off", timeout=WAIT_MS)
    assert "is off" in page.status_label.text()
    listing = drive(qtbot, link.call(SkillList()))
    assert {s.name: s.enabled for s in listing.skills} == {
        "linked": True, "release-notes": False, "tidy-imports": True}
    chosen = page.selected()
    assert chosen is not None
    assert chosen.name == "release-notes"
    assert page.toggle_button.text() == "Turn &on"

    with qtbot.waitSignal(page.toggled, timeout=WAIT_MS):
        page.toggle_button.click()
    qtbot.waitUntil(lambda: table_rows(page)[1][2] == "On", timeout=WAIT_MS)
    listing = drive(qtbot, link.call(SkillList()))
    assert next(s for s in listing.skills if s.name == "release-notes").enabled


def test_deletes_your_own_skill_after_asking(dialog: SettingsDialog, page: SkillsPage,
                                             skills_dir: Path, qtbot: QtBot) -> None:
    asked: list[str] = []
    answer = False

    def confirm(question: str, detail: str) -> bool:
        asked.append(question)
        return answer

    dialog._confirm = confirm  # type: ignore[method-assign]
    view(page, qtbot, "tidy-imports")
    page.delete_button.click()
    assert asked == ["Delete your skill “tidy-imports”?"]
    assert (skills_dir / "tidy-imports" / "SKILL.md").exists(), "declined: kept"

    answer = True
    with qtbot.waitSignal(page.deleted, timeout=WAIT_MS):
        page.delete_button.click()
    qtbot.waitUntil(lambda: "tidy-imports" not in [r[0] for r in table_rows(page)],
                    timeout=WAIT_MS)
    assert not (skills_dir / "tidy-imports").exists()
    assert (skills_dir / "release-notes" / "SKILL.md").exists()
    assert page.status_label.text() == "Deleted “tidy-imports”."


def test_a_projects_skills_are_shown_but_not_deleted(
    dialog: SettingsDialog, page: SkillsPage, link: Link, tmp_path: Path, qtbot: QtBot
) -> None:
    project = tmp_path / "project"
    write_skill(project / ".agents" / "skills", "deploy", "Deploy the site.", "Run make deploy.\n")
    write_skill(project / ".agents" / "skills", "tidy-imports", "The project's way.", "isort.\n")
    made = drive(qtbot, link.call(SessionCreate(cwd=str(project))))
    dialog.session_of = lambda: made.session.session_id
    with qtbot.waitSignal(page.listed, timeout=WAIT_MS):
        page.reload()
    assert sorted(r[:2] for r in table_rows(page)) == [
        ["deploy", "This project's"], ["linked", "Yours"], ["release-notes", "Yours"],
        ["tidy-imports", "This project's"], ["tidy-imports", "Yours"]]
    assert str(project / ".agents" / "skills") in page.project_label.text()

    with qtbot.waitSignal(page.viewed, timeout=WAIT_MS):
        page.select("deploy", "project")
    assert page.body.toPlainText() == "Run make deploy.\n"
    assert not page.delete_button.isEnabled()
    assert page.delete_note.isVisible()
    assert "the project's files" in page.delete_note.text()
    asked: list[str] = []

    def never(question: str, detail: str) -> bool:
        asked.append(question)
        return True

    dialog._confirm = never  # type: ignore[method-assign]
    page.delete_selected()  # the Delete key on the list: not offered either
    assert asked == []

    # Turning a project skill off is the person's choice, and allowed.
    with qtbot.waitSignal(page.toggled, timeout=WAIT_MS):
        page.toggle_button.click()
    listing = drive(qtbot, link.call(SkillList(session_id=made.session.session_id)))
    assert not next(s for s in listing.skills if s.name == "deploy").enabled
    assert (project / ".agents" / "skills" / "deploy" / "SKILL.md").exists()


def test_every_control_of_the_page_has_a_name(dialog: SettingsDialog, page: SkillsPage,
                                              qtbot: QtBot) -> None:
    from .test_accessibility import unnamed

    view(page, qtbot, "release-notes")
    assert unnamed(page) == []
    for i in range(dialog.tabs.count()):  # every page, each as it shows when chosen
        dialog.tabs.setCurrentIndex(i)
        assert unnamed(dialog) == [], dialog.tabs.tabText(i)


def test_the_app_lists_the_shown_sessions_project_skills(controller: Any, tmp_path: Path,
                                                         qtbot: QtBot) -> None:
    project = tmp_path / "shown"
    write_skill(project / ".agents" / "skills", "deploy", "Deploy the site.", "Run make deploy.\n")
    made = drive(qtbot, controller.link.call(SessionCreate(cwd=str(project))))
    controller.open_session(made.session.session_id)
    qtbot.waitUntil(lambda: controller.main.session_id == made.session.session_id,
                    timeout=WAIT_MS)
    controller.open_settings("Skills")
    settings = controller.settings
    assert isinstance(settings, SettingsDialog)
    page = settings.skills_page
    qtbot.waitUntil(lambda: not settings.busy and bool(page.shown), timeout=WAIT_MS)
    assert [(r.name, r.where) for r in page.shown] == [("deploy", "This project's")]
    assert str(project / ".agents" / "skills") in page.project_label.text()
    settings.close()


def test_a_change_made_elsewhere_shows_without_refresh(page: SkillsPage, link: Link,
                                                       qtbot: QtBot) -> None:
    """Another window (here the same link, not through the page) turns a skill off: the
    backend's `skills.changed` lists them again, no Refresh pressed."""
    assert table_rows(page)[2][:3] == ["tidy-imports", "Yours", "On"]
    drive(qtbot, link.call(SkillSetEnabled(name="tidy-imports", scope="user", enabled=False)))
    qtbot.waitUntil(lambda: table_rows(page)[2][2] == "Off", timeout=WAIT_MS)
