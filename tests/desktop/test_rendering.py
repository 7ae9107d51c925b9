"""How messages look and read in the transcript: the user's text as typed, the assistant's
markdown (highlighted code with a Copy link, emphasis, quotes), streaming without raw markup,
selecting and copying part of a message, the context menu, and nothing loaded from outside.

Most tests drive a transcript view on its own (offscreen, the items built from wire rows); the
last ones a real session window against the backend and the fake model.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytest
from PySide6.QtCore import QPoint, QPointF, Qt, QUrl
from PySide6.QtGui import QColor, QImage, QTextCursor, QTextDocument, QWheelEvent
from PySide6.QtWidgets import QApplication

from desktop.qt.controller import Controller
from desktop.qt.markdown import ACTION, copy_href
from desktop.qt.reader import Reader, SafeDocument
from desktop.qt.transcript_view import PREVIEW_LINES, TranscriptModel, TranscriptView, make_view
from desktop.state.transcript import AssistantItem, ToolItem, Transcript
from shared import protocol as p
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.unit.desktop.factories import Events, assistant, call, tool, user

from .test_focus_and_scroll import small_window
from .test_session_window import new_session, turn_done, type_and_send

CODE = ('def load(path):\n    total = 0  # the sum\n    for row in rows(path):\n        total += 1\n'
        '    return "done"')
ANSWER = f"""## Why it is slow

The slow part is the **nested loop**; each pass _re-reads_ the file.

```python
{CODE}
```

> A quote stays a quote.

Run `pytest -k load` to check.
"""


@dataclass
class Shown:
    transcript: Transcript
    model: TranscriptModel
    view: TranscriptView

    def load(self, *messages: p.Message) -> None:
        self.transcript.load(list(messages), has_more=False)
        QApplication.processEvents()

    def row(self, kind: type) -> int:
        return next(i for i, it in enumerate(self.transcript.items) if isinstance(it, kind))

    def doc(self, row: int) -> SafeDocument:
        found = self.view.document(self.model.index(row, 0))
        assert found is not None
        return found

    def point(self, row: int, href: str) -> QPoint:
        """Where, in the viewport, the link to `href` is in row `row` (the middle of it)."""
        index = self.model.index(row, 0)
        doc = self.doc(row)
        item = self.transcript.items[row]
        origin = self.view.delegate.text_rect(item, self.view.visualRect(index), doc).topLeft()
        layout = doc.documentLayout()
        hits = [QPoint(x, y) for y in range(0, int(doc.size().height()), 2)
                for x in range(0, int(doc.textWidth()), 2) if layout.anchorAt(QPointF(x, y)) == href]
        assert hits, f"no link to {href}"
        return origin + hits[len(hits) // 2]

    def text_point(self, row: int, text: str) -> QPoint:
        """Where, in the viewport, `text` starts in row `row`."""
        doc = self.doc(row)
        cursor = doc.find(text)
        assert not cursor.isNull(), text
        block = cursor.block()
        line = block.layout().lineForTextPosition(cursor.selectionStart() - block.position())
        bounds = doc.documentLayout().blockBoundingRect(block)  # (in a code block: inside its cell)
        x = bounds.left() + cast(tuple[float, int], line.cursorToX(cursor.selectionStart()
                                                                   - block.position()))[0]
        top = bounds.top() + line.y() + line.height() / 2
        index = self.model.index(row, 0)
        item = self.transcript.items[row]
        origin = self.view.delegate.text_rect(item, self.view.visualRect(index), doc).topLeft()
        return origin + QPoint(int(x) + 1, int(top))


def show_transcript(qtbot: Any) -> Shown:
    """A transcript view on its own, shown offscreen (760 by 900)."""
    transcript = Transcript()
    model = TranscriptModel(transcript)
    view = make_view(model)
    view.resize(760, 900)
    qtbot.addWidget(view)
    view.show()
    qtbot.waitExposed(view)
    return Shown(transcript, model, view)


@pytest.fixture
def shown(qtbot: Any) -> Shown:
    return show_transcript(qtbot)


def colours(html: str) -> set[str]:
    return {c.lower() for c in re.findall(r"color:(#[0-9a-fA-F]{6})", html)}


# --- the user's text ---------------------------------------------------------------------------


def test_a_user_message_shows_as_typed_line_breaks_indentation_and_markup_characters_kept(
    shown: Shown,
) -> None:
    typed = "first line\nsecond line\n    indented = [1, 2]\n\n* not a bullet _nor emphasis_ <b>nor bold</b>"
    shown.load(user("m1", typed))
    assert shown.doc(0).toPlainText() == typed
    assert shown.doc(0).blockCount() == typed.count("\n") + 1


def test_a_long_paste_is_collapsed_and_its_link_or_enter_shows_all_of_it_and_less_again(
    shown: Shown, qtbot: Any,
) -> None:
    paste = "\n".join(f"log line {i}: something happened here" for i in range(300))
    shown.load(user("m1", paste), assistant("m2", "Looking at it."))
    collapsed = shown.doc(0).toPlainText().splitlines()
    assert collapsed[:PREVIEW_LINES] == paste.splitlines()[:PREVIEW_LINES]
    assert collapsed[PREVIEW_LINES:] == ["Show all (300 lines)"]
    short_height = shown.view.visualRect(shown.model.index(0, 0)).height()
    assert short_height < 400

    # A click on the link.
    where = shown.point(0, f"{ACTION}:expand")
    qtbot.mouseClick(shown.view.viewport(), Qt.MouseButton.LeftButton, pos=where)
    qtbot.waitUntil(lambda: shown.doc(0).toPlainText().endswith("Show less"))
    assert shown.doc(0).toPlainText().splitlines()[:300] == paste.splitlines()
    qtbot.waitUntil(lambda: shown.view.visualRect(shown.model.index(0, 0)).height() > 8 * short_height)

    # The keyboard: Enter (or Space) on the row toggles it.
    shown.view.close_reader()
    shown.view.setCurrentIndex(shown.model.index(0, 0))
    shown.view.setFocus()
    qtbot.keyClick(shown.view, Qt.Key.Key_Return)
    assert shown.doc(0).toPlainText().endswith("Show all (300 lines)")
    shown.view.setFocus()
    qtbot.keyClick(shown.view, Qt.Key.Key_Space)
    assert shown.doc(0).toPlainText().endswith("Show less")


# --- the assistant's markdown ------------------------------------------------------------------


def test_code_is_highlighted_labelled_and_its_copy_link_copies_exactly_the_code(
    shown: Shown, qtbot: Any,
) -> None:
    shown.load(user("m1", "why?"), assistant("m2", ANSWER))
    row = shown.row(AssistantItem)
    doc = shown.doc(row)
    code_html = doc.toHtml().split("def")[1]
    assert len(colours(code_html)) >= 3, "keywords, strings, comments... each their colour"
    lines = doc.toPlainText().splitlines()
    assert "python" in lines
    assert "Copy" in lines
    assert "```" not in doc.toPlainText()

    QApplication.clipboard().setText("before")
    qtbot.mouseClick(shown.view.viewport(), Qt.MouseButton.LeftButton, pos=shown.point(row, copy_href(0)))
    assert QApplication.clipboard().text() == CODE
    qtbot.waitUntil(lambda: "Copied ✓" in shown.doc(row).toPlainText())
    qtbot.waitUntil(lambda: "Copied ✓" not in shown.doc(row).toPlainText(), timeout=4000)


def test_a_row_is_measured_with_plain_code_and_painted_highlighted_at_the_same_height(shown: Shown) -> None:
    shown.load(assistant("m1", ANSWER + "\n```python\n" + "\n".join(CODE.split("\n") * 20) + "\n```\n"))
    item = shown.transcript.items[0]
    width = shown.view.delegate.content_width(item)
    plain = shown.view.delegate.new_document(item, width, colored=False)
    colored = shown.view.delegate.new_document(item, width, colored=True)
    assert len(colours(colored.toHtml())) > len(colours(plain.toHtml()))
    assert plain.size().height() == colored.size().height()
    assert shown.view.visualRect(shown.model.index(0, 0)).height() >= colored.size().height()


def test_emphasis_is_italic_not_underlined_and_headings_and_quotes_are_set_apart(shown: Shown) -> None:
    shown.load(assistant("m1", "an _x_ here and **y** there\n\n# Title\n\n```\ncode\n```\n\n> quoted"))
    doc = shown.doc(0)
    x = doc.find("x")
    assert x.charFormat().fontItalic()
    assert not x.charFormat().fontUnderline()
    assert doc.find("y").charFormat().fontWeight() >= 600
    # The heading and the code block below it do not touch: the code's table keeps a margin.
    code = doc.find("code")
    table = code.currentTable()
    assert table is not None
    assert table.format().topMargin() >= 6
    quote = doc.find("quoted").currentTable()
    assert quote is not None
    cell = quote.cellAt(0, 0).format().toTableCellFormat()
    assert cell.leftBorder() >= 2  # the quote's bar


def test_a_streaming_answer_never_shows_a_half_received_fence_or_code_span(shown: Shown) -> None:
    events = Events()
    shown.load(user("m1", "go", turn_id="t1"))
    text = "See `load_7` and **this**:\n\n```python\nx = `y`\nprint(x)\n```\n\nDone with `z`."
    for start in range(0, len(text), 3):
        shown.transcript.apply(events.delta("t1", text[start:start + 3]))
        row = shown.row(AssistantItem)
        plain = shown.doc(row).toPlainText()
        code = plain.split("print(x)")[0] if "print(x)" in plain else plain
        outside = code.replace("x = `y`", "").replace("x = `", "")  # backticks inside the code are code
        assert "`" not in outside, (text[:start + 3], plain)
        assert "**" not in plain, (text[:start + 3], plain)
        assert plain.rstrip().endswith("▍")


# --- selecting and copying ---------------------------------------------------------------------


def test_a_drag_selects_in_a_message_ctrl_c_copies_just_that_and_enter_opens_it_as_a_reader(
    shown: Shown, qtbot: Any,
) -> None:
    shown.load(user("m1", "why?"), assistant("m2", ANSWER))
    row = shown.row(AssistantItem)
    index = shown.model.index(row, 0)
    # A drag on the painted row selects from the press on; Ctrl+C copies just that.
    start = shown.text_point(row, "slow part")
    end = shown.text_point(row, "; each pass")
    qtbot.mousePress(shown.view.viewport(), Qt.MouseButton.LeftButton, pos=start)
    qtbot.mouseMove(shown.view.viewport(), end)
    qtbot.mouseRelease(shown.view.viewport(), Qt.MouseButton.LeftButton, pos=end)
    assert shown.view.selecting.text() == "slow part is the nested loop"
    assert shown.view.reader() is None
    qtbot.keyClick(shown.view, Qt.Key.Key_C, Qt.KeyboardModifier.ControlModifier)
    assert QApplication.clipboard().text() == "slow part is the nested loop"
    # A click drops the selection: Ctrl+C copies the whole message, as written.
    qtbot.mouseClick(shown.view.viewport(), Qt.MouseButton.LeftButton, pos=start)
    assert shown.view.selecting.text() == ""
    qtbot.keyClick(shown.view, Qt.Key.Key_C, Qt.KeyboardModifier.ControlModifier)
    assert QApplication.clipboard().text() == ANSWER

    # Enter opens the message as a reader, over the row, for the keyboard.
    shown.view.setFocus()
    qtbot.keyClick(shown.view, Qt.Key.Key_Return)
    reader = shown.view.reader()
    assert isinstance(reader, Reader)
    assert shown.view.reading(index)
    assert reader.hasFocus()
    assert reader.toPlainText() == shown.doc(row).toPlainText()
    assert reader.geometry().topLeft() == shown.view.delegate.text_rect(
        shown.transcript.items[row], shown.view.visualRect(index), shown.doc(row)).topLeft()

    # Keyboard selection, then Ctrl+C: just that.
    cursor = reader.textCursor()
    at = reader.toPlainText().index("re-reads")
    cursor.setPosition(at)
    cursor.setPosition(at + len("re-reads the file"), QTextCursor.MoveMode.KeepAnchor)
    reader.setTextCursor(cursor)
    qtbot.keyClick(reader, Qt.Key.Key_C, Qt.KeyboardModifier.ControlModifier)
    assert QApplication.clipboard().text() == "re-reads the file"

    # No selection: Ctrl+C copies the whole message, as written.
    cursor.clearSelection()
    reader.setTextCursor(cursor)
    qtbot.keyClick(reader, Qt.Key.Key_C, Qt.KeyboardModifier.ControlModifier)
    assert QApplication.clipboard().text() == ANSWER

    # Esc leaves the reader; another row closes it.
    qtbot.keyClick(reader, Qt.Key.Key_Escape)
    assert shown.view.reader() is None
    assert shown.view.hasFocus()
    shown.view.open_reader(index)
    shown.view.setCurrentIndex(shown.model.index(0, 0))
    assert not shown.view.reading(index)


def test_the_wheel_over_an_open_reader_scrolls_the_transcript(shown: Shown) -> None:
    shown.load(*[assistant(f"m{i}", "A paragraph.\n\n" * 6) for i in range(20)])
    shown.view.scrollToBottom()
    bar = shown.view.verticalScrollBar()
    before = bar.value()
    assert before > 0
    reader = shown.view.open_reader(shown.model.index(19, 0))
    assert reader is not None
    target = reader.viewport()
    spot = QPointF(10, 10)
    QApplication.sendEvent(target, QWheelEvent(
        spot, QPointF(target.mapToGlobal(spot.toPoint())), QPoint(0, 0), QPoint(0, 120),
        Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier, Qt.ScrollPhase.NoScrollPhase, False))
    assert bar.value() < before


def test_the_context_menu_copies_as_markdown_and_quotes(shown: Shown) -> None:
    shown.load(user("m1", "why?"), assistant("m2", ANSWER))
    row = shown.row(AssistantItem)
    index = shown.model.index(row, 0)
    menu = shown.view.message_menu(index)
    names = [a.text().split("\t")[0] for a in menu.actions()]
    # (The last answer can also be regenerated: issue 35, item 9.)
    assert names == ["Copy", "Copy as Markdown", "Copy exchange as Markdown", "Quote in reply",
                     "Regenerate answer"]
    quoted: list[str] = []
    shown.view.quote_requested.connect(quoted.append)
    menu.actions()[1].trigger()
    assert QApplication.clipboard().text() == ANSWER
    menu.actions()[3].trigger()
    assert quoted == [ANSWER]
    # With a selection in the reader, Copy and Quote take the selection.
    reader = shown.view.open_reader(index)
    assert reader is not None
    cursor = reader.document().find("nested loop")
    reader.setTextCursor(cursor)
    menu = shown.view.message_menu(index)
    assert menu.actions()[0].text().startswith("Copy selection")
    menu.actions()[0].trigger()
    assert QApplication.clipboard().text() == "nested loop"
    menu.actions()[3].trigger()
    assert quoted[-1] == "nested loop"


def test_enter_and_click_expand_a_tool_card_which_has_no_reader(shown: Shown, qtbot: Any) -> None:
    shown.load(user("m1", "list", turn_id="t"),
               assistant("m2", "", turn_id="t", calls=[call("c1", "terminal", command="ls")]),
               tool("m3", "c1", "a.txt\nb.txt", turn_id="t"))
    row = shown.row(ToolItem)
    card = shown.transcript.items[row]
    assert isinstance(card, ToolItem)
    assert not card.expanded
    shown.view.setCurrentIndex(shown.model.index(row, 0))
    shown.view.setFocus()
    qtbot.keyClick(shown.view, Qt.Key.Key_Return)
    assert card.expanded
    assert "b.txt" in shown.doc(row).toPlainText()
    assert shown.view.open_reader(shown.model.index(row, 0)) is None


# --- nothing loaded from outside ---------------------------------------------------------------


def test_nothing_the_model_writes_loads_a_file_or_a_remote_resource(shown: Shown, tmp_path: Path) -> None:
    pic = tmp_path / "pic.png"
    image = QImage(8, 8, QImage.Format.Format_RGB32)
    image.fill(QColor("red"))
    assert image.save(str(pic))
    url = QUrl.fromLocalFile(str(pic))
    # The file is loadable: a plain QTextDocument would read it.
    assert QTextDocument().resource(QTextDocument.ResourceType.ImageResource, url) is not None
    text = (f"![x]({url.toString()}) ![etc](file:///etc/passwd) <img src=\"{url.toString()}\"> "
            f"![remote](http://127.0.0.1:9/p.png) [file link]({url.toString()})")
    shown.load(assistant("m1", text))
    doc = shown.doc(0)
    block = doc.begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            assert not it.fragment().charFormat().isImageFormat()
            it += 1
        block = block.next()
    assert "<img" not in doc.toHtml()
    assert '<img src="' in doc.toPlainText()  # shown as the text it is
    reader = shown.view.open_reader(shown.model.index(0, 0))
    assert reader is not None
    # And were an <img> to get into a document, neither it nor the reader would load it.
    before = SafeDocument.refused
    safe = SafeDocument()
    safe.setHtml(f'<img src="{url.toString()}"><img src="http://127.0.0.1:9/p.png">')
    safe.setTextWidth(300)
    assert safe.size().height() >= 0  # (laid out: the image handler asked for its image)

    def blank(found: Any) -> bool:
        return isinstance(found, QImage) and found.size().width() == 1 and found.pixelColor(0, 0).alpha() == 0

    assert blank(safe.resource(QTextDocument.ResourceType.ImageResource, url))
    reader.setHtml(f'<img src="{url.toString()}">')
    assert blank(reader.document().resource(QTextDocument.ResourceType.ImageResource, url))
    assert blank(reader.loadResource(QTextDocument.ResourceType.ImageResource.value, url))
    assert SafeDocument.refused > before


# --- in a session window -----------------------------------------------------------------------


def test_in_a_window_quote_in_reply_fills_the_message_box_and_a_long_message_warns(
    qtbot: Any, controller: Controller, fake_provider: FakeOpenAI,
) -> None:
    fake_provider.script(Reply(deltas=["First line of the answer.\n\n", "Second **part**."]))
    sid = new_session(qtbot, controller)
    win = small_window(qtbot, controller, sid)
    type_and_send(qtbot, win, "tell me\n  two lines")
    qtbot.waitUntil(lambda: turn_done(win, 1), timeout=15_000)
    conv = win.conversation
    row = next(i for i, it in enumerate(conv.state.transcript.items) if isinstance(it, AssistantItem))
    index = conv.model.index(row, 0)
    conv.composer.setPlainText("My reply")
    next(a for a in conv.view.message_menu(index).actions() if a.text() == "Quote in reply").trigger()
    assert conv.composer.toPlainText() == (
        "My reply\n\n> First line of the answer.\n>\n> Second **part**.\n\n")
    assert win.focusWidget() is conv.composer

    # Ctrl+C in the window (its shortcut) copies the reader's selection.
    reader = conv.view.open_reader(index)
    assert reader is not None
    reader.setTextCursor(reader.document().find("Second part"))
    reader.setFocus()
    qtbot.keyClick(reader, Qt.Key.Key_C, Qt.KeyboardModifier.ControlModifier)
    assert QApplication.clipboard().text() == "Second part"
    # Typing in the reader still goes to the message box (follow.py's rule for the transcript).
    conv.composer.clear()
    qtbot.keyClicks(reader, "ok")
    assert conv.composer.toPlainText() == "ok"
    assert win.focusWidget() is conv.composer
    # The user's own message kept its lines.
    user_doc = conv.view.document(conv.model.index(0, 0))
    assert user_doc is not None
    assert user_doc.toPlainText() == "tell me\n  two lines"

    assert not conv.long_note.isVisible()
    conv.composer.setPlainText("word " * 8_000)  # 40,000 characters: about 10,000 tokens
    assert conv.long_note.isVisible()
    assert conv.long_note.text() == "Long message: about 10,000 tokens, sent with every turn from now on"
    conv.send()
    assert not conv.long_note.isVisible()
