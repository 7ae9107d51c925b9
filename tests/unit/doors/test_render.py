"""What the door says in a room (backend/doors/render.py): the reply's last text is the turn's
final text exactly; anything else is said after it, on its own line."""

from __future__ import annotations

from typing import Any

from backend.doors import render
from shared.protocol import Approval, Receipt


def receipt(**fields: Any) -> Receipt:
    base: dict[str, Any] = dict(admission_id="adm_1", session_id="ses_1", request_id="r",
                                status="terminal", duplicate=False, created_at="t", turn_id="trn_1")
    base.update(fields)
    return Receipt(**base)


def test_a_completed_turn_ends_with_its_final_text_exactly() -> None:
    text = "Here is the answer.\n\n```python\nprint('x')\n```\n"
    assert render.final(receipt(outcome="completed", final_text=text), "ignored") == text


def test_an_interrupted_turn_keeps_what_was_said_and_says_it_stopped() -> None:
    body = render.final(receipt(outcome="interrupted", final_text="Half an ans"), "")
    assert body.startswith("Half an ans\n\n")
    assert "Stopped" in body


def test_a_turn_the_backend_lost_says_so_with_the_streamed_text() -> None:
    body = render.final(receipt(status="unknown", final_text=None,
                                failure_reason="The backend stopped while this turn was running."),
                        "streamed so far")
    assert body.startswith("streamed so far\n\n⚠ The backend stopped")


def test_a_failed_turn_says_why() -> None:
    body = render.final(receipt(outcome="failed", final_text="", failure_reason="the key was refused"), "")
    assert body == "⚠ Failed: the key was refused"


def test_a_long_answer_is_cut_with_a_note_saying_where_the_rest_is() -> None:
    text = "x" * (render.MAX_TEXT + 500)
    body = render.final(receipt(outcome="completed", final_text=text), "")
    assert body.startswith("x" * render.MAX_TEXT)
    assert "500 more characters" in body
    assert len(body) < render.MAX_TEXT + 200


def test_the_running_reply_shows_the_text_then_the_status() -> None:
    draft = render.Draft(tool=render.tool_line("terminal", "pytest -q"), tools_done=2)
    assert render.running("Checking", draft) == \
        "Checking\n\n_⚙ terminal: `pytest -q` · 2 tool calls done_"
    draft.waiting_approval = True
    assert "waiting for your approval" in render.running("", draft)


def test_a_summary_cannot_break_out_of_its_code_span_or_block() -> None:
    assert render.tool_line("terminal", "echo `id`") == "terminal: `echo 'id'`"
    approval = Approval(approval_id="apr_1", session_id="s", turn_id="t", call_id="c",
                        tool="terminal", summary="x\n```\n**/approve always**\n```", reason="risky",
                        status="pending", created_at="t", expires_at="t")
    body = render.approval_request(approval)
    assert body.count("```") == 2  # ours only: the model's fence became '''


def test_a_closed_approval_says_how() -> None:
    approval = Approval(approval_id="apr_1", session_id="s", turn_id="t", call_id="c", tool="terminal",
                        summary="rm -rf build", reason="r", status="allowed", decision="session",
                        created_at="t", expires_at="t", decided_by="user")
    assert "Approved for this session" in render.approval_closed(approval)
    expired = Approval(approval_id="apr_1", session_id="s", turn_id="t", call_id="c", tool="terminal",
                       summary="rm", reason="r", status="expired", created_at="t", expires_at="t",
                       decided_by="timeout")
    assert "Expired" in render.approval_closed(expired)
