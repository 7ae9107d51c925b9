"""The transcript view's caches (desktop/qt/transcript_view.py) never show a stale row: a row's
measured height follows its text as it streams, the view's width and the theme; the rows just
out of sight are rendered ahead while the app is idle, and a rendering without code is measured
and painted from one document.

A transcript view on its own, offscreen (as in test_rendering.py), items built from wire rows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from PySide6.QtWidgets import QApplication

from desktop.qt import transcript_view
from desktop.state.transcript import AssistantItem
from tests.unit.desktop.factories import Events, assistant, user

from .test_rendering import CODE, Shown, show_transcript
from .test_theme import themed  # noqa: F401  (fixture)

PARAGRAPH = "A sentence long enough to wrap more than once at a narrow width, then some. " * 6


@pytest.fixture
def shown(qtbot: Any) -> Shown:
    return show_transcript(qtbot)


def row_height(shown: Shown, row: int) -> int:
    return shown.view.visualRect(shown.model.index(row, 0)).height()


def settle(qtbot: Any) -> None:
    QApplication.processEvents()
    qtbot.wait(30)  # (a relayout Qt delays to the next pass of the loop)


def test_a_streaming_row_grows_with_each_line_it_receives(shown: Shown, qtbot: Any) -> None:
    events = Events()
    shown.load(user("m1", "go", turn_id="t1"))
    shown.transcript.apply(events.delta("t1", "first line"))
    settle(qtbot)
    row = shown.row(AssistantItem)
    one = row_height(shown, row)
    shown.transcript.apply(events.delta("t1", "\n\n" + "\n\n".join(f"line {n}" for n in range(12))))
    settle(qtbot)
    grown = row_height(shown, row)
    assert grown > one + 100
    assert grown >= int(shown.doc(row).size().height())


def test_a_narrower_view_measures_its_rows_again(shown: Shown, qtbot: Any) -> None:
    shown.load(user("m1", "go"), assistant("m2", PARAGRAPH))
    settle(qtbot)
    wide = row_height(shown, 1)
    shown.view.resize(320, 900)
    settle(qtbot)
    narrow = row_height(shown, 1)
    assert narrow > wide
    assert narrow >= int(shown.doc(1).size().height())


def test_a_theme_switch_renders_and_measures_the_rows_in_the_new_colours(
    shown: Shown, qtbot: Any, themed: Callable[[str], None],  # noqa: F811
) -> None:
    themed("light")
    shown.load(assistant("m1", f"Some text.\n\n```python\n{CODE}\n```\n"))
    settle(qtbot)
    light = shown.doc(0).toHtml()
    themed("dark")
    settle(qtbot)
    dark = shown.doc(0).toHtml()
    code_bg = transcript_view.look(True, shown.view.font().pointSizeF()).code_bg.lower()
    assert code_bg in dark.lower()  # the dark theme's code block
    assert code_bg not in light.lower()


def test_rows_just_above_the_view_are_rendered_ahead_when_idle(shown: Shown, qtbot: Any) -> None:
    fence = f"```python\n{CODE}\n```"
    messages = []
    for n in range(40):
        messages += [user(f"u{n}", f"question {n}"), assistant(f"a{n}", f"Answer {n}.\n\n{fence}\n")]
    shown.load(*messages)
    bar = shown.view.verticalScrollBar()
    bar.setValue(bar.maximum())
    settle(qtbot)
    delegate = shown.view.delegate
    items = shown.transcript.items
    first = shown.view.indexAt(shown.view.viewport().rect().topLeft()).row()
    above = [r for r in range(max(0, first - 6), first) if isinstance(items[r], AssistantItem)]
    assert above, "answers above the view"
    qtbot.waitUntil(lambda: all(delegate.ready(items[r]) for r in above), timeout=3_000)
    # Far above, nothing is rendered for painting (only measured, code left plain).
    assert not delegate.ready(items[1])


def test_an_answer_without_code_is_measured_and_painted_from_one_document(
    shown: Shown, qtbot: Any, monkeypatch: Any,
) -> None:
    made: list[bool] = []
    render = transcript_view.TranscriptDelegate.rendered

    def counted(self: transcript_view.TranscriptDelegate, item: Any, colored: bool = True) -> Any:
        if isinstance(item, AssistantItem):
            made.append(colored)
        return render(self, item, colored)

    monkeypatch.setattr(transcript_view.TranscriptDelegate, "rendered", counted)
    shown.load(assistant("m1", "Just **words**, no code at all."))
    settle(qtbot)
    assert made == [False], "measured once (plain), then painted from the same document"
