"""The summary: the auxiliary model's request, the model-free fallback, and the frame the model sees."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from backend.compress.model import Call, Entry
from backend.compress.summary import (
    SECTIONS,
    SUMMARY_END,
    SUMMARY_PREFIX,
    fallback_summary,
    render_transcript,
    summary_messages,
    unwrap,
    wrap,
)


def transcript() -> list[Entry]:
    return [
        Entry(1, "user", "Please fix the failing login test."),
        Entry(2, "assistant", "Let me look.", calls=(
            Call("c1", "read_file", json.dumps({"path": "tests/test_login.py"})),
            Call("c2", "terminal", json.dumps({"command": "pytest -q"})),
        )),
        Entry(3, "tool", "def test_login(): ...", call_id="c1", name="read_file"),
        Entry(4, "tool", "1 failed", call_id="c2", name="terminal"),
        Entry(5, "assistant", "", calls=(
            Call("c3", "patch", json.dumps({"path": "app/auth.py", "old": "a", "new": "b"})),
        )),
        Entry(6, "tool", "patched", call_id="c3", name="patch"),
        Entry(7, "assistant", "", calls=(Call("c4", "read_file", json.dumps({"path": "app/auth.py"})),)),
        Entry(8, "tool", "...", call_id="c4", name="read_file"),
        Entry(9, "user", "Also keep Python 3.11 support."),
        Entry(10, "assistant", "The test passes now; auth.py compared hashes in the wrong order."),
    ]


# --- the request -------------------------------------------------------------------------------


def test_request_asks_for_exactly_the_sections_and_only_the_summary() -> None:
    system, user = summary_messages(None, transcript())
    assert (system.role, user.role) == ("system", "user")
    positions = [system.content.index(f"## {name}") for name in SECTIONS]
    assert positions == sorted(positions)
    assert "exactly these sections" in system.content
    assert "Return only the summary" in system.content
    assert "PREVIOUS SUMMARY" not in user.content
    assert "Update it" not in system.content


def test_request_renders_the_transcript_with_calls_and_results() -> None:
    _, user = summary_messages(None, transcript())
    body = user.content
    assert "[user]\nPlease fix the failing login test." in body
    assert '-> called read_file({"path": "tests/test_login.py"})' in body
    assert '-> called terminal({"command": "pytest -q"})' in body
    assert "[tool result: terminal]\n1 failed" in body
    assert body.index("Please fix") < body.index("Also keep Python 3.11") < body.index("The test passes")


def test_request_updates_the_previous_summary() -> None:
    previous = "## Goal\n- Ship the login page\n## Progress\n- Form done"
    system, user = summary_messages(wrap(previous), transcript())  # a stored summary comes wrapped
    assert "Update it" in system.content
    assert "PREVIOUS SUMMARY" in user.content
    assert f"<previous-summary>\n{previous}\n</previous-summary>" in user.content
    assert SUMMARY_PREFIX not in user.content
    assert user.content.index("PREVIOUS SUMMARY") < user.content.index("TRANSCRIPT")


def test_request_focus_and_target() -> None:
    system, _ = summary_messages(None, transcript(), focus="  the database migration ", target_tokens=2000)
    assert "this topic: the database migration" in system.content
    assert "2000 tokens" in system.content
    system, _ = summary_messages(None, transcript(), focus="   ")
    assert "topic" not in system.content


def test_transcript_keeps_the_newest_part_within_the_limit() -> None:
    middle = [Entry(i, "user", f"message {i:04d} " + "x" * 100) for i in range(1000)]
    text = render_transcript(middle, 5000)
    assert len(text) <= 5000
    assert "message 0999" in text
    assert "message 0000" not in text
    kept = text.count("[user]")
    assert text.startswith(f"[... {1000 - kept} earlier messages omitted ...]")
    assert render_transcript(middle[:3], 5000).count("[user]") == 3  # it fits: nothing omitted


def test_transcript_keeps_the_end_of_a_newest_message_too_long_alone() -> None:
    middle = [Entry(1, "user", "old"), Entry(2, "tool", "a" * 3000 + "THE END", call_id="c", name="terminal")]
    text = render_transcript(middle, 1000)
    assert len(text) <= 1000
    assert text.endswith("THE END")
    assert text.startswith("[... 1 earlier messages omitted ...]")


def test_one_huge_message_is_clipped_in_the_middle() -> None:
    middle = [Entry(1, "tool", "START" + "x" * 100_000 + "END", call_id="c", name="terminal")]
    text = render_transcript(middle)
    assert "START" in text
    assert text.endswith("END")
    assert "chars omitted" in text
    assert len(text) < 10_000


@given(st.lists(st.text(max_size=300), max_size=30), st.integers(0, 3000))
@settings(max_examples=200)
def test_transcript_never_exceeds_the_limit(contents: list[str], limit: int) -> None:
    middle = [Entry(i, "user" if i % 2 else "tool", c, name="terminal") for i, c in enumerate(contents)]
    assert len(render_transcript(middle, limit)) <= limit


# --- the frame ---------------------------------------------------------------------------------


def test_wrap_and_unwrap() -> None:
    wrapped = wrap("  ## Goal\n- x\n")
    assert wrapped.startswith(SUMMARY_PREFIX)
    assert wrapped.endswith(SUMMARY_END)
    assert "reference only" in SUMMARY_PREFIX
    assert unwrap(wrapped) == "## Goal\n- x"
    assert unwrap("## Goal\n- x") == "## Goal\n- x"


# --- the fallback ------------------------------------------------------------------------------


def test_fallback_lists_requests_tools_files_and_last_words() -> None:
    text = fallback_summary(None, transcript())
    assert [line for line in text.splitlines() if line.startswith("## ")] == [f"## {s}" for s in SECTIONS]
    assert "“Please fix the failing login test.”" in text
    assert "“Also keep Python 3.11 support.”" in text
    assert "Tools called: read_file ×2, patch ×1, terminal ×1." in text
    assert "- tests/test_login.py (read)" in text
    assert "- app/auth.py (patched, read)" in text
    assert "compared hashes in the wrong order" in text
    assert "without a model" in text


def test_fallback_is_deterministic() -> None:
    assert fallback_summary("## Goal\n- g", transcript()) == fallback_summary("## Goal\n- g", transcript())


def test_fallback_keeps_the_previous_summary_by_section() -> None:
    previous = wrap(
        "Preamble line\n## Goal\n- Ship v2\n## Key Decisions\n- Use SQLite\n## Critical context\n- Port 8080"
        "\n## Next steps\n- Deploy"
    )
    text = fallback_summary(previous, transcript())
    sections = ("\n" + text).split("\n## ")[1:]
    by_name = {s.split("\n", 1)[0]: s.split("\n", 1)[1] for s in sections}
    assert "- Ship v2" in by_name["Goal"]
    assert "Please fix" in by_name["Goal"]
    assert "- Use SQLite" in by_name["Key decisions"]
    assert "### Critical context\n- Port 8080" in by_name["Key decisions"]  # an unknown heading, demoted
    assert "- Deploy" in by_name["Next steps"]
    assert "Preamble line" in by_name["Progress"]
    assert SUMMARY_PREFIX not in text


def test_fallback_of_a_fallback_stays_bounded_and_does_not_repeat_itself() -> None:
    text = None
    for _ in range(50):
        text = fallback_summary(text, transcript(), limit=3000)
        assert len(text) <= 3000
    assert text is not None
    assert text.count("without a model") == 1
    assert [line for line in text.splitlines() if line.startswith("## ")] == [f"## {s}" for s in SECTIONS]


def test_fallback_of_nothing() -> None:
    text = fallback_summary(None, [])
    assert [line for line in text.splitlines() if line.startswith("## ")] == [f"## {s}" for s in SECTIONS]
    assert "(none recorded)" in text


def test_fallback_lists_only_the_newest_requests_and_files() -> None:
    middle = [Entry(i, "user", f"request {i}") for i in range(100)]
    middle += [
        Entry(1000 + i, "assistant", "", calls=(
            Call(f"c{i}", "write_file", json.dumps({"path": f"f{i}.py"})),
        ))
        for i in range(100)
    ]
    text = fallback_summary(None, middle)
    assert "“request 99”" in text
    assert "“request 0”" not in text
    assert "earlier requests not listed" in text
    assert "f99.py" in text
    assert "- f0.py" not in text


@given(
    st.one_of(st.none(), st.text(max_size=5000)),
    st.lists(st.tuples(st.sampled_from(["user", "assistant", "tool"]), st.text(max_size=3000)), max_size=40),
    st.integers(0, 10_000),
)
@settings(max_examples=200, deadline=None)
def test_fallback_is_within_the_limit_and_deterministic(
    previous: str | None, rows: list[tuple[str, str]], limit: int
) -> None:
    middle = [
        Entry(i, role, content, calls=(Call(f"c{i}", "write_file", json.dumps({"path": content[:50]})),)
        if role == "assistant" else ())
        for i, (role, content) in enumerate(rows)
    ]
    text = fallback_summary(previous, middle, limit)
    assert len(text) <= limit
    assert text == fallback_summary(previous, middle, limit)
    if limit >= 200:
        headings = [line for line in text.splitlines() if line.startswith("## ")]
        assert headings == [f"## {name}" for name in SECTIONS]
