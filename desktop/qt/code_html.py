"""Source code as syntax-highlighted HTML spans for QTextDocument: Pygments tokens, inline colours.

Pygments' own HTML formatter writes `<div>`s and classes Qt's rich text ignores, so the
tokens are turned into `<span style="color:…">` runs here (consecutive tokens of one style
merged).  Light and dark themes take different Pygments styles.  Lexers are looked up by the
fence's language name only (never guessed from the code: slow, and often wrong), and both
lookups and results are cached: a streaming answer re-renders its finished code blocks on
every delta.

Pygments loads at the first highlight, not with this module: the app's first frame needs
markdown but no colours (`plain_color` is a constant; tests/unit/desktop check it against the
styles).
"""

from __future__ import annotations

import html
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pygments.lexer import Lexer
    from pygments.token import _TokenType

STYLES = {False: "default", True: "one-dark"}  # by `dark`
PLAIN = {False: "#1d1f23", True: "#ABB2BF"}  # by `dark`: untokenized text's colour in each
MAX_HIGHLIGHTED = 60_000  # characters: longer code is shown plain (lexing is pure Python)
CACHED_CODE = 8_000  # characters: shorter code's highlighting is cached
# Common names models write after ``` that Pygments knows under another alias.
ALIASES = {"sh": "bash", "shell": "bash", "zsh": "bash", "console": "console", "py": "python",
           "js": "javascript", "ts": "typescript", "yml": "yaml", "md": "markdown",
           "plaintext": "text", "txt": "text", "jsonc": "json", "dockerfile": "docker"}


def language_of(info: str) -> str:
    """The language a fence's info string names ("python {linenos}" -> "python"), or ""."""
    return info.strip().split(maxsplit=1)[0].lower() if info.strip() else ""


@lru_cache(maxsize=64)
def _lexer(language: str) -> Lexer | None:
    from pygments.lexers import get_lexer_by_name
    from pygments.util import ClassNotFound

    name = ALIASES.get(language, language)
    if not name or name == "text":
        return None
    try:
        # stripnl/ensurenl off: the code is shown (and copied) exactly as it came.
        return get_lexer_by_name(name, stripnl=False, ensurenl=False)
    except ClassNotFound:
        return None


def has_lexer(language: str) -> bool:
    return _lexer(language) is not None


@lru_cache(maxsize=2)
def _css(dark: bool) -> dict[_TokenType, str]:
    """Each token type's inline CSS in the theme's Pygments style ("" for plain text).

    Colours only, never bold or italic: highlighted code then lays out exactly as plain code
    (the transcript measures rows with plain code and highlights only what it paints)."""
    from pygments.styles import get_style_by_name

    style = get_style_by_name(STYLES[dark])
    return {ttype: f"color:#{spec['color']}" if spec["color"] else "" for ttype, spec in style}


def plain_color(dark: bool) -> str:
    """The colour of untokenized code text in the theme's style (the style's default; plain
    code, not yet highlighted, is drawn in it too)."""
    return PLAIN[dark]


def _style_of(ttype: _TokenType, css: dict[_TokenType, str]) -> str:
    while ttype not in css and ttype.parent is not None:
        ttype = ttype.parent
    return css.get(ttype, "")


def highlight(code: str, language: str, dark: bool) -> str:
    """`code` as escaped HTML with coloured spans (no wrapping element); plain escaped text
    when the language is unknown or the code is too long.  Short code is cached (a message's
    blocks are highlighted again when its document is rebuilt); long code is not kept."""
    if len(code) <= CACHED_CODE:
        return _highlight_cached(code, language, dark)
    return _highlight(code, language, dark)


@lru_cache(maxsize=512)
def _highlight_cached(code: str, language: str, dark: bool) -> str:
    return _highlight(code, language, dark)


def _highlight(code: str, language: str, dark: bool) -> str:
    lexer = _lexer(language)
    if lexer is None or len(code) > MAX_HIGHLIGHTED:
        return html.escape(code, quote=False)
    css = _css(dark)
    out: list[str] = []
    run_style, run_text = "", ""
    for ttype, value in lexer.get_tokens(code):
        style = _style_of(ttype, css) if value.strip() else run_style  # whitespace joins runs
        if style != run_style and run_text:
            out.append(_span(run_text, run_style))
            run_text = ""
        run_style = style
        run_text += value
    if run_text:
        out.append(_span(run_text, run_style))
    return "".join(out)


def _span(text: str, style: str) -> str:
    body = html.escape(text, quote=False)
    return f'<span style="{style}">{body}</span>' if style else body
