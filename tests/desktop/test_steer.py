"""Steering from the window: while a turn runs the composer offers Steer (into the turn, read
at its next step) beside Queue (after it); the steer waits in the queue area, then shows in
the transcript where the model read it."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from desktop.qt.controller import Controller
from desktop.state.transcript import AssistantItem, ToolItem, UserItem
from tests.fakes.openai_server import FakeOpenAI, Reply

from .test_session_window import new_session, open_window, texts, turn_done, type_and_send


def open_gate_later(gate: Path) -> threading.Thread:
    """Writes to the fifo `gate` (which `cat gate` reads, blocking until then) in a thread:
    opening a fifo for writing blocks until its reader has it open."""
    def write() -> None:
        with gate.open("w") as fifo:
            fifo.write("open\n")

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return thread


def test_steer_joins_the_running_turn_and_shows_where_the_model_read_it(
    qtbot: Any, controller: Controller, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    fake_provider.script(
        Reply.calls({"name": "terminal", "arguments": {"command": "cat gate"}}),
        Reply(deltas=["Done, with tabs."]),
    )
    sid = new_session(qtbot, controller, tmp_path)
    win = open_window(qtbot, controller, sid)
    conv = win.conversation
    assert not conv.steer_button.isVisible()
    assert conv.send_button.text() == "Send"
    type_and_send(qtbot, win, "reformat the file")
    qtbot.waitUntil(lambda: any(isinstance(it, ToolItem) for it in conv.state.transcript.items),
                    timeout=15_000)
    qtbot.waitUntil(conv.steer_button.isVisible, timeout=5_000)
    assert conv.send_button.text() == "Queue", "Send becomes Queue while a turn runs"
    assert "Steer the running turn" in conv.composer.placeholderText()

    conv.composer.setPlainText("use tabs, not spaces")
    conv.steer_button.click()
    qtbot.waitUntil(lambda: len(conv.queue_rows) == 1, timeout=10_000)
    row = next(iter(conv.queue_rows.values()))
    assert row.label.text().startswith("Steering at the next step")

    writer = open_gate_later(gate)
    qtbot.waitUntil(lambda: turn_done(win, 2), timeout=20_000)
    writer.join(5)
    assert not conv.state.queue, "the steer left the queue when it joined"
    # The queue area follows the state at the window's next refresh (a coalescing timer).
    qtbot.waitUntil(lambda: not conv.queue_rows, timeout=5_000)
    assert texts(win, UserItem) == ["reformat the file", "use tabs, not spaces"]
    kinds = [type(it).__name__ for it in conv.state.transcript.items
             if isinstance(it, (UserItem, ToolItem, AssistantItem))]
    assert kinds == ["UserItem", "ToolItem", "UserItem", "AssistantItem"], kinds
    assert texts(win, AssistantItem) == ["Done, with tabs."]
    assert len(fake_provider.requests) == 2, "one turn: the steer did not start another"
    qtbot.waitUntil(lambda: not conv.steer_button.isVisible(), timeout=5_000)
    assert conv.send_button.text() == "Send"
