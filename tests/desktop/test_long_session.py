"""Long sessions in a session window: a 100k-message transcript is paged, never loaded whole.

The session is seeded straight into the backend's SQLite file (tests/desktop/seed.py) with
the backend stopped, then read through the real backend and a real window (offscreen).
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from PySide6.QtCore import QPoint, QRect
from PySide6.QtWidgets import QApplication

from desktop.qt.controller import Controller
from desktop.qt.session_window import Window
from desktop.state.transcript import ToolItem
from shared import protocol as p
from shared.methods import SessionGet, SessionList, SessionMessages
from tests.integration.backend_proc import REPO, Backend

from .conftest import drive
from .seed import PAGE, SeededSession, seed_long_session_info

LONG = 100_000

Seed = Callable[[int], SeededSession]


@pytest.fixture
def seed(desk_backend: Backend) -> Seed:
    """``seed(n)``: a session of n messages, written while the backend is stopped, then it restarts.

    Call it before `make_controller`, so the app connects to the restarted backend."""

    def make(n: int) -> SeededSession:
        assert desk_backend.terminate() == 0, "the backend stops cleanly before the seeding"
        try:
            made = seed_long_session_info(desk_backend.data_dir, n)
        finally:
            desk_backend.start()
        print(f"\nseeded {n:,} messages in {made.seconds:.2f} s")
        return made

    return make


@pytest.fixture
def controller_after(make_controller: Any) -> Callable[[], Controller]:
    """A controller made when the test asks (after seeding), not before."""
    return lambda: make_controller()


def page_items(messages: list[p.Message]) -> int:
    """How many display rows a page of messages should make, counted independently of
    `items_from_messages`: one per user row, per assistant row with text, per tool call, per
    note, and one per result whose call is not on the page."""
    calls = {c.call_id for m in messages for c in (m.tool_calls or [])}
    n = 0
    for m in messages:
        if m.role in ("user", "system_note"):
            n += 1
        elif m.role == "assistant":
            n += bool(m.content) + len(m.tool_calls or [])
        elif m.role == "tool" and m.call_id not in calls:
            n += 1
    return n


def tool_counts(win: Window) -> Counter[str]:
    return Counter(it.call_id for it in win.conversation.state.transcript.items if isinstance(it, ToolItem))


def row_rect(win: Window, key: str) -> QRect:
    row = win.conversation.state.transcript.find(key)
    assert row is not None, key
    return win.conversation.view.visualRect(win.conversation.model.index(row))


def test_a_seeded_session_reads_back_through_the_backend(
    qtbot: Any, seed: Seed, controller_after: Callable[[], Controller]
) -> None:
    n = 2_500
    seeded = seed(n)
    link = controller_after().link
    session = drive(qtbot, link.call(SessionGet(session_id=seeded.session_id))).session
    assert session.message_count == n
    assert session.status == "idle"
    assert session.usage.input_tokens > 0
    # Every row, newest page first, 1000 at a time: contiguous ids, in order, nothing twice.
    rows: list[p.Message] = []
    before: str | None = None
    while True:
        page = drive(qtbot, link.call(SessionMessages(session_id=seeded.session_id, limit=1000,
                                                      before_id=before)))
        rows[:0] = page.messages
        if not page.has_more:
            break
        before = page.messages[0].message_id
    assert [m.message_id for m in rows] == [seeded.message_id(i) for i in range(n)]
    assert [m.created_at for m in rows] == sorted(m.created_at for m in rows)
    roles = Counter(m.role for m in rows)
    assert set(roles) == {"user", "assistant", "tool", "system_note"}, roles
    # Turns: each starts with its user row; every result answers an earlier call of its turn,
    # exactly once; every call has its result.
    open_calls: dict[str, str] = {}
    all_calls = [c.call_id for m in rows for c in (m.tool_calls or [])]
    assert len(all_calls) == len(set(all_calls)), "call ids are unique"
    turn: str | None = None
    for m in rows:
        if m.role == "user":
            assert m.turn_id != turn
            assert not open_calls
            turn = m.turn_id
        assert m.turn_id == turn, m
        for call in m.tool_calls or []:
            open_calls[call.call_id] = call.name
            assert call.arguments
        if m.role == "tool":
            assert m.call_id is not None
            assert open_calls.pop(m.call_id) == m.tool_name
            assert m.status in ("ok", "error")
            assert m.meta is not None
            assert m.meta["duration_ms"] >= 0
    assert not open_calls
    assert any("```" in m.content for m in rows if m.role == "assistant")
    # The layout paging tests rely on: the newest page opens with the split call's results.
    newest = rows[-PAGE:]
    assert [m.call_id for m in newest[:2]] == seeded.split_call_ids
    assert [c.call_id for c in rows[-PAGE - 1].tool_calls or []] == seeded.split_call_ids
    # The full-text index was kept in sync: a search finds the session by message text.
    found = drive(qtbot, link.call(SessionList(query="nested loop"))).sessions
    assert [s.session_id for s in found] == [seeded.session_id]


def test_a_100k_message_session_opens_with_one_page_and_pages_up_one_at_a_time(
    qtbot: Any, qapp: QApplication, seed: Seed, controller_after: Callable[[], Controller]
) -> None:
    seeded = seed(LONG)
    controller = controller_after()
    sid = seeded.session_id
    t0 = time.perf_counter()
    win = controller.open_session(sid)
    qtbot.waitUntil(lambda: win.conversation.state.loaded, timeout=15_000)
    print(f"window loaded in {(time.perf_counter() - t0) * 1000:.0f} ms")
    bar = win.conversation.view.verticalScrollBar()
    qtbot.waitUntil(lambda: bar.maximum() > 0 and bar.value() == bar.maximum(), timeout=5_000)
    qtbot.wait(200)  # anything that would fetch more on its own has had its chance
    t = win.conversation.state.transcript
    assert t.fetched_messages == PAGE
    assert t.has_more
    assert t.oldest_message_id == seeded.message_id(-PAGE)
    newest = drive(qtbot, controller.link.call(SessionMessages(session_id=sid, limit=PAGE)))
    expected_rows = page_items(newest.messages)
    assert win.conversation.model.rowCount() == len(t.items) == expected_rows
    assert PAGE // 2 < expected_rows <= 2 * PAGE
    assert drive(qtbot, controller.link.call(SessionGet(session_id=sid))).session.message_count == LONG
    # The newest page opens with two results whose calls are on the older page: their cards
    # are there, but know only the tool's name.
    first_cards = [f"call:{c}" for c in seeded.split_call_ids]
    assert [it.key for it in t.items[:2]] == first_cards
    assert all(not it.arguments for it in t.items[:2] if isinstance(it, ToolItem))

    # Responsive: typing goes into the composer at once, events are processed promptly.
    qtbot.keyClicks(win.conversation.composer, "still typing")
    assert win.conversation.composer.toPlainText() == "still typing"
    start = time.perf_counter()
    qapp.processEvents()
    print(f"processEvents with the window open: {(time.perf_counter() - start) * 1000:.1f} ms")

    # Scrolled to the very top: exactly one more page, and the reader stays where they were.
    bar.setValue(0)
    anchor = first_cards[0]
    assert row_rect(win, anchor).top() <= 5  # the newest page's first row is at the top
    qtbot.waitUntil(lambda: t.fetched_messages == 2 * PAGE and not win.conversation.fetching, timeout=10_000)
    qtbot.wait(300)
    assert t.fetched_messages == 2 * PAGE, "one scroll to the top fetches one page, not more"
    assert t.oldest_message_id == seeded.message_id(-2 * PAGE)
    assert bar.value() > 0, "the view did not jump to the top of the new page"
    viewport = win.conversation.view.viewport().rect()
    rect = row_rect(win, anchor)
    assert viewport.intersects(rect), (rect, viewport)
    print(f"after the fetch the anchor row is at y={rect.top()} (was 0), scroll value {bar.value()}")
    assert abs(rect.top()) <= 40, f"the row that was at the top moved to y={rect.top()}"
    anchor_row = t.find(anchor)
    assert anchor_row is not None
    assert win.conversation.view.indexAt(QPoint(5, 1)).row() >= anchor_row - 1  # older rows are above
    assert win.conversation.model.rowCount() == len(t.items)

    # The call whose results opened the newer page: one card per call, now complete.
    counts = tool_counts(win)
    assert all(n == 1 for n in counts.values()), [c for c, n in counts.items() if n > 1]
    for cid in seeded.split_call_ids:
        i = t.find(f"call:{cid}")
        assert i is not None
        card = t.items[i]
        assert isinstance(card, ToolItem)
        assert card.arguments
        assert card.name
        assert card.status in ("ok", "error")
        assert card.output
        assert card.turn_id == seeded.split_turn_id
    older = drive(qtbot, controller.link.call(SessionMessages(session_id=sid, limit=2 * PAGE)))
    assert len(t.items) == page_items(older.messages)

    # And again: each scroll to the top fetches one more page.
    bar.setValue(0)
    qtbot.waitUntil(lambda: t.fetched_messages == 3 * PAGE and not win.conversation.fetching, timeout=10_000)
    qtbot.wait(200)
    assert t.fetched_messages == 3 * PAGE
    assert all(n == 1 for n in tool_counts(win).values())


VOID_CALLS = """
import os, sys
os.environ["QT_QPA_PLATFORM"] = "offscreen"
if sys.argv[1] == "compat":
    import desktop.qt.compat
from PySide6.QtWidgets import QApplication, QLabel
app = QApplication([])
label = QLabel()
for _ in range(100_000):
    label.setText("x")  # a C++ void method: PySide6 6.12 takes a reference from None each time
print("alive")
"""


@pytest.mark.parametrize("prelude", ["compat", "bare"])
def test_a_long_session_does_not_use_up_none(prelude: str) -> None:
    """Painting and paging a long transcript makes many thousands of void Qt calls; with PySide6
    6.12 on Python 3.11 each one takes a reference from None, which aborts the process after a
    few thousand (the desktop bench aborted while paging up a 100k session).  desktop.qt.compat gives None
    references enough for any run.  `bare` shows the bug is still there: when it fails,
    PySide6 fixed it and `compat.keep_none_alive` can go."""
    done = subprocess.run([sys.executable, "-c", VOID_CALLS, prelude], cwd=REPO, capture_output=True,
                          text=True, timeout=60)
    if prelude == "compat":
        assert done.returncode == 0, done.stderr[-2000:]
        assert done.stdout.strip() == "alive"
    else:
        assert done.returncode != 0, "PySide6 no longer loses references to None on void calls"
        assert "deallocating None" in done.stderr


def test_an_older_page_is_measured_before_it_goes_in_and_its_completed_cards_again(
    qtbot: Any, seed: Seed, controller_after: Callable[[], Controller]
) -> None:
    """The rows of an older page are measured a few at a time before they are added (the
    view paints meanwhile), so the relayout that adds them measures none of them: only the
    cards the page completes (their call on it, their result below) are measured again, as
    they now are (not as the bare call was measured ahead)."""
    seeded = seed(3 * PAGE)
    controller = controller_after()
    win = controller.open_session(seeded.session_id)
    conv = win.conversation
    qtbot.waitUntil(lambda: conv.state.loaded and conv.model.rowCount() > 0, timeout=15_000)
    t = conv.state.transcript
    delegate = conv.view.delegate
    first_cards = [f"call:{c}" for c in seeded.split_call_ids]
    assert [it.key for it in t.items[:2]] == first_cards
    measured_before: set[Any] = set()
    conv.model.rowsAboutToBeInserted.connect(
        lambda *_: measured_before.update(delegate._heights))
    conv.loading.fetch_older()
    qtbot.waitUntil(lambda: t.fetched_messages == 2 * PAGE and not conv.fetching, timeout=10_000)
    conv.view.doItemsLayout()
    measured_at_insert = {key[0] for key in set(delegate._heights) - measured_before}
    assert measured_before, "the page's rows were measured before they went in"
    # (An answer bar the new rows call for is made as they go in: measured then.)
    assert {k for k in measured_at_insert if not k.startswith("bar:")} == set(first_cards)
    for key in first_cards:
        row = t.find(key)
        assert row is not None
        card = t.items[row]
        assert isinstance(card, ToolItem)
        assert card.arguments, "the card has its call now"
        assert card.output, "and still its result"
