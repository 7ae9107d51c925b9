"""The Schedules window against a real backend: create from the form, list live, toggle, delete
after a confirmation, and a scheduled turn that runs and says so in a notification."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from PySide6.QtCore import QDateTime, Qt

from desktop.qt.schedules import SchedulesDialog
from shared.methods import ScheduleCreate, SessionCreate
from shared.protocol import NewSessionSpec
from tests.desktop.conftest import drive
from tests.desktop.test_main_window import approval_turn
from tests.fakes.openai_server import FakeOpenAI, Reply

WAIT_MS = 30_000


def _open(controller: Any, qtbot: Any) -> SchedulesDialog:
    controller.open_schedules()
    dialog = controller.schedules
    assert isinstance(dialog, SchedulesDialog)
    qtbot.waitUntil(lambda: dialog.empty_label.isVisible() or dialog.table.topLevelItemCount() > 0,
                    timeout=WAIT_MS)
    return dialog


def _cells(dialog: SchedulesDialog, row: int = 0) -> list[str]:
    item = dialog.table.topLevelItem(row)
    assert item is not None
    return [item.text(c) for c in range(dialog.table.columnCount())]


def test_create_list_toggle_and_delete(controller: Any, qtbot: Any, tmp_path: Path) -> None:
    dialog = _open(controller, qtbot)
    assert dialog.empty_label.text().startswith("No scheduled prompts yet")
    assert not dialog.edit_button.isEnabled()

    dialog.new_button.click()
    assert dialog.form.isVisible()
    assert dialog.repeat_combo.currentText() == "Every weekday at 9:00"
    assert dialog.folder_edit.isVisible(), "a new session each time asks for its folder"
    assert not dialog.at_edit.isVisible()
    dialog.text_edit.setPlainText("Summarize yesterday's commits")
    dialog.folder_edit.setText(str(tmp_path))
    dialog.zone_combo.setCurrentText("Europe/Paris")
    with qtbot.waitSignal(dialog.saved, timeout=WAIT_MS) as saved:
        dialog.save_button.click()
    schedule = saved.args[0]
    assert (schedule.cron, schedule.timezone, schedule.missed) == ("0 9 * * 1-5", "Europe/Paris", "run_once")
    assert schedule.new_session.cwd == str(tmp_path)
    assert not dialog.form.isVisible()
    cells = _cells(dialog)
    assert cells[1:3] == ["Summarize yesterday's commits", "every weekday at 9:00"]
    assert " at " in cells[3], cells  # e.g. "tomorrow at 08:00" in this computer's zone
    assert cells[4] == "never"
    assert cells[5] == f"a new session in {tmp_path}"
    assert dialog.status_label.text().startswith("Saved. Next run: ")

    item = dialog.table.topLevelItem(0)
    assert item is not None
    with qtbot.waitSignal(dialog.saved, timeout=WAIT_MS) as off:
        item.setCheckState(0, Qt.CheckState.Unchecked)
    assert off.args[0].enabled is False
    qtbot.waitUntil(lambda: _cells(dialog)[3] == "off", timeout=WAIT_MS)

    asked: list[str] = []

    def confirm(question: str, detail: str) -> bool:
        asked.append(question)
        return True

    dialog.confirm = confirm  # type: ignore[method-assign]
    with qtbot.waitSignal(dialog.deleted, timeout=WAIT_MS):
        dialog.delete_button.click()
    assert asked == ["Delete the schedule “Summarize yesterday's commits”?"]
    assert dialog.empty_label.isVisible()


def test_a_bad_custom_cron_says_what_is_wrong(controller: Any, qtbot: Any) -> None:
    dialog = _open(controller, qtbot)
    dialog.new_button.click()
    dialog.text_edit.setPlainText("hello")
    dialog.repeat_combo.setCurrentIndex(dialog.repeat_combo.count() - 1)  # Custom (cron)
    assert dialog.cron_edit.isVisible()
    dialog.cron_edit.setText("0 25 * * *")
    with qtbot.waitSignal(dialog.failed, timeout=WAIT_MS) as failed:
        dialog.save_button.click()
    assert failed.args[0] == "The hour field: 25 is out of range; use 0-23"
    assert dialog.form_error.text() == failed.args[0]
    assert dialog.form.isVisible(), "the form stays to be fixed"


def test_once_from_the_form_keeps_the_wall_clock_time_in_its_zone(controller: Any, qtbot: Any) -> None:
    dialog = _open(controller, qtbot)
    dialog.new_button.click()
    dialog.text_edit.setPlainText("new year")
    dialog.repeat_combo.setCurrentIndex(0)  # once, at a time
    assert dialog.at_edit.isVisible()
    assert not dialog.cron_edit.isVisible()
    dialog.zone_combo.setCurrentText("America/New_York")
    year = datetime.now(UTC).year + 1
    dialog.at_edit.setDateTime(QDateTime(year, 1, 1, 9, 30, 0))
    with qtbot.waitSignal(dialog.saved, timeout=WAIT_MS) as saved:
        dialog.save_button.click()
    assert saved.args[0].at == f"{year}-01-01T14:30:00Z", "09:30 in New York is 14:30 UTC in winter"
    assert _cells(dialog)[2] == "once"


def test_a_scheduled_turn_shows_live_and_notifies_when_it_finished(
    controller: Any, qtbot: Any, fake_provider: FakeOpenAI,
) -> None:
    fake_provider.routes["check the build"] = Reply(deltas=["the build is green"])
    session = drive(qtbot, controller.link.call(SessionCreate(title="Builds")))
    sid = session.session.session_id
    dialog = _open(controller, qtbot)
    soon = (datetime.now(UTC) + timedelta(seconds=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    # Made elsewhere (another client): the open window lists it from the event alone.
    drive(qtbot, controller.link.call(ScheduleCreate(text="check the build", session_id=sid,
                                                     at=soon, timezone="UTC")))
    qtbot.waitUntil(lambda: dialog.table.topLevelItemCount() == 1, timeout=WAIT_MS)
    with qtbot.waitSignal(controller.notifier.shown, timeout=WAIT_MS,
                          check_params_cb=lambda title, _text: title == "Scheduled turn finished"):
        pass
    qtbot.waitUntil(lambda: _cells(dialog)[4] != "never", timeout=WAIT_MS)
    assert _cells(dialog)[3] == "done"
    assert _cells(dialog)[5] == "Builds"
    first = dialog.table.topLevelItem(0)
    assert first is not None
    dialog.table.setCurrentItem(first)
    assert dialog.open_button.isEnabled()
    with qtbot.waitSignal(dialog.open_requested, timeout=WAIT_MS) as opened:
        dialog.open_button.click()
    assert opened.args[0] == sid


def test_a_scheduled_turns_approval_notifies_with_no_window_on_its_session(
    controller: Any, qtbot: Any, fake_provider: FakeOpenAI, tmp_path: Path,
) -> None:
    """Nobody watches a scheduled turn: its approval must reach the person anyway."""
    victim = approval_turn(fake_provider, tmp_path)
    soon = (datetime.now(UTC) + timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    asked: list[tuple[str, str]] = []
    controller.notifier.shown.connect(lambda title, text: asked.append((title, text)))
    drive(qtbot, controller.link.call(ScheduleCreate(
        text="clean up", new_session=NewSessionSpec(cwd=str(tmp_path)), at=soon, timezone="UTC")))
    qtbot.waitUntil(lambda: any(t == "Turnkey needs your approval" for t, _ in asked), timeout=WAIT_MS)
    text = next(text for title, text in asked if title == "Turnkey needs your approval")
    assert "rm -rf" in text
    assert victim.exists()
