"""The settings dialog against a real backend process (and the fake OpenAI server).

Tests are sync: the qasync loop runs inside Qt's (already running) event loop, and
`qtbot.waitUntil` / `waitSignal` turn the crank.  The fixtures prefixed `_` are meant to
move to tests/desktop/conftest.py (PT019: ruff reads a leading underscore as "value unused").
"""
# ruff: noqa: PT019

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")  # before any QApplication exists
os.environ.setdefault("QT_API", "pyside6")  # qasync's binding, whatever the import order

import asyncio
import threading
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt, QUrl
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QAbstractButton, QComboBox, QLabel, QLineEdit, QListWidget
from pytestqt.qtbot import QtBot

from desktop.link import Link
from desktop.qt.settings import SettingsDialog
from shared import protocol as p
from shared.config import ConfigView
from shared.methods import ConfigGet
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.integration.backend_proc import Backend

KEY = "sk-test-DESKTOP-LEAKCHECK-0123456789abcdef"
WAIT_MS = 20_000


# --- fixtures (to move into tests/desktop/conftest.py) ------------------------------------


@pytest.fixture
def _qt_loop(qloop: asyncio.AbstractEventLoop) -> asyncio.AbstractEventLoop:
    """The conftest's qasync loop (set up and torn down there)."""
    return qloop


@pytest.fixture
def _backend(desk_backend: Backend) -> Backend:
    """A real backend on a temp data dir; provider `main` is the fake; keys go to the file."""
    return desk_backend


def _run(loop: asyncio.AbstractEventLoop, qtbot: QtBot, coro: Coroutine[Any, Any, Any],
         timeout_ms: int = WAIT_MS) -> Any:
    """Runs `coro` on the qasync loop from a sync test and returns its result."""
    task = loop.create_task(coro)
    qtbot.waitUntil(task.done, timeout=timeout_ms)
    return task.result()


@pytest.fixture
def _link(_backend: Backend, _qt_loop: asyncio.AbstractEventLoop, qtbot: QtBot) -> Iterator[Link]:
    link = Link(_backend.data_dir, restart_after_s=None)
    task = _qt_loop.create_task(link.start())
    qtbot.waitUntil(lambda: link.current == "connected" or task.done(), timeout=WAIT_MS)
    assert link.current == "connected", task.exception() if task.done() else "not connected"
    yield link
    _run(_qt_loop, qtbot, link.close())


@pytest.fixture
def _dialog(_link: Link, _backend: Backend, qtbot: QtBot) -> Iterator[SettingsDialog]:
    dialog = SettingsDialog(_link, _backend.data_dir)
    qtbot.addWidget(dialog)
    dialog.show()
    _idle(qtbot, dialog)
    assert dialog.config is not None
    yield dialog
    _idle(qtbot, dialog)  # nothing in flight when the link closes


def _idle(qtbot: QtBot, dialog: SettingsDialog, timeout_ms: int = WAIT_MS) -> None:
    qtbot.waitUntil(lambda: not dialog.busy, timeout=timeout_ms)


def _config(loop: asyncio.AbstractEventLoop, qtbot: QtBot, link: Link) -> ConfigView:
    """What the backend has now, through a call of the test's own (not the dialog's)."""
    result = _run(loop, qtbot, link.call(ConfigGet()))
    assert isinstance(result, ConfigView)
    return result


def _tested(blocker: Any) -> p.ProviderTestResult:
    """The ProviderTestResult a `tested` signal carried."""
    result = blocker.args[0]
    assert isinstance(result, p.ProviderTestResult)
    return result


def _texts(dialog: SettingsDialog) -> list[str]:
    """Every text the dialog's widgets hold or show (tooltips and placeholders included)."""
    out = [dialog.windowTitle()]
    for edit in dialog.findChildren(QLineEdit):
        out += [edit.text(), edit.placeholderText(), edit.displayText(), edit.toolTip()]
    for label in dialog.findChildren(QLabel):
        out += [label.text(), label.toolTip()]
    for button in dialog.findChildren(QAbstractButton):
        out += [button.text(), button.toolTip()]
    for combo in dialog.findChildren(QComboBox):
        out += [combo.itemText(i) for i in range(combo.count())]
    for items in dialog.findChildren(QListWidget):
        out += [items.item(i).text() for i in range(items.count())]
    return out


# --- tests --------------------------------------------------------------------------------


def test_settings_show_the_configured_provider(_dialog: SettingsDialog, fake_provider: FakeOpenAI) -> None:
    d = _dialog
    assert [d.provider_list.item(i).text() for i in range(d.provider_list.count())] == ["main (default)"]
    assert d.current == "main"
    assert d.name_edit.text() == "main"
    assert d.kind_combo.currentData() == "openai"
    assert d.fields["base_url"].text() == fake_provider.base_url
    assert d.fields["model"].text() == "fake-model"
    assert d.fields["context_window"].text() == "128000"
    assert d.fields["max_output_tokens"].text() == "4096"  # the backend's default, filled in
    assert d.fields["input_usd_per_mtok"].text() == "0"
    assert d.fields["cached_input_usd_per_mtok"].text() == ""  # unset: same as the input price
    assert d.default_check.isChecked()
    assert "no key is set" in d.key_status_label.text()
    assert d.approval_combo.currentData() == "smart"


def test_kind_sets_the_base_url_placeholder(_dialog: SettingsDialog) -> None:
    d = _dialog
    d.kind_combo.setCurrentIndex(d.kind_combo.findData("anthropic"))
    assert d.fields["base_url"].placeholderText() == "https://api.anthropic.com/v1"
    d.kind_combo.setCurrentIndex(d.kind_combo.findData("openai"))
    assert d.fields["base_url"].placeholderText() == "https://api.openai.com/v1"


def test_editing_the_model_and_saving_persists_only_what_changed(
    _dialog: SettingsDialog, _link: Link, _backend: Backend, _qt_loop: asyncio.AbstractEventLoop,
    qtbot: QtBot,
) -> None:
    d = _dialog
    d.fields["model"].setText("other-model")
    d.fields["output_usd_per_mtok"].setText("0.6")
    assert d.provider_patch() == {"providers": {"main": {"model": "other-model", "output_usd_per_mtok": 0.6}}}
    with qtbot.waitSignal(d.saved, timeout=WAIT_MS):
        d.save_button.click()
    _idle(qtbot, d)
    assert not d.error_label.isVisible()
    cfg = _config(_qt_loop, qtbot, _link)
    assert cfg.providers["main"].model == "other-model"
    assert cfg.providers["main"].output_usd_per_mtok == 0.6
    assert d.fields["model"].text() == "other-model"
    toml = (_backend.data_dir / "config.toml").read_text()
    assert "max_output_tokens" not in toml  # defaults shown in the form are not written out


def test_an_invalid_value_shows_the_backends_field_error(
    _dialog: SettingsDialog, _link: Link, _qt_loop: asyncio.AbstractEventLoop, qtbot: QtBot
) -> None:
    d = _dialog
    d.fields["context_window"].setText("-5")
    with qtbot.waitSignal(d.failed, timeout=WAIT_MS) as blocker:
        d.save_button.click()
    _idle(qtbot, d)
    words = blocker.args[0]
    assert d.last_error_field == "patch.providers.main.context_window"
    assert d.error_label.isVisible()
    assert d.error_label.text() == words
    assert "Context window" in words
    assert "whole number of at least 1" in words
    assert "Traceback" not in words
    assert "`" not in words
    assert "Expected `int` >= 1" in d.error_label.toolTip()  # the backend's own words
    assert d.fields["context_window"].property("problem") is True  # the field is marked
    assert d.fields["context_window"].text() == "-5"  # the input stays, to fix
    assert d.save_button.isEnabled()
    assert _config(_qt_loop, qtbot, _link).providers["main"].context_window == 128000

    d.fields["context_window"].setText("lots")  # not a number: the backend still names it
    with qtbot.waitSignal(d.failed, timeout=WAIT_MS) as blocker:
        d.save_provider()
    _idle(qtbot, d)
    assert blocker.args[0] == "Context window (tokens) of provider “main”: must be a whole number."

    d.fields["context_window"].setText("64000")  # fixed: the error goes away
    with qtbot.waitSignal(d.saved, timeout=WAIT_MS):
        d.save_provider()
    _idle(qtbot, d)
    assert not d.error_label.isVisible()
    assert d.fields["context_window"].property("problem") is False
    assert _config(_qt_loop, qtbot, _link).providers["main"].context_window == 64000


def test_saving_a_key_stores_it_in_the_file_and_never_shows_it(
    _dialog: SettingsDialog, _link: Link, _backend: Backend, _qt_loop: asyncio.AbstractEventLoop,
    fake_provider: FakeOpenAI, qtbot: QtBot,
) -> None:
    d = _dialog
    assert d.key_edit.echoMode() == QLineEdit.EchoMode.Password
    d.key_edit.setText(KEY + "\n")
    with qtbot.waitSignal(d.key_saved, timeout=WAIT_MS) as blocker:
        d.key_button.click()
    _idle(qtbot, d)
    qtbot.waitUntil(lambda: "a key is set" in d.key_status_label.text(), timeout=WAIT_MS)
    result = blocker.args[0]
    assert isinstance(result, p.SecretSetResult)
    assert result.stored == "file"
    assert KEY not in str(result)
    assert d.key_edit.text() == ""
    shown = d.key_result_label.text()
    assert "a file" in shown
    assert "plain text" in shown
    assert "secrets.json" in shown
    assert all(KEY not in t and "DESKTOP-LEAKCHECK" not in t for t in _texts(d))

    # The provider had no key name: the dialog gave it its own, so the backend uses the key.
    cfg = _config(_qt_loop, qtbot, _link)
    assert cfg.providers["main"].api_key_secret == "main"
    assert cfg.providers["main"].api_key == "set"
    assert d.fields["api_key_secret"].text() == "main"
    assert d.provider_patch() is None  # the form agrees with the backend: a Save changes nothing
    with qtbot.waitSignal(d.tested, timeout=WAIT_MS):
        d.test_button.click()
    _idle(qtbot, d)
    assert fake_provider.snapshot()[-1].authorization == f"Bearer {KEY}"

    secrets = _backend.data_dir / "secrets.json"
    assert KEY in secrets.read_text()
    leaks = [str(p) for p in sorted(_backend.data_dir.rglob("*"))
             if p.is_file() and p != secrets and KEY.encode() in p.read_bytes()]
    assert leaks == []
    logs = list((_backend.data_dir / "logs").glob("*"))
    assert logs, "the backend wrote no log file to check"


def test_provider_test_reports_ok_and_latency(_dialog: SettingsDialog, qtbot: QtBot) -> None:
    d = _dialog
    with qtbot.waitSignal(d.tested, timeout=WAIT_MS) as blocker:
        d.test_button.click()
        assert not d.test_button.isEnabled()  # busy while it runs
        assert d.test_button.text() == "Testing…"
        assert not d.test_progress.isHidden()
    _idle(qtbot, d)
    result = _tested(blocker)
    assert result.ok is True
    assert result.provider == "main"
    text = d.test_result_label.text()
    assert text.startswith("OK:")
    assert f"{result.latency_ms} ms" in text
    assert "fake-model" in text
    assert d.test_button.isEnabled()
    assert d.test_button.text() == "Test"
    assert d.test_progress.isHidden()


def test_provider_test_failure_shows_the_error_and_the_dialog_stays_responsive(
    _dialog: SettingsDialog, fake_provider: FakeOpenAI, qtbot: QtBot
) -> None:
    d = _dialog
    fake_provider.script(Reply(deltas=["slow"], delay=1.0), Reply.http_error(401, "bad key"))
    with qtbot.waitSignal(d.tested, timeout=WAIT_MS) as first:
        d.test_provider()
        # While the test runs, the GUI still works: another call completes meanwhile.
        d.set_approval_mode("ask")
        qtbot.waitUntil(lambda: "mode" not in d.busy, timeout=WAIT_MS)
        assert "test" in d.busy
    assert _tested(first).ok is True
    _idle(qtbot, d)
    with qtbot.waitSignal(d.tested, timeout=WAIT_MS) as second:
        d.test_provider()
    _idle(qtbot, d)
    failure = _tested(second)
    assert failure.ok is False
    assert failure.error is not None
    assert failure.error.kind == "auth"
    assert d.test_result_label.text() == (
        "Failed: “main”: The server rejected the API key. Paste a new key in Settings → Providers.")
    # The raw detail is a click away, not in the sentence.
    assert d.test_result_label.toolTip() == "main: HTTP 401: bad key"
    assert d.test_details_button.isVisible()
    assert not d.test_detail_label.isVisible()
    d.test_details_button.click()
    assert d.test_detail_label.isVisible()
    assert d.test_detail_label.text() == "main: HTTP 401: bad key"
    assert d.test_details_button.text() == "Hide details"


def test_a_test_result_goes_when_another_provider_is_shown(
    _dialog: SettingsDialog, fake_provider: FakeOpenAI, qtbot: QtBot
) -> None:
    """A failed Test of one provider is not left under another's form: not when the person
    switches after it failed, nor when the failure comes back after they switched."""
    d = _dialog
    assert d.start_new_provider("other")
    d.fields["base_url"].setText(fake_provider.base_url)
    d.fields["model"].setText("other-model")
    with qtbot.waitSignal(d.saved, timeout=WAIT_MS):
        d.save_provider()
    _idle(qtbot, d)
    rows = {d.provider_list.item(i).data(Qt.ItemDataRole.UserRole): i
            for i in range(d.provider_list.count())}

    d.provider_list.setCurrentRow(rows["main"])
    fake_provider.script(Reply.http_error(401, "bad key"))
    with qtbot.waitSignal(d.tested, timeout=WAIT_MS):
        d.test_provider()
    _idle(qtbot, d)
    assert d.test_result_label.text().startswith("Failed: “main”")
    d.provider_list.setCurrentRow(rows["other"])
    assert d.name_edit.text() == "other"
    assert d.test_result_label.text() == ""
    assert not d.test_details_button.isVisible()

    release = threading.Event()
    fake_provider.script(Reply(deltas=[], hang_after=0, release=release, truncate=True))
    d.provider_list.setCurrentRow(rows["main"])
    asked = len(fake_provider.snapshot())
    d.test_provider()
    qtbot.waitUntil(lambda: len(fake_provider.snapshot()) > asked, timeout=WAIT_MS)
    d.provider_list.setCurrentRow(rows["other"])  # while main's test runs
    with qtbot.waitSignal(d.tested, timeout=WAIT_MS) as late:
        release.set()
    _idle(qtbot, d)
    assert _tested(late).ok is False
    assert _tested(late).provider == "main"
    assert d.name_edit.text() == "other"
    assert d.test_result_label.text() == "", "main's failure is not shown as other's"
    assert not d.test_details_button.isVisible()
    assert d.test_button.isEnabled()


def test_approval_mode_change_persists(
    _dialog: SettingsDialog, _link: Link, _qt_loop: asyncio.AbstractEventLoop, qtbot: QtBot
) -> None:
    d = _dialog
    index = d.approval_combo.findData("off")
    with qtbot.waitSignal(d.saved, timeout=WAIT_MS):
        d.approval_combo.setCurrentIndex(index)
        d.approval_combo.activated.emit(index)  # what a person's choice emits
    _idle(qtbot, d)
    assert _config(_qt_loop, qtbot, _link).approvals.mode == "off"
    assert d.approval_combo.currentData() == "off"
    assert d.approval_combo.isEnabled()


def test_add_a_provider_make_it_default_then_remove_it(
    _dialog: SettingsDialog, _link: Link, _backend: Backend, _qt_loop: asyncio.AbstractEventLoop,
    qtbot: QtBot, monkeypatch: pytest.MonkeyPatch,
) -> None:
    d = _dialog
    assert not d.start_new_provider("main")  # taken
    assert "already exists" in d.error_label.text()
    assert d.start_new_provider("claude")
    # Listed at once, selected, said not to be saved yet.
    listed = [d.provider_list.item(i).text() for i in range(d.provider_list.count())]
    assert listed == ["main (default)", "claude (new, not saved)"]
    assert d.provider_list.currentItem().text() == "claude (new, not saved)"
    d.kind_combo.setCurrentIndex(d.kind_combo.findData("anthropic"))
    with qtbot.waitSignal(d.failed, timeout=WAIT_MS) as blocker:  # no model: the backend says so
        d.save_provider()
    _idle(qtbot, d)
    assert blocker.args[0] == "Model of provider “claude”: is required."
    assert d.current is None  # the new form stays
    assert d.name_edit.text() == "claude"

    d.fields["model"].setText("claude-x")
    d.fields["input_usd_per_mtok"].setText("3")
    d.default_check.setChecked(True)
    with qtbot.waitSignal(d.saved, timeout=WAIT_MS):
        d.save_provider()
    _idle(qtbot, d)
    cfg = _config(_qt_loop, qtbot, _link)
    assert cfg.default_provider == "claude"
    assert cfg.providers["claude"].kind == "anthropic"
    assert cfg.providers["claude"].model == "claude-x"
    assert cfg.providers["claude"].input_usd_per_mtok == 3.0
    assert cfg.providers["claude"].base_url is None  # the kind's default
    items = [d.provider_list.item(i).text() for i in range(d.provider_list.count())]
    assert items == ["claude (default)", "main"]
    assert d.current == "claude"

    monkeypatch.setattr(d, "_confirm", lambda *_a: True)  # the person says yes
    with qtbot.waitSignal(d.saved, timeout=WAIT_MS):
        d.remove_button.click()
    _idle(qtbot, d)
    cfg = _config(_qt_loop, qtbot, _link)
    assert "claude" not in cfg.providers
    assert cfg.default_provider is None  # the reference went with it
    assert d.current == "main"
    assert [d.provider_list.item(i).text() for i in range(d.provider_list.count())] == ["main (default)"]
    assert "claude" not in (_backend.data_dir / "config.toml").read_text()


def test_open_data_folder_opens_the_data_dir(
    _dialog: SettingsDialog, _backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[QUrl] = []

    def fake_open(url: QUrl) -> bool:
        opened.append(url)
        return True

    monkeypatch.setattr("desktop.qt.settings.QDesktopServices.openUrl", fake_open)
    _dialog.open_folder_button.click()
    assert opened == [QUrl.fromLocalFile(str(_backend.data_dir))]
    assert opened[0].toLocalFile() == str(_backend.data_dir)


# --- Test: the form as it stands, not the saved settings ------------------------------------

ERROR_PAGE = b"<!DOCTYPE html><html><body><h1>501 Not Implemented</h1></body></html>"
INLINE_KEY = "sk-test-DESKTOP-INLINE-0123456789abcdef"


@pytest.fixture
def failing_provider() -> Iterator[FakeOpenAI]:
    """A second fake on another port whose every answer is a 501 error page."""
    fake = FakeOpenAI()
    fake.default = Reply(status=501, raw=ERROR_PAGE, content_type="text/html")
    yield fake
    fake.close()


def test_test_sends_the_unsaved_base_url_and_saves_nothing(
    _dialog: SettingsDialog, _link: Link, _backend: Backend, _qt_loop: asyncio.AbstractEventLoop,
    fake_provider: FakeOpenAI, failing_provider: FakeOpenAI, qtbot: QtBot,
) -> None:
    d = _dialog
    toml = (_backend.data_dir / "config.toml").read_bytes()
    d.fields["base_url"].setText(failing_provider.base_url)  # edited, not saved
    with qtbot.waitSignal(d.tested, timeout=WAIT_MS) as blocker:
        d.test_button.click()
        assert "as the form shows it (not saved)" in d.test_result_label.text()
    _idle(qtbot, d)
    result = _tested(blocker)
    assert result.ok is False
    assert len(failing_provider.snapshot()) == 1, "the form's URL was tested"
    assert fake_provider.snapshot() == [], "not the saved one"
    assert d.test_result_label.text() == (
        "Failed: “main”: The provider's server answered with an error page (HTTP 501: Not "
        "Implemented). Check the base URL in Settings → Providers.")
    assert d.test_result_label.property("tone") == "danger"
    assert (_backend.data_dir / "config.toml").read_bytes() == toml, "nothing saved"
    assert _config(_qt_loop, qtbot, _link).providers["main"].base_url == fake_provider.base_url
    assert d.fields["base_url"].text() == failing_provider.base_url, "the form keeps the edit"

    d.fields["base_url"].setText(fake_provider.base_url)  # back to what works
    with qtbot.waitSignal(d.tested, timeout=WAIT_MS) as blocker:
        d.test_button.click()
    _idle(qtbot, d)
    assert _tested(blocker).ok is True
    assert not d.test_details_button.isVisible(), "no detail to show for an OK"


def test_a_key_typed_but_not_saved_is_tested_and_never_kept(
    _dialog: SettingsDialog, _backend: Backend, fake_provider: FakeOpenAI, qtbot: QtBot,
) -> None:
    d = _dialog
    d.key_edit.setText(INLINE_KEY)
    with qtbot.waitSignal(d.tested, timeout=WAIT_MS) as blocker:
        d.test_button.click()
    _idle(qtbot, d)
    assert _tested(blocker).ok is True
    assert fake_provider.snapshot()[-1].authorization == f"Bearer {INLINE_KEY}"
    assert d.key_edit.text() == INLINE_KEY, "still there, to save if it works"
    assert "no key is set" in d.key_status_label.text()
    assert not (_backend.data_dir / "secrets.json").exists()
    leaks = [str(p) for p in sorted(_backend.data_dir.rglob("*"))
             if p.is_file() and INLINE_KEY.encode() in p.read_bytes()]
    assert leaks == []


def test_a_new_provider_can_be_tested_before_it_is_saved(
    _dialog: SettingsDialog, _link: Link, _qt_loop: asyncio.AbstractEventLoop,
    fake_provider: FakeOpenAI, qtbot: QtBot,
) -> None:
    d = _dialog
    assert d.start_new_provider("draft")
    assert d.test_button.isEnabled(), "a new provider's form can be tested"
    d.fields["base_url"].setText(fake_provider.base_url)
    d.fields["model"].setText("draft-model")
    with qtbot.waitSignal(d.tested, timeout=WAIT_MS) as blocker:
        d.test_button.click()
    _idle(qtbot, d)
    result = _tested(blocker)
    assert (result.ok, result.provider, result.model) == (True, "draft", "draft-model")
    assert "draft" not in _config(_qt_loop, qtbot, _link).providers

    d.fields["context_window"].setText("-5")  # the backend's refusal marks the field
    with qtbot.waitSignal(d.tested, timeout=WAIT_MS):
        d.test_button.click()
    _idle(qtbot, d)
    assert d.last_error_field == "provider_config.context_window"
    assert d.fields["context_window"].property("problem") is True
    assert "Context window" in d.error_label.text()


# --- who answers now ------------------------------------------------------------------------


def test_settings_name_the_provider_that_answers(_dialog: SettingsDialog) -> None:
    text = _dialog.answering_label.text()
    assert text == "Answering now: “main” (fake-model, OpenAI-compatible (Chat Completions))."


def test_with_nothing_configured_settings_say_the_weak_offline_model_answers(
    tmp_path: Path, _qt_loop: asyncio.AbstractEventLoop, qtbot: QtBot,
) -> None:
    from backend.providers.local import BUNDLED_MODEL, local_available

    if not local_available():
        pytest.skip("the offline model is not installed")
    backend = Backend(tmp_path / "fresh", "http://127.0.0.1:9/unused",
                      extra_env={"TURNKEY_NO_KEYRING": "1"})
    (backend.data_dir / "config.toml").unlink()  # a fresh install
    backend.start()
    link = Link(backend.data_dir, restart_after_s=None)
    task = _qt_loop.create_task(link.start())
    try:
        qtbot.waitUntil(lambda: link.current == "connected" or task.done(), timeout=WAIT_MS)
        dialog = SettingsDialog(link, backend.data_dir)
        qtbot.addWidget(dialog)
        dialog.show()
        _idle(qtbot, dialog)
        text = dialog.answering_label.text()
        assert text.startswith(f"Answering now: the built-in offline model ({BUNDLED_MODEL}).")
        assert "small and weak" in text
        assert "add a provider" in text
        assert "No provider is configured yet" not in " ".join(_texts(dialog))
        assert dialog.answering_label.property("tone") == "warning"
        assert dialog.add_button.isEnabled(), "the next step is one click away"
        _idle(qtbot, dialog)
    finally:
        _run(_qt_loop, qtbot, link.close())
        backend.close()


# --- Rules ----------------------------------------------------------------------------------


def _make_rule(loop: asyncio.AbstractEventLoop, qtbot: QtBot, link: Link, folder: Path,
               fake: FakeOpenAI) -> None:
    """A real "always" rule: a turn asks to run `rm -rf build`, the answer is Always."""
    from shared.methods import ApprovalList, ApprovalRespond, PromptSubmit, SessionCreate

    (folder / "build").mkdir()
    fake.script(Reply.calls({"name": "terminal", "arguments": {"command": "rm -rf build"}}),
                Reply(deltas=["done"]))
    sid = _run(loop, qtbot, link.call(SessionCreate(cwd=str(folder)))).session.session_id
    _run(loop, qtbot, link.call(PromptSubmit(session_id=sid, request_id="r1", text="clean")))
    pending: list[p.Approval] = []

    def asked() -> bool:
        pending[:] = _run(loop, qtbot, link.call(ApprovalList(session_id=sid))).approvals
        return bool(pending)

    qtbot.waitUntil(asked, timeout=WAIT_MS)
    _run(loop, qtbot, link.call(ApprovalRespond(approval_id=pending[0].approval_id,
                                                decision="always")))
    qtbot.waitUntil(lambda: not (folder / "build").exists(), timeout=WAIT_MS)
    qtbot.waitUntil(lambda: len(fake.snapshot()) == 2, timeout=WAIT_MS)  # the script is spent


def test_rules_are_listed_and_revoked_after_a_confirmation(
    _dialog: SettingsDialog, _link: Link, _qt_loop: asyncio.AbstractEventLoop,
    fake_provider: FakeOpenAI, qtbot: QtBot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from shared.methods import RulesList

    d = _dialog
    page = d.rules_page
    d.show_tab("Rules")
    _idle(qtbot, d)
    assert page.shown == []
    assert page.empty_label.isVisible(), "the empty state says what rules are"
    assert "Always" in page.empty_label.text()
    assert not page.revoke_button.isEnabled()

    _make_rule(_qt_loop, qtbot, _link, tmp_path, fake_provider)
    d.show_tab("Providers")
    with qtbot.waitSignal(page.listed, timeout=WAIT_MS):
        d.show_tab("Rules")  # shown again: listed again
    _idle(qtbot, d)
    assert [(r.tool, r.allows) for r in page.shown] == [
        ("Terminal", "commands starting with “rm -rf”")]
    assert page.table.isVisible()
    assert not page.empty_label.isVisible()
    item = page.table.topLevelItem(0)
    assert item is not None
    assert [item.text(i) for i in range(3)][:2] == ["Terminal", "commands starting with “rm -rf”"]
    assert page.revoke_button.isEnabled()

    asked: list[str] = []

    def say_no(question: str, _detail: str) -> bool:
        asked.append(question)
        return False

    monkeypatch.setattr(d, "_confirm", say_no)
    page.revoke_button.click()
    assert asked == ["Revoke the rule for terminal: commands starting with “rm -rf”?"]
    _idle(qtbot, d)
    assert len(page.shown) == 1, "not revoked without a yes"

    monkeypatch.setattr(d, "_confirm", lambda *_a: True)
    page.table.setFocus()
    with qtbot.waitSignal(page.listed, timeout=WAIT_MS):
        QTest.keyClick(page.table, Qt.Key.Key_Delete)  # the keyboard way
    _idle(qtbot, d)
    assert page.shown == [], "listed again after the revoke"
    assert page.empty_label.isVisible()
    assert "Revoked" in page.status_label.text()
    assert _run(_qt_loop, qtbot, _link.call(RulesList())).rules == []


def test_every_control_of_every_settings_page_has_a_name(
    _dialog: SettingsDialog, _link: Link, _qt_loop: asyncio.AbstractEventLoop,
    fake_provider: FakeOpenAI, qtbot: QtBot, tmp_path: Path,
) -> None:
    from tests.desktop.test_accessibility import unnamed

    d = _dialog
    _make_rule(_qt_loop, qtbot, _link, tmp_path, fake_provider)
    fake_provider.script(Reply.http_error(401, "bad key"))
    with qtbot.waitSignal(d.tested, timeout=WAIT_MS):
        d.test_button.click()
    _idle(qtbot, d)
    assert d.test_details_button.isVisible()
    missing = []
    for name in ("Providers", "Approvals", "Rules"):
        d.show_tab(name)
        _idle(qtbot, d)
        missing += unnamed(d)
    assert d.rules_page.shown, "the rules page was checked with a rule on it"
    assert not missing, "unnamed controls:\n  " + "\n  ".join(missing)
