"""Session search and where it matched: `sessions.search` names each session's best message,
`sessions.matches` makes the snippets (FTS5 snippet() with nonce markers, then
`store/snippets.py`), on a real migrated SQLite file.  The snippet is plain text with
code-point offsets, whatever the message holds or the query asks."""

from __future__ import annotations

import random
import re
import sqlite3
import unicodedata
from collections.abc import Iterator
from pathlib import Path

import pytest

from backend import wire
from backend.store import messages, sessions, snippets
from backend.store.db import Tx
from backend.store.migrations import migrate
from shared.protocol import SNIPPET_MAX, SearchMatch, SessionListResult


@pytest.fixture
def tx(tmp_path: Path) -> Iterator[Tx]:
    conn = sqlite3.connect(tmp_path / "state.db", isolation_level=None)
    conn.row_factory = sqlite3.Row
    migrate(conn)
    yield Tx(conn)
    conn.close()


def session(tx: Tx, sid: str, title: str, *texts: str) -> list[str]:
    """Makes a session with messages; returns their message ids."""
    sessions.insert(tx, sid, title, "/", "m")
    return [messages.insert(tx, sid, "user", text) for text in texts]


def find(tx: Tx, query: str, limit: int = 50) -> list[SearchMatch]:
    hits = sessions.search(tx, query, limit, 0)
    found = [wire.match(m) for m in sessions.matches(tx, query, hits)]
    assert [m.session_id for m in found] == [h.session.session_id for h in hits]
    for m in found:
        check_shape(m)
    return found


def only(tx: Tx, query: str) -> SearchMatch:
    found = find(tx, query)
    assert len(found) == 1, found
    return found[0]


def marked(m: SearchMatch) -> list[str]:
    return [m.snippet[s:e] for s, e in m.highlights]


def check_shape(m: SearchMatch) -> None:
    assert len(m.snippet) <= SNIPPET_MAX, (len(m.snippet), m.snippet[:80])
    assert m.snippet == m.snippet.strip(" "), repr(m.snippet)
    assert "  " not in m.snippet
    assert not re.search(r"[\x00-\x1f\x7f-\x9f]", m.snippet)
    last = 0
    for s, e in m.highlights:
        assert last <= s < e <= len(m.snippet), m.highlights  # ascending, disjoint, inside
        last = e


def fold(text: str) -> str:
    """Roughly what FTS5's unicode61 tokenizer does to a word: lower case, no accents."""
    bare = "".join(c for c in unicodedata.normalize("NFD", text) if not unicodedata.combining(c))
    return bare.lower()


# --- which message, and what is marked ----------------------------------------------------------


def test_the_best_message_is_named_and_its_words_marked(tx: Tx) -> None:
    ids = session(tx, "s", "misc", "an aside that mentions zebras once among many other words here",
                  "zebra zebra crossing", "nothing to see")
    m = only(tx, "zeb")
    assert m.message_id == ids[1], "bm25 prefers the short message with the term twice"
    assert m.snippet == "zebra zebra crossing"
    assert m.highlights == [(0, 5), (6, 11)]


def test_every_word_of_the_query_is_marked_as_a_whole_word(tx: Tx) -> None:
    session(tx, "s", "misc", "Tell me about the Zebra crossing near the station")
    m = only(tx, "zeb CROSS stat")
    assert marked(m) == ["Zebra", "crossing", "station"]


def test_a_title_only_match_has_no_message_and_marks_the_title(tx: Tx) -> None:
    session(tx, "s", "Apricot planning for apricots", "unrelated words")
    m = only(tx, "APRICOT")
    assert m.message_id is None
    assert m.snippet == "Apricot planning for apricots"
    assert marked(m) == ["Apricot", "apricot"], "as LIKE matched it: the query as a substring"


def test_a_title_match_with_matching_messages_points_at_the_message(tx: Tx) -> None:
    ids = session(tx, "s", "zebra notes", "the zebra is striped")
    m = only(tx, "zebra")
    assert (m.message_id, marked(m)) == (ids[0], ["zebra"])


def test_a_title_matched_inside_a_word_marks_that_part(tx: Tx) -> None:
    session(tx, "s", "Refactoring the parser")
    m = only(tx, "factor")
    assert (m.message_id, marked(m)) == (None, ["factor"])


def test_each_listed_session_gets_its_own_match_in_order(tx: Tx) -> None:
    a = session(tx, "a", "misc", "the okapi lives in the forest")
    b = session(tx, "b", "misc", "an okapi and a giraffe are cousins, okapi okapi")
    session(tx, "c", "okapi facts")
    found = find(tx, "okapi")
    assert [m.session_id for m in found] == ["c", "b", "a"]
    assert [m.message_id for m in found] == [None, b[0], a[0]]
    assert all("okapi" in [w.lower() for w in marked(m)] for m in found)


def test_matches_of_a_page_take_one_query(tx: Tx) -> None:
    for i in range(30):
        session(tx, f"s{i}", "misc", f"message {i} about lemurs", f"more on lemur number {i}")
    hits = sessions.search(tx, "lemur", 50, 0)
    statements: list[str] = []
    tx.conn.set_trace_callback(statements.append)
    try:
        found = [wire.match(m) for m in sessions.matches(tx, "lemur", hits)]
    finally:
        tx.conn.set_trace_callback(None)
    assert len(found) == 30
    assert all(m.message_id for m in found)
    ours = [s for s in statements if not s.startswith("--")]  # "--": FTS5's own lookups
    assert len(ours) == 1, ours


def test_no_query_words_no_matches(tx: Tx) -> None:
    session(tx, "s", "misc", "text")
    assert sessions.matches(tx, "   ", []) == []
    assert find(tx, "   ") == []


# --- attacks --------------------------------------------------------------------------------------


@pytest.mark.parametrize("query", [
    '"', '""', '"zebra', 'zebra"', '*', 'zeb*', 'NEAR(', 'NEAR(zebra crossing)', 'NEAR(zebra, 2)',
    '-', '-zebra', 'zebra -crossing', 'zebra OR lion', 'zebra AND', 'NOT zebra', '^zebra',
    'content:zebra', 'session_id:s', '(zebra)', 'zebra)', '{content}: zebra', "zebra'", '+zebra',
])
def test_fts_syntax_in_the_query_is_plain_words(tx: Tx, query: str) -> None:
    session(tx, "s", "misc", "the zebra crossing (near the lion) - OR AND NOT content")
    found = find(tx, query)  # never an FTS5 syntax error
    terms = [fold(t) for t in re.findall(r"\w+", query)]
    for m in found:
        assert m.message_id is not None
        for word in marked(m):
            assert any(fold(word).startswith(t) for t in terms), (query, word)


def test_operators_are_searched_as_words(tx: Tx) -> None:
    session(tx, "s", "misc", "use NEAR or OR in the query")
    assert marked(only(tx, "NEAR(")) == ["NEAR"]
    assert marked(only(tx, "or")) == ["or", "OR"]


def test_a_query_word_with_punctuation_marks_the_phrase(tx: Tx) -> None:
    session(tx, "s", "misc", "run foo-bar now, not foo alone or bar alone")
    assert marked(only(tx, "foo-ba")) == ["foo-bar"]


def test_markup_in_a_message_is_text(tx: Tx) -> None:
    text = 'say <b>bold</b> and [link](x) and \\x01 "<mark>" &amp; {{tpl}}'
    session(tx, "s", "misc", text)
    m = only(tx, "bold")
    assert m.snippet == text
    assert m.highlights == [(text.index("bold"), text.index("bold") + 4)]
    assert marked(only(tx, "b")) == ["b", "bold", "b"], "the b of <b> is a word"
    assert marked(only(tx, "mark")) == ["mark"]


def test_marker_lookalikes_in_a_message_are_text(tx: Tx) -> None:
    text = "\x01abc( fake \x01abc) marker [zebra] \x01 \x02 end"
    session(tx, "s", "misc", text)
    m = only(tx, "zebra")
    assert m.snippet == "abc( fake abc) marker [zebra] end", "control characters become spaces"
    assert marked(m) == ["zebra"]


def test_a_message_holding_the_nonce_is_snipped_again_with_another(
    tx: Tx, monkeypatch: pytest.MonkeyPatch
) -> None:
    nonces = iter(["ab" * 16, "cd" * 16])
    monkeypatch.setattr(snippets, "token_hex", lambda n: next(nonces))
    bait = f"\x01{'ab' * 16}(fake\x01{'ab' * 16}) zebra \x01{'ab' * 16}."
    ids = session(tx, "s", "misc", bait)
    m = only(tx, "zebra")
    assert m.message_id == ids[0]
    assert m.snippet == f"{'ab' * 16}(fake {'ab' * 16}) zebra {'ab' * 16}."
    assert marked(m) == ["zebra"]


def test_a_message_that_keeps_holding_the_nonce_falls_back_to_the_title(
    tx: Tx, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(snippets, "token_hex", lambda n: "ab" * 16)
    session(tx, "s", "zebra title", f"zebra {'ab' * 16}")
    m = only(tx, "zebra")
    assert (m.message_id, m.snippet, marked(m)) == (None, "zebra title", ["zebra"])


# --- unicode --------------------------------------------------------------------------------------


def test_offsets_count_code_points_past_emoji_and_accents(tx: Tx) -> None:
    text = "😀🎉 naïve café 👩‍👩‍👧 Zürich straße ÉCOLE"
    session(tx, "s", "misc", text)
    m = only(tx, "zur")
    assert m.snippet == text
    assert marked(m) == ["Zürich"]
    assert m.highlights == [(text.index("Zürich"), text.index("Zürich") + 6)]
    assert marked(only(tx, "cafe naive")) == ["naïve", "café"], "accents are ignored"
    assert marked(only(tx, "école")) == ["ÉCOLE"]
    assert marked(only(tx, "straß")) == ["straße"]


def test_decomposed_accents_stay_inside_the_marked_word(tx: Tx) -> None:
    text = "un cafe\u0301 noir"  # é as e + combining acute
    session(tx, "s", "misc", text)
    assert marked(only(tx, "cafe")) == ["cafe\u0301"]


def test_a_title_with_emoji_is_marked_at_code_points(tx: Tx) -> None:
    session(tx, "s", "🚀🚀 Launch plan")
    m = only(tx, "launch")
    assert (m.message_id, m.highlights, marked(m)) == (None, [(3, 9)], ["Launch"])


# --- long messages ------------------------------------------------------------------------------


def test_a_long_message_gives_a_bounded_snippet_around_the_match(tx: Tx) -> None:
    text = "filler word " * 500 + "the hidden zebra sleeps " + "tail " * 500
    session(tx, "s", "misc", text)
    m = only(tx, "zebra")
    assert m.snippet.startswith("…")
    assert m.snippet.endswith("…")
    assert "hidden zebra sleeps" in m.snippet
    assert marked(m) == ["zebra"]
    assert len(m.snippet.split()) <= 16


def test_a_match_after_a_code_block_shows_in_words_without_markdown(tx: Tx) -> None:
    code = "```python\n" + "".join(f"total += rows[{i}]  # add it\n" for i in range(80)) + "```\n\n"
    text = f"# Slow loop\n\n{code}## Why\n\nThe **zebra** step re-reads `rows` on each pass.\n"
    assert text.index("zebra") > 2000
    session(tx, "s", "misc", text)
    m = only(tx, "zebra")
    assert marked(m) == ["zebra"]
    assert "Why The zebra step re-reads rows on each" in m.snippet
    assert "`" not in m.snippet
    assert "**" not in m.snippet
    assert "## Why" not in m.snippet
    assert "# add it" in m.snippet, "a # inside a line is text"
    # A fence's language that matched stays, marked; its backticks go.
    m = only(tx, "python")
    assert m.snippet.startswith("Slow loop python total += rows[0]")
    assert marked(m) == ["python"]


def test_a_long_text_is_cut_with_the_match_in_the_middle() -> None:
    text = "```sh\n" + "make all && " * 200 + "\n```\n\nThen the **zebra** runs. " + "After that. " * 200
    text, spans = snippets.render(text, snippets.word_spans(text, "zebra"))
    assert (text[0], text[-1]) == ("…", "…")
    assert len(text) <= SNIPPET_MAX
    assert [text[s:e] for s, e in spans] == ["zebra"]
    assert "`" not in text
    assert "*" not in text
    middle = (spans[0][0] + spans[0][1]) / 2
    assert abs(middle - len(text) / 2) < 12, (middle, text)


def test_a_title_keeps_its_backticks() -> None:
    title = "Fix `load` in **bold**"
    assert snippets.render(title, snippets.title_spans(title, "load"), markdown=False) == (title, [(5, 9)])


def test_long_punctuation_between_words_is_cut(tx: Tx) -> None:
    text = "start " + "=" * 50_000 + " giraffe " + "-" * 50_000 + " end"
    session(tx, "s", "misc", text)
    m = only(tx, "giraffe")
    assert len(m.snippet) <= SNIPPET_MAX
    assert marked(m) == ["giraffe"]
    assert m.snippet.startswith("…")
    assert m.snippet.endswith("…")


def test_a_giant_word_is_cut_inside_its_highlight(tx: Tx) -> None:
    session(tx, "s", "misc", "okapi" + "z" * 100_000 + " end")
    m = only(tx, "okap")
    assert len(m.snippet) == SNIPPET_MAX
    assert m.snippet.endswith("…")
    assert m.highlights == [(0, SNIPPET_MAX - 1)]
    m = only(tx, "end")
    assert m.snippet.startswith("…")
    assert m.snippet.endswith(" end")
    assert marked(m) == ["end"]


def test_a_nul_in_a_message_loses_text_but_never_a_mark(tx: Tx) -> None:
    # FTS5's snippet() copies text with printf's %.*s, which stops at a NUL: what follows
    # a NUL up to the next marked word is left out.  The marks stay exact.
    session(tx, "s", "misc", "lead zebra \x00 lost words then zebra tail")
    m = only(tx, "zebra")
    assert m.snippet == "lead zebra zebra tail"
    assert marked(m) == ["zebra", "zebra"]


def test_newlines_and_tabs_become_single_spaces(tx: Tx) -> None:
    session(tx, "s", "misc", "\n\n  first line\n\tsecond\r\n  zebra   line  \n")
    m = only(tx, "zebra")
    assert m.snippet == "first line second zebra line"
    assert marked(m) == ["zebra"]


def test_random_messages_keep_every_invariant(tx: Tx) -> None:
    rng = random.Random(7)
    words = ["zebra", "Zébra", "zèbre", "ZEBU", "café", "cafe\u0301", "naïve", "😀", "🎉x", "x🎉",
             "<b>", "</b>", "[zeb]", "foo-bar", "a_b", "(", ")", '"', "*", "\n", "\t", "  ", "—",
             "日本語", "zebra" * 30, "=" * 300, "\u200b", "\x00"]
    texts: dict[str, str] = {}
    for i in range(60):
        texts[f"s{i}"] = " ".join(rng.choice(words) for _ in range(rng.randrange(1, 120)))
        session(tx, f"s{i}", "misc", texts[f"s{i}"])
    for query in ["zeb", "ZEB cafe", "na", "foo-b", "x", "日本", "zebrazebra", "b"]:
        terms = [fold(t) for t in query.split()]
        for m in find(tx, query):
            assert m.message_id is not None
            assert m.highlights, (query, m.snippet)
            if "\x00" not in texts[m.session_id]:  # see test_a_nul_in_a_message_...
                shown = re.sub(r"[\s\x00-\x1f\x7f-\x9f]+", " ", texts[m.session_id]).strip()
                assert m.snippet.strip("…") in shown, "a snippet is a piece of the message"
            for word in marked(m):
                folded = fold(word)
                parts = re.findall(r"\w+", folded)
                assert any(folded.startswith(t) or (parts and parts[0].startswith(t.split("-")[0]))
                           for t in terms), (query, word)


# --- snippets.py directly ------------------------------------------------------------------------


def test_parse_reads_only_its_own_markers() -> None:
    marks = snippets.Markers()
    out = f"{marks.cut}a {marks.open}zebra{marks.close} b \x01(x\x01) {marks.open}z{marks.close}{marks.cut}"
    assert snippets.parse(out, marks) == ("a zebra b \x01(x\x01) z", [(2, 7), (16, 17)], True, True)


def test_title_spans_follow_like() -> None:
    assert snippets.title_spans("Über ÜBER über", "über") == [(10, 14)], "LIKE folds ASCII only"
    assert snippets.title_spans("aaaa", "aa") == [(0, 2), (2, 4)]
    assert snippets.title_spans("50% off_x", " 50% ") == [(0, 3)]
    assert snippets.title_spans("x", "  ") == []


def test_render_moves_spans_with_the_collapsed_whitespace() -> None:
    text = "  a \n\n bb\t\tccc   "
    spans = [(7, 9), (11, 14)]
    assert (text[7:9], text[11:14]) == ("bb", "ccc")
    assert snippets.render(text, spans) == ("a bb ccc", [(2, 4), (5, 8)])
    assert snippets.render(text, spans, True, True) == ("…a bb ccc…", [(3, 5), (6, 9)])


def test_the_wire_leaves_matches_out_when_there_are_none() -> None:
    from shared.codec import encode

    plain = SessionListResult(sessions=[], next_cursor=None)
    assert "matches" not in encode(plain)
    found = SessionListResult(sessions=[], next_cursor=None, matches=[
        SearchMatch(session_id="s", message_id=None, snippet="t", highlights=[(0, 1)])])
    assert '"matches":[{"session_id":"s","message_id":null,"snippet":"t","highlights":[[0,1]]}]' in (
        encode(found))
