"""The message box's decisions: what a keypress does, what the buttons say, the long-message
warning and where a quote goes."""

from __future__ import annotations

from desktop.state.composer import (
    IDLE_HINT,
    RUNNING_HINT,
    key_action,
    long_note,
    mode,
    quote_after,
    stop_enabled,
)


def test_enter_sends_alt_enter_steers_shift_enter_types() -> None:
    assert key_action(enter=True, shift=False, alt=False) == "send"
    assert key_action(enter=True, shift=False, alt=True) == "steer"
    assert key_action(enter=True, shift=True, alt=False) is None, "Shift+Enter is a new line"
    assert key_action(enter=True, shift=True, alt=True) is None
    assert key_action(enter=False, shift=False, alt=True) is None, "another key is typing"


def test_a_running_turn_turns_send_into_queue_and_shows_steer() -> None:
    for status in ("running", "waiting_approval"):
        m = mode(status)
        assert (m.steering, m.send_text, m.send_icon, m.placeholder) == (
            True, "Queue", "queue", RUNNING_HINT)
        assert "after the running turn" in m.send_tip
    for status in ("idle", "queued", "unknown"):
        m = mode(status)
        assert (m.steering, m.send_text, m.send_icon, m.send_tip, m.placeholder) == (
            False, "Send", "send", "", IDLE_HINT)


def test_stop_takes_a_click_only_while_busy() -> None:
    assert stop_enabled(True)
    assert not stop_enabled(False)


def test_a_long_message_warns_past_the_estimated_token_limit() -> None:
    assert long_note(0) is None
    assert long_note(32_003) is None, "8,000 tokens is not over the limit"
    assert long_note(32_004) == "Long message: about 8,001 tokens, sent with every turn from now on"


def test_a_quote_goes_after_a_blank_line_and_leaves_a_line_to_type_on() -> None:
    assert quote_after("", "a\nb") == "> a\n> b\n\n"
    assert quote_after("  \n", "a") == "> a\n\n", "only blanks: nothing to keep apart"
    assert quote_after("hi", "a") == "\n\n> a\n\n"
    assert quote_after("hi\n", "a") == "\n> a\n\n"
    assert quote_after("hi\n\n\n", "a") == "> a\n\n", "a blank line is there already"
