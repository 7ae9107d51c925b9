"""The assistant's markdown as Qt rich text (desktop/qt/markdown.py), without a display."""

from __future__ import annotations

import html
import re

import pytest

from desktop.qt.code_html import PLAIN, STYLES, highlight, plain_color
from desktop.qt.markdown import ACTION, Look, action_of, copy_href, render, stabilize, with_cursor

LOOK = Look(dark=False, text="#111111", muted="#666666", link="#2760c6", border="#dddddd",
            code_bg="#f7f8fa", code_head="#eceef1", inline_code_bg="#eef0f3", quote_bar="#c4c8cf",
            quote_bg="#f6f7f8", table_head="#f0f1f3")

ANSWER = """## Why `load_7` is slow

The slow part is the **nested loop** in `load_7`; each pass _re-reads_ the file.

```python
def load_7(path):
    total = 0  # the sum
    for row in read_rows(path):
        total += row.weight * row.value
    return total
```

- cached the **parsed rows**
- removed the `second` pass

> The cache is per process.

Run `pytest -k load_7` to check.
"""


def shown(markup: str) -> str:
    """The text a reader sees in rendered HTML (tags dropped, entities decoded)."""
    return html.unescape(re.sub(r"<[^>]+>", "", markup))


def test_emphasis_is_italic_and_strong_is_bold_never_underlined() -> None:
    out = render("an _emphasis_, a *star* and **strong** ~~gone~~", LOOK).html
    assert "<i>emphasis</i>" in out
    assert "<i>star</i>" in out
    assert "<b>strong</b>" in out
    assert "<s>gone</s>" in out
    assert "<u>" not in out


def test_raw_html_from_the_model_is_text_and_images_load_nothing() -> None:
    out = render('<img src="file:///etc/passwd"> <b>x</b>\n\n![secret](file:///etc/passwd) '
                 "![remote](http://203.0.113.9/p.png)\n\n<script>alert(1)</script>", LOOK).html
    assert "<img" not in out
    assert "<script" not in out
    assert "<b>x</b>" not in out
    assert '&lt;img src="file:///etc/passwd"&gt;' in out
    assert "[image: remote]" in out
    assert "203.0.113.9" not in out  # an image's address is not even a link


@pytest.mark.parametrize("target", ["javascript:alert(1)", "file:///etc/passwd", f"{ACTION}:copy/0",
                                    "data:text/html,hi", "relative/page.html"])
def test_only_web_and_mail_links_are_links(target: str) -> None:
    out = render(f"[click]({target}) and [web](https://example.com/a?b=1&c=2)", LOOK).html
    assert out.count("<a ") == 1
    assert '<a href="https://example.com/a?b=1&amp;c=2"' in out
    assert "click" in shown(out)


def test_a_fenced_block_has_a_header_with_its_language_and_a_copy_link_for_exactly_its_code() -> None:
    done = render(ANSWER, LOOK)
    code = ANSWER.split("```python\n")[1].split("\n```")[0]
    assert done.code == (code,)
    assert f'href="{copy_href(0)}"' in done.html
    assert action_of(copy_href(0)) == ("copy", 0)
    assert action_of("https://example.com") is None
    assert ">python</span>" in done.html
    colours = set(re.findall(r"color:(#[0-9a-fA-F]{6})", done.html.split("<pre")[1]))
    assert len(colours) >= 4, colours  # keywords, names, numbers, comments...
    assert "Copied" in render(ANSWER, LOOK, copied=0).html


def test_code_is_highlighted_per_theme_and_unknown_languages_stay_plain() -> None:
    light = highlight("def f(): return 1", "python", False)
    dark = highlight("def f(): return 1", "python", True)
    assert light != dark
    assert "<span" in light
    assert "<span" in dark
    assert highlight("a < b", "no-such-language", False) == "a &lt; b"
    assert shown(highlight("x = '<tag>' & 1", "py", False)) == "x = '<tag>' & 1"
    assert render("```\nplain < text\n```", LOOK).code == ("plain < text",)


def test_headings_lists_quotes_and_tables_render_with_spacing() -> None:
    out = render(ANSWER + "\n| a | b |\n|:--|--:|\n| 1 | 2 |\n\n3. three\n4. four\n", LOOK).html
    assert re.search(r"<h2 style=\"margin-top:0px; margin-bottom:\d+px", out)
    assert "border-left: 3px solid #c4c8cf" in out  # the quote's bar
    assert '<th align="left"' in out
    assert '<td align="right"' in out
    assert '<ol start="3"' in out
    # A heading before a code block keeps its distance (Qt drops a block's bottom margin
    # above a table, so the table's own top margin holds it).
    code_table = render("# Title\n\n```\nx\n```", LOOK).html.split("<table")[1]
    assert int(re.search(r"margin-top:(\d+)px", code_table).group(1)) >= 6  # type: ignore[union-attr]
    # The last block ends the message: no margin under it.
    last = render("one\n\ntwo", LOOK).html
    assert re.search(r"<p style=\"margin-top:0px; margin-bottom:0px[^>]*>two</p>$", last)


@pytest.mark.parametrize(("prefix", "expected"), [
    ("Use `load_", "Use `load_`"),
    ("Use `", "Use"),
    ("Use ``a ` b", "Use ``a ` b``"),
    ("A **bold wor", "A **bold wor**"),
    ("A **", "A"),
    ("A `**` and `x", "A `**` and `x`"),
    ("The **nested loop*", "The **nested loop**"),
    ("An *emphasis", "An *emphasis*"),
    ("**a *b", "**a *b***"),
    ("A *", "A"),
    ("2*3 = 6 and a * b and snake_case_na", "2*3 = 6 and a * b and snake_case_na"),
    ("text\n\n``", "text\n\n"),
    ("```py\nx = 1\n", "```py\nx = 1\n```"),
    ("```py\nx = 1\n``", "```py\nx = 1\n```"),
    ("~~~\ncode", "~~~\ncode\n~~~"),
    ("done `a` and **b**.", "done `a` and **b**."),
])
def test_stabilize_closes_what_is_still_arriving(prefix: str, expected: str) -> None:
    assert stabilize(prefix) == expected


def test_every_prefix_of_a_streaming_answer_renders_without_raw_markup() -> None:
    """What a reader sees while the answer streams: never a stray backtick or asterisk (the
    whole answer shows none), whatever chunk boundary the model's deltas fall on."""
    assert "`" not in shown(render(ANSWER, LOOK).html)
    for end in range(1, len(ANSWER) + 1):
        seen = shown(render(ANSWER[:end], LOOK, streaming=True).html)
        assert "`" not in seen, (end, ANSWER[:end][-30:], seen[-60:])
        assert "**" not in seen, (end, ANSWER[:end][-30:], seen[-60:])


def test_a_bold_or_emphasized_phrase_never_shows_its_asterisks_while_it_arrives() -> None:
    text = "The **nested loop** and *this* and **a `code` in bold** end."
    for end in range(1, len(text) + 1):
        seen = shown(render(text[:end], LOOK, streaming=True).html)
        assert "*" not in seen, (text[:end], seen)
        assert "`" not in seen, (text[:end], seen)


def test_a_long_code_block_is_highlighted_once_the_answer_is_finished() -> None:
    text = "```python\n" + "x = 1\n" * 1_000 + "```"  # 6,000 characters of code
    assert "<span" not in render(text, LOOK, streaming=True).html.split("<pre")[1]
    assert "<span" in render(text, LOOK).html.split("<pre")[1]
    short = "```python\nx = 1\n"
    assert "<span" in render(short, LOOK, streaming=True).html.split("<pre")[1]


def test_a_finished_answer_is_unchanged_by_stabilize_and_the_cursor_follows_the_text() -> None:
    assert stabilize(ANSWER) == ANSWER
    assert with_cursor("Hello").endswith("Hello ▍")
    assert with_cursor("```\ncode").endswith("```\n\n▍")  # under the closed block, not in it
    assert shown(render("", LOOK, streaming=True).html) == "▍"


def test_plain_code_is_drawn_in_each_style_s_own_default_colour() -> None:
    """`plain_color` is a constant (Pygments loads only at the first highlight): it must stay
    the colour the highlighting style gives untokenized text."""
    from pygments.styles import get_style_by_name
    from pygments.token import Token

    for dark, name in STYLES.items():
        own = get_style_by_name(name).style_for_token(Token)["color"]
        assert plain_color(dark) == (f"#{own}" if own else PLAIN[False])
