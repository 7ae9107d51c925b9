"""Attaching files in the window: an image pasted from the clipboard and files dropped on the
conversation become chips over the message box and upload at once; one is removed with
Delete, a type not taken is refused with words; Send names the rest, the backend stores them
with the prompt, and the transcript shows the image's thumbnail and the file, which open."""

from __future__ import annotations

import stat
import warnings
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QColor, QDragEnterEvent, QDropEvent, QGuiApplication, QImage, QTextDocument
from PySide6.QtWidgets import QApplication, QWidget

from desktop.qt.attachment_viewing import thumb_url
from desktop.qt.controller import Controller
from desktop.qt.conversation import Conversation
from desktop.qt.transcript_view import ATTACHMENT
from desktop.state.attachments import NO_VISION_MARK, NO_VISION_NOTICE
from desktop.state.transcript import UserItem
from shared import protocol as p
from shared.methods import SessionMessages
from tests.fakes.openai_server import FakeOpenAI, Reply

from .conftest import drive
from .test_session_window import new_session, open_window, turn_done


def screenshot(width: int = 300, height: int = 200) -> QImage:
    image = QImage(width, height, QImage.Format.Format_RGB32)
    image.fill(QColor("#3366cc"))
    for x in range(width // 8, width // 2):
        for y in range(height // 8, height // 4):
            image.setPixelColor(x, y, QColor("#ffcc00"))
    return image


def paste_image(qtbot: Any, conv: Conversation, image: QImage) -> None:
    """The image on the clipboard, then Ctrl+V in the message box."""
    QGuiApplication.clipboard().setImage(image)
    conv.composer.setFocus()
    qtbot.keyClick(conv.composer, Qt.Key.Key_V, Qt.KeyboardModifier.ControlModifier)


def drop_files(on: QWidget, *paths: Path) -> bool:
    """A drag of `paths` entering `on` and dropped there (as a file manager does); whether the
    drop was taken (by `on` or a parent: Qt passes drag events up to a widget that takes them)."""
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(path)) for path in paths])
    at = QPointF(on.rect().center())
    with warnings.catch_warnings():  # (PySide6 marks Qt 6's one constructor deprecated)
        warnings.simplefilter("ignore", DeprecationWarning)
        enter = QDragEnterEvent(at.toPoint(), Qt.DropAction.CopyAction, mime,
                                Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(on, enter)
    drop = QDropEvent(at, Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
                      Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(on, drop)
    return drop.isAccepted()


def chips_ready(conv: Conversation, n: int) -> bool:
    files = conv.attaching.pending.files
    return len(files) == n and all(f.state == "ready" for f in files)


def test_paste_and_drop_attach_files_that_go_with_the_prompt_and_show_in_the_transcript(
    qtbot: Any, controller: Controller, fake_provider: FakeOpenAI, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    opened: list[QUrl] = []

    def fake_open(url: QUrl) -> bool:
        opened.append(url)
        return True

    monkeypatch.setattr("desktop.qt.attachment_viewing.QDesktopServices.openUrl", fake_open)
    fake_provider.script(Reply(deltas=["A blue screenshot and your notes."]))
    sid = new_session(qtbot, controller, tmp_path)
    win = open_window(qtbot, controller, sid)
    conv = win.conversation
    panel = conv.composer_frame

    paste_image(qtbot, conv, screenshot())
    qtbot.waitUntil(lambda: chips_ready(conv, 1), timeout=10_000)
    assert conv.composer.toPlainText() == "", "an image pastes as a file, not as text"
    assert panel.chips.isVisible()
    pasted = conv.attaching.pending.files[0]
    assert pasted.mime_type == "image/png"
    assert pasted.name.startswith("Pasted image ")

    notes = tmp_path / "notes.md"
    notes.write_text("# Plan\n- ship attachments\n")
    extra = tmp_path / "extra.txt"
    extra.write_text("not this one")
    # Dropped on the transcript, and on the message box: both reach the conversation.
    assert drop_files(conv.view.viewport(), notes)
    assert drop_files(conv.composer.viewport(), extra)
    assert not conv.drop_target.isVisible(), "the drop highlight goes with the drop"
    qtbot.waitUntil(lambda: chips_ready(conv, 3), timeout=10_000)
    assert [f.name for f in conv.attaching.pending.files] == [pasted.name, "notes.md", "extra.txt"]
    assert conv.composer.toPlainText() == "", "a dropped file is not its path as text"

    # Removed with Delete on its chip (the focus then stays on a chip).
    chip = panel.chips.chips[conv.attaching.pending.files[2].key]
    chip.setFocus()
    qtbot.keyClick(chip, Qt.Key.Key_Delete)
    assert [f.name for f in conv.attaching.pending.files] == [pasted.name, "notes.md"]
    qtbot.waitUntil(lambda: len([c for c in panel.chips.chips.values() if c.isVisible()]) == 2,
                    timeout=5_000)

    # A type not taken is refused at once, with words; nothing is uploaded for it.
    program = tmp_path / "tool.bin"
    program.write_bytes(b"\x7fELF\x02\x01\x01\0" + bytes(range(256)))
    assert drop_files(conv.view.viewport(), program)
    # (dropped files are read in a thread: the window stays live while a big one is read)
    qtbot.waitUntil(lambda: panel.attach_note.text().startswith(
        "Not attached: tool.bin is not a type Turnkey sends"), timeout=5_000)
    assert len(conv.attaching.pending.files) == 2
    assert panel.attach_note.isVisible()

    conv.composer.setPlainText("What is in these?")
    panel.send_button.click()
    qtbot.waitUntil(lambda: turn_done(win, 1), timeout=20_000)
    assert not conv.attaching.pending.files
    assert not panel.chips.isVisible()

    stored = drive(qtbot, controller.link.call(SessionMessages(session_id=sid)))
    prompt = next(m for m in stored.messages if m.role == "user")
    assert prompt.content == "What is in these?"
    files = prompt.attachments or []
    assert [(a.name, a.kind) for a in files] == [(pasted.name, "image"), ("notes.md", "text")]
    assert (files[0].width, files[0].height) == (300, 200)
    assert files[1].bytes == notes.stat().st_size

    # The transcript: the prompt's row shows the image's thumbnail and the file's line.
    row = next(i for i, it in enumerate(conv.state.transcript.items) if isinstance(it, UserItem))
    item = conv.state.transcript.items[row]
    assert isinstance(item, UserItem)
    assert [a.name for a in item.attachments] == [pasted.name, "notes.md"]
    thumb = files[0].thumbnail
    assert thumb is not None
    qtbot.waitUntil(lambda: thumb in conv.attaching.thumbnails.images, timeout=10_000)
    html = conv.view.delegate.rendered(item).html
    assert thumb_url(thumb).toString() in html
    assert "notes.md" in html
    assert "What is in these?" in html
    doc = conv.view.delegate.document(item, conv.view.delegate.content_width(item))
    shown = doc.resource(QTextDocument.ResourceType.ImageResource.value, thumb_url(thumb))
    assert isinstance(shown, QImage)
    assert (shown.width(), shown.height()) == (256, 171), "the backend's thumbnail: 256 px long"

    # Clicking the image opens it full size; clicking the file saves it privately and hands
    # it to the system's viewer.
    index = conv.model.index(row, 0)
    conv.view.follow(index, f"{ATTACHMENT}/0")
    dialog = conv.attaching.opener.dialog
    assert dialog is not None
    qtbot.waitUntil(lambda: not dialog.image.isNull(), timeout=10_000)
    assert (dialog.image.width(), dialog.image.height()) == (300, 200)
    assert dialog.image.pixelColor(50, 30) == QColor("#ffcc00")
    assert dialog.image.pixelColor(200, 150) == QColor("#3366cc")
    dialog.close()
    conv.view.follow(index, f"{ATTACHMENT}/1")
    qtbot.waitUntil(lambda: bool(opened), timeout=10_000)
    saved = Path(opened[0].toLocalFile())
    assert saved.name == "notes.md"
    assert saved.is_relative_to(tmp_path / "cache")
    assert saved.read_bytes() == notes.read_bytes()
    assert stat.S_IMODE(saved.stat().st_mode) == 0o600
    assert stat.S_IMODE(saved.parent.stat().st_mode) == 0o700


def test_send_during_an_upload_waits_for_it_and_files_alone_can_go(
    qtbot: Any, controller: Controller, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    fake_provider.script(Reply(deltas=["Got it."]))
    sid = new_session(qtbot, controller, tmp_path)
    win = open_window(qtbot, controller, sid)
    conv = win.conversation
    paste_image(qtbot, conv, screenshot(64, 64))
    assert conv.attaching.pending.uploading, "the upload runs in the background"
    conv.send()  # no text: the image alone
    assert conv.attaching.pending.waiting == "queue"
    assert "Sends when the upload finishes…" in conv.composer_frame.attach_note.text()
    qtbot.waitUntil(lambda: turn_done(win, 1), timeout=20_000)
    stored = drive(qtbot, controller.link.call(SessionMessages(session_id=sid)))
    prompt = next(m for m in stored.messages if m.role == "user")
    assert prompt.content == ""
    assert [a.kind for a in prompt.attachments or []] == ["image"]


def test_send_right_after_a_drop_waits_for_the_file_to_be_read(
    qtbot: Any, controller: Controller, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    fake_provider.script(Reply(deltas=["Read it."]))
    sid = new_session(qtbot, controller, tmp_path)
    win = open_window(qtbot, controller, sid)
    conv = win.conversation
    notes = tmp_path / "plan.md"
    notes.write_text("# Plan\n")
    assert drop_files(conv.view.viewport(), notes)
    conv.composer.setPlainText("Summarize it")
    conv.send()  # before the dropped file was read (in a thread) or uploaded
    assert conv.attaching.pending.waiting == "queue"
    qtbot.waitUntil(lambda: turn_done(win, 1), timeout=20_000)
    stored = drive(qtbot, controller.link.call(SessionMessages(session_id=sid)))
    prompt = next(m for m in stored.messages if m.role == "user")
    assert prompt.content == "Summarize it"
    assert [a.name for a in prompt.attachments or []] == ["plan.md"]


def test_a_model_that_cannot_see_is_marked_while_an_image_waits(
    qtbot: Any, controller: Controller, tmp_path: Path
) -> None:
    sid = new_session(qtbot, controller, tmp_path)
    win = open_window(qtbot, controller, sid)
    conv = win.conversation
    model = conv.state.session.model if conv.state.session else ""
    qtbot.waitUntil(lambda: conv._listed is not None, timeout=5_000)  # (provider.list answered)
    conv._listed = [
        p.ProviderChoice(name="local", model=model, kind="openai", default=True, vision=False),
        p.ProviderChoice(name="cloud", model="gpt-4o", kind="openai", vision=True)]
    conv.refresh()
    assert not conv.model_box.currentText().endswith(NO_VISION_MARK)
    assert not conv.composer_frame.attach_note.isVisible()
    paste_image(qtbot, conv, screenshot(32, 32))
    qtbot.waitUntil(lambda: conv.model_box.currentText().endswith(NO_VISION_MARK), timeout=5_000)
    labels = [conv.model_box.itemText(i) for i in range(conv.model_box.count())]
    assert labels == [f"local · {model}{NO_VISION_MARK}", "cloud · gpt-4o"]
    # The open list shows every label whole, however narrow the box (seen cut in the middle,
    # "(can't see images)" lost, in the real app).
    conv.model_box.showPopup()
    view = conv.model_box.view()
    qtbot.waitUntil(view.isVisible, timeout=5_000)
    widest = max(view.fontMetrics().horizontalAdvance(label) for label in labels)
    assert view.width() > widest
    conv.model_box.hidePopup()
    assert conv.composer_frame.attach_note.text() == NO_VISION_NOTICE
    conv.attaching.remove(conv.attaching.pending.files[0].key)
    qtbot.waitUntil(lambda: not conv.model_box.currentText().endswith(NO_VISION_MARK), timeout=5_000)
    assert not conv.composer_frame.attach_note.isVisible()


def test_text_pastes_as_text_and_copied_files_as_files(
    qtbot: Any, controller: Controller, tmp_path: Path
) -> None:
    sid = new_session(qtbot, controller, tmp_path)
    win = open_window(qtbot, controller, sid)
    conv = win.conversation
    QGuiApplication.clipboard().setText("just words")
    conv.composer.setFocus()
    qtbot.keyClick(conv.composer, Qt.Key.Key_V, Qt.KeyboardModifier.ControlModifier)
    assert conv.composer.toPlainText() == "just words"
    assert not conv.attaching.pending.files
    copied = tmp_path / "copied.json"
    copied.write_text('{"a": 1}')
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(copied))])
    mime.setText(str(copied))  # (a file manager puts the path as text too)
    QGuiApplication.clipboard().setMimeData(mime)
    qtbot.keyClick(conv.composer, Qt.Key.Key_V, Qt.KeyboardModifier.ControlModifier)
    assert conv.composer.toPlainText() == "just words", "the path is not pasted"
    qtbot.waitUntil(lambda: [f.name for f in conv.attaching.pending.files] == ["copied.json"],
                    timeout=5_000)
    assert conv.attaching.pending.files[0].mime_type == "application/json"
