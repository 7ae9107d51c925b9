"""A session in the home folder or / says, in a banner over its conversation (not in its
transcript), that the sandbox protects none of the person's files there; the new-session
dialog says so before such a session is made."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from desktop.qt.controller import Controller
from desktop.qt.session_window import NewSessionDialog
from tests.integration.backend_proc import Backend

from .test_session_window import new_session, open_window

WARNING = "This session's folder is your home folder: the sandbox lets the agent's commands"


def test_a_home_session_shows_the_warning_and_a_project_session_does_not(
    qtbot: Any, controller: Controller, tmp_path: Path
) -> None:
    home = open_window(qtbot, controller, new_session(qtbot, controller))  # the default folder
    note = home.conversation.folder_note
    qtbot.waitUntil(note.isVisible, timeout=5_000)
    assert note.text().startswith(WARNING), note.text()
    assert note.property("banner") == "warning", "a warning callout, as the app's other notices"
    assert home.conversation.state.transcript.items == [], "not a transcript row"
    # The main window shows one session at a time: a project's conversation replaces it.
    project = open_window(qtbot, controller, new_session(qtbot, controller, tmp_path))
    assert project is home, "the same main window"
    assert project.conversation.state.session is not None
    assert project.conversation.state.session.cwd == str(tmp_path)
    assert not project.conversation.folder_note.isVisible()
    assert project.conversation.folder_note.text() == ""


def test_the_new_session_dialog_warns_about_home_and_slash_before_the_session_exists(
    qtbot: Any, tmp_path: Path
) -> None:
    dialog = NewSessionDialog(str(Path.home()))
    qtbot.addWidget(dialog)
    dialog.show()
    assert dialog.warning.isVisible()
    assert dialog.warning.text().startswith(WARNING)
    dialog.folder.setText(str(tmp_path))
    assert not dialog.warning.isVisible()
    dialog.folder.setText("/")
    assert "is / (the whole file system)" in dialog.warning.text()
    assert dialog.warning.isVisible()
    dialog.folder.setText("")  # the backend's default: the home folder
    assert dialog.warning.isVisible()
    dialog.folder.setText("~/")
    assert dialog.warning.text().startswith(WARNING)
    # A remote backend's folders are its own: its sessions' summaries say it there.
    remote = NewSessionDialog(str(Path.home()), remote_host="build-box")
    qtbot.addWidget(remote)
    remote.show()
    assert not remote.warning.isVisible()


def test_the_new_session_dialog_offers_the_folder_the_app_was_launched_from(
    qtbot: Any, make_controller: Any, desk_backend: Backend, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`turnkey` typed in a project offers that project; launched from its data folder (as a
    launcher may start it) or home, the app offers home."""
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(project)
    controller = make_controller()
    main = controller.main
    main.new_session()
    assert main.new_dialog.folder.text() == str(project)
    assert not main.new_dialog.warning.isVisible()
    main.new_dialog.accept()
    qtbot.waitUntil(lambda: main.current is not None and main.current.state.session is not None,
                    timeout=10_000)
    assert main.current is not None
    assert main.current.state.session is not None
    assert main.current.state.session.cwd == str(project)
    main.new_dialog.close()

    monkeypatch.chdir(desk_backend.data_dir)
    again = make_controller()
    again.main.new_session()
    assert again.main.new_dialog.folder.text() == str(Path.home())
    again.main.new_dialog.close()
