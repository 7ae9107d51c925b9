"""A delegate call's card against a real backend: the sub-agent's state, its answer, and Open."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QTextDocumentFragment

from desktop.qt.controller import Controller
from desktop.qt.delegate_card import OPEN_CHILD, card
from desktop.qt.session_window import Window
from desktop.qt.transcript_view import TranscriptView, look, tool_html
from desktop.state.delegation import child_state
from desktop.state.transcript import ToolItem, Transcript
from shared.methods import SessionCreate, SessionList
from tests.fakes.openai_server import FakeOpenAI, Reply, content_text
from tests.unit.desktop.factories import Events

from .conftest import drive

TASK = "Find the largest file under src/ and say how big it is"


def answers(fake: FakeOpenAI, release: threading.Event) -> None:
    """The parent delegates once; its sub-agent (whose prompt carries the task) answers only
    after `release`."""
    def answer(body: dict[str, Any]) -> Reply:
        first = next(content_text(m) for m in body["messages"] if m.get("role") == "user")
        if TASK in first:
            return Reply(deltas=["src/big.bin, ", "12 MB."], hang_after=0, release=release)
        if any(m.get("role") == "tool" for m in body["messages"]):
            return Reply(deltas=["The sub-agent found it."])
        return Reply.calls({"name": "delegate", "arguments": {"task": TASK}}, text="Asking a helper.")
    fake.responder = answer


def the_card(win: Window) -> ToolItem:
    cards = [it for it in win.conversation.state.transcript.items if isinstance(it, ToolItem)]
    assert len(cards) == 1
    return cards[0]


def open_link_point(view: TranscriptView, row: int) -> QPoint:
    """Where the card's Open link is painted, found the way a pointer would."""
    index = view.model().index(row, 0)
    rect = view.visualRect(index)
    for y in range(rect.top(), rect.bottom(), 3):
        for x in range(rect.left(), rect.right(), 4):
            if view.delegate.anchor_at(index, QPoint(x, y)) == OPEN_CHILD:
                return QPoint(x + 2, y + 1)
    raise AssertionError("the card shows no Open link")


def test_the_card_follows_the_sub_agent_and_open_shows_its_session_in_a_window(
    qtbot: Any, controller: Controller, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    release = threading.Event()
    answers(fake_provider, release)
    sid = drive(qtbot, controller.link.call(SessionCreate(cwd=str(tmp_path)))).session.session_id
    win = controller.open_session(sid)
    qtbot.waitUntil(lambda: win.conversation.state.loaded, timeout=10_000)
    win.conversation.composer.setPlainText("Delegate the search")
    win.conversation.send()
    try:
        qtbot.waitUntil(lambda: any(isinstance(it, ToolItem) and it.child_session_id
                                    for it in win.conversation.state.transcript.items), timeout=15_000)
        card = the_card(win)
        child = card.child_session_id
        assert child is not None
        assert child_state(card).words == "Working in its own session…"
        shown = QTextDocumentFragment.fromHtml(tool_html(card, False)).toPlainText()
        assert "Sub-agent" in shown
        assert TASK in shown
        assert "Open its session" in shown

        view = win.conversation.view
        row = win.conversation.state.transcript.find(card.key)
        assert row is not None
        view.scrollTo(view.model().index(row, 0))
        qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=open_link_point(view, row))
        qtbot.waitUntil(lambda: any(w.session_id == child for w in controller.windows), timeout=10_000)
        child_win = next(w for w in controller.windows if w.session_id == child)
        qtbot.addWidget(child_win)
        assert not card.expanded, "Open does not also expand the card"
        assert win.session_id == sid, "the parent's conversation stays where it was"
        qtbot.waitUntil(lambda: child_win.conversation.state.loaded, timeout=10_000)
        qtbot.waitUntil(lambda: child_win.conversation.state.status == "running", timeout=10_000)
        # A second window on the parent, opened mid-call, finds the sub-agent too.
        again = controller.open_session(sid, new_window=True)
        qtbot.addWidget(again)
        qtbot.waitUntil(lambda: again.conversation.state.loaded, timeout=10_000)
        qtbot.waitUntil(lambda: the_card(again).child_session_id == child, timeout=10_000)
    finally:
        release.set()

    qtbot.waitUntil(lambda: win.conversation.state.status == "idle"
                    and the_card(win).status == "ok", timeout=20_000)
    card = the_card(win)
    assert card.child_session_id == child, "kept once the stored rows replace the live card"
    assert child_state(card).done
    shown = QTextDocumentFragment.fromHtml(tool_html(card, False)).toPlainText()
    assert "src/big.bin, 12 MB." in shown
    qtbot.waitUntil(lambda: child_win.conversation.state.status == "idle", timeout=10_000)
    # The sidebar lists the person's session only.
    listed = drive(qtbot, controller.link.call(SessionList()))
    assert [s.session_id for s in listed.sessions] == [sid]
    qtbot.waitUntil(lambda: [r.session_id for r in controller.main.sidebar.sessions.rows] == [sid],
                    timeout=5_000)


def test_the_answer_is_markdown_rendered_with_its_code_blocks_copyable(qapp: Any) -> None:
    answer = ("Two functions raise:\n\n- `parse_date` (line 5)\n- **parse_range** (line 14)\n\n"
              "```python\nparse_date('2026-02-30')\n```")
    t, ev = Transcript(), Events()
    t.apply(ev.started("t1", "a1"))
    t.apply(ev.tool_start("t1", "c1", name="delegate", task="Find what raises"))
    t.apply(ev.tool_complete("t1", "c1", name="delegate", output=answer,
                             meta={"child_session_id": "ses_child", "child_outcome": "completed"}))
    item = t.items[-1]
    assert isinstance(item, ToolItem)
    item.expanded = True
    rendered = card(item, "done", " · 2.0 s", look(False, 10.0))
    shown = QTextDocumentFragment.fromHtml(rendered.html).toPlainText()
    assert "`parse_date`" not in shown, "inline code rendered"
    assert "parse_date (line 5)" in shown
    assert "**" not in shown, "emphasis rendered"
    assert rendered.code == ("parse_date('2026-02-30')",), "its code block has a Copy link"
    plain = tool_html(item, False)
    assert "`parse_date`" in QTextDocumentFragment.fromHtml(plain).toPlainText(), \
        "tool_html (for text exports) keeps the answer as written"
