"""The assistant's markdown as the HTML subset QTextDocument lays out, safe from the model's markup.

markdown-it-py parses (CommonMark, tables, strikethrough); `render` walks its tokens and writes
the rich text Qt understands: margins instead of CSS boxes, a table with a left border for a
block quote, a two-row table for a fenced code block (a header with the language and a Copy
link, then the Pygments-highlighted code).  No Qt here: colours come in a `Look`.

The model's text is untrusted.  Raw HTML is never parsed (`html: False`: it shows as text),
images become their alt text (nothing is ever loaded), and links keep only http, https and
mailto targets.  The links the app itself adds (Copy) use the `ACTION` scheme, which the
model's links can never carry.

While an answer streams, `stabilize` makes the text so far render as it will once finished:
an unterminated code fence is closed, a half-received code span or `**` run is closed (or
dropped while still empty), so no raw backtick flickers on screen.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.token import Token

from desktop.qt.code_html import highlight, language_of, plain_color

ACTION = "turnkey-action"  # the scheme of links the app adds to rendered text (never the model's)
LINK_SCHEMES = ("http:", "https:", "mailto:")
CURSOR = "▍"  # shown at the end of a streaming answer
GAP = 10  # px under a paragraph, list or quote
CODE_GAP = 10  # px around a code block (so a heading never touches one)
LINE = "140%"  # the line height of prose (code keeps its font's)
# A streaming answer is rendered again on every delta: its code blocks longer than this
# (characters) stay plain until it is finished, so a long one does not slow each delta down.
STREAMING_HIGHLIGHT = 4_000

_md = MarkdownIt("commonmark", {"html": False, "typographer": False}).enable(["table", "strikethrough"])


@dataclass(frozen=True)
class Look:
    """The colours (and sizes) rendered text takes: the theme's, given by the caller."""

    dark: bool
    text: str
    muted: str
    link: str
    border: str
    code_bg: str  # a code block's background
    code_head: str  # its header row's
    inline_code_bg: str
    quote_bar: str
    quote_bg: str
    table_head: str
    font_pt: float = 10.0
    mono: str = "monospace"


@dataclass(frozen=True)
class Rendered:
    html: str
    code: tuple[str, ...] = ()  # each code block's text, by the number in its Copy link


def copy_href(n: int) -> str:
    return f"{ACTION}:copy/{n}"


def action_of(url: str) -> tuple[str, int] | None:
    """("copy", n) for a Copy link, ("expand", 0) for a long message's Show all; else None."""
    if not url.startswith(ACTION + ":"):
        return None
    what, _, number = url[len(ACTION) + 1:].partition("/")
    return (what, int(number)) if number.isdigit() else (what, 0)


def render(text: str, look: Look, *, streaming: bool = False, copied: int = -1,
           colored: bool = True) -> Rendered:
    """The HTML of `text`; while `streaming`, of its stabilized form with a cursor at the end.
    `copied` is the code block whose link says "Copied" (just clicked).  Without `colored`,
    code is not highlighted: highlighting only colours text, so the layout (the height) is the
    same, for a fraction of the cost — what measuring rows nobody looks at yet needs.

    Finished messages are cached (shared by every window: a session opened again renders
    nothing again); a streaming one changes with every delta, so it is not."""
    if streaming:
        return _render(with_cursor(text), look, copied, colored, streaming=True)
    return _finished(text, look, copied, colored)


@lru_cache(maxsize=512)
def _finished(text: str, look: Look, copied: int, colored: bool) -> Rendered:
    return _render(text, look, copied, colored, streaming=False)


def _render(source: str, look: Look, copied: int, colored: bool, streaming: bool) -> Rendered:
    writer = _Writer(look, copied, colored, streaming)
    writer.blocks(_md.parse(source))
    return Rendered(writer.html(), tuple(writer.code))


# --- streaming ---------------------------------------------------------------------------

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_PARTIAL_FENCE = re.compile(r"^ {0,3}(`{1,2}|~{1,2})$")


def stabilize(text: str) -> str:
    """`text` (a prefix of an answer) changed so that no markup shows raw: an open fence closed,
    a dangling code span, bold or emphasis closed, or dropped when nothing follows it yet."""
    lines = text.split("\n")
    fence: str | None = None  # the open fence's marker
    tail_start = 0  # where the last paragraph outside code begins
    for i, line in enumerate(lines):
        m = _FENCE.match(line)
        if fence is None:
            if m and not (m.group(1)[0] == "`" and "`" in m.group(2)):
                fence = m.group(1)
            elif not line.strip():
                tail_start = i + 1
        elif m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and not m.group(2).strip():
            fence = None
            tail_start = i + 1
    if fence is not None:
        if len(lines) > 1 and re.fullmatch(r" {0,3}" + re.escape(fence[0]) + "+", lines[-1]):
            lines[-1] = ""  # the closing fence, still arriving
        return "\n".join(lines).rstrip("\n") + "\n" + fence
    if _PARTIAL_FENCE.match(lines[-1]):
        lines[-1] = ""  # an opening fence, still arriving
    head, tail = lines[:tail_start], lines[tail_start:]
    if tail:
        tail = [_close_inline("\n".join(tail))]
    return "\n".join(head + tail)


def with_cursor(text: str) -> str:
    """The stabilized text with the streaming cursor after its last word."""
    fixed = stabilize(text)
    if _FENCE.match(fixed.rstrip("\n").rsplit("\n", 1)[-1]):
        return fixed + "\n\n" + CURSOR  # under a code block: after a fence it would be its info
    return fixed.rstrip() + (" " if fixed.strip() else "") + CURSOR


_BACKTICKS = re.compile(r"(?<!\\)`+")


def _close_code_span(par: str) -> str:
    opener: re.Match[str] | None = None
    for m in _BACKTICKS.finditer(par):
        if opener is None:
            opener = m
        elif len(m.group()) == len(opener.group()):
            opener = None
    if opener is None:
        return par
    if not par[opener.end():].strip():
        return par[:opener.start()].rstrip()  # nothing inside yet
    return par + opener.group()


_CODE_SPAN = re.compile(r"(`+).*?\1", re.S)
_LONE_MARK = re.compile(r"(^|\s)[*_]{1,3}$")


def _close_inline(par: str) -> str:
    """The last paragraph's open inline markup closed: a code span, then `**` and `*`/`_`
    runs (a trailing opener with nothing after it yet is dropped instead)."""
    par = _close_code_span(par)
    cut = _LONE_MARK.sub("", par.rstrip()).rstrip()
    strong = ""
    if len(re.findall(r"(?<!\\)\*\*", _CODE_SPAN.sub("", cut))) % 2:
        if cut.endswith("**") and not cut.endswith("***"):
            cut = cut[:-2].rstrip()  # an opener, nothing inside yet
        else:
            strong = "*" if cut.endswith("*") else "**"  # (half of the closer may be there)
    return cut + _open_emphasis(cut) + strong


def _open_emphasis(par: str) -> str:
    """The `*` or `_` that closes an emphasis left open at the end of `par`, or "".  An intraword
    or spaced-out star (2*3, a * b) opens nothing."""
    bare = _CODE_SPAN.sub(lambda m: " " * len(m.group()), par).replace("**", "\0\0")
    for mark in "*_":
        opener = -1
        for i, ch in enumerate(bare):
            if ch != mark or (i and bare[i - 1] == "\\"):
                continue
            before = bare[i - 1] if i else " "
            after = bare[i + 1] if i + 1 < len(bare) else " "
            if opener < 0 and (before.isspace() or before in "\0([{\"'") and not after.isspace():
                opener = i
            elif opener >= 0 and not before.isspace():
                opener = -1
        if opener >= 0:
            return mark
    return ""


# --- the writer ----------------------------------------------------------------------------


@dataclass
class _Open:
    """A block's opening tag, its bottom margin decided at the end (none when it is the last
    thing in its container, so a message or a quote ends at its text)."""

    template: str  # with "{mb}" where the bottom margin goes
    gap: int
    table: bool = False
    last: bool = False

    def __str__(self) -> str:
        return self.template.replace("{mb}", str(0 if self.last else self.gap))


@dataclass
class _Box:
    kind: str  # "doc", "quote", "li", "cell"
    last: _Open | None = None
    paragraphs: int = 0


@dataclass
class _Writer:
    look: Look
    copied: int
    colored: bool
    streaming: bool  # (a long code block is highlighted once the answer is finished)
    out: list[str | _Open] = field(default_factory=list)
    code: list[str] = field(default_factory=list)
    boxes: list[_Box] = field(default_factory=lambda: [_Box("doc")])
    links: list[bool] = field(default_factory=list)

    def html(self) -> str:
        self._close_box()
        return "".join(str(part) for part in self.out)

    def blocks(self, tokens: list[Token]) -> None:
        for tok in tokens:
            handler = getattr(self, "_" + tok.type, None)
            if handler is not None:
                handler(tok)
            elif tok.type == "inline":
                self.out.append(self.inline(tok.children or []))

    # --- containers

    def _open(self, template: str, gap: int, table: bool = False) -> None:
        block = _Open(template, gap, table)
        self.out.append(block)
        self.boxes[-1].last = block

    def _top(self, gap: int) -> int:
        """A block's top margin: none as the first thing in its container."""
        return 0 if self.boxes[-1].last is None and self.boxes[-1].paragraphs == 0 else gap

    def _table_top(self, gap: int) -> int:
        """A table's top margin.  Qt ignores the bottom margin of the block above a table
        (and adds a table's bottom margin to the next block's top), so the table keeps the
        space the block above wanted itself."""
        before = self.boxes[-1].last
        if before is None:
            return self._top(gap)
        return 0 if before.table else max(gap, before.gap)

    def _close_box(self) -> None:
        box = self.boxes.pop()
        if box.last is not None:
            box.last.last = True

    # --- blocks

    def _paragraph_open(self, tok: Token) -> None:
        box = self.boxes[-1]
        if box.kind == "li":
            if box.paragraphs:
                self.out.append("<br>")  # (a loose item's next paragraph)
            box.paragraphs += 1
            return
        self._open(f'<p style="margin-top:0px; margin-bottom:{{mb}}px; line-height:{LINE}">', GAP)

    def _paragraph_close(self, tok: Token) -> None:
        if self.boxes[-1].kind != "li":
            self.out.append("</p>")

    def _heading_open(self, tok: Token) -> None:
        level = int(tok.tag[1])
        scale = {1: 1.45, 2: 1.25, 3: 1.1}.get(level, 1.0)
        top = self._top(14 if level <= 2 else 10)
        self._open(f'<{tok.tag} style="margin-top:{top}px; margin-bottom:{{mb}}px; '
                   f'font-size:{self.look.font_pt * scale:.1f}pt; font-weight:600">', 6)

    def _heading_close(self, tok: Token) -> None:
        self.out.append(f"</{tok.tag}>")

    def _blockquote_open(self, tok: Token) -> None:
        lk = self.look
        self._open(f'<table width="100%" cellspacing="0" cellpadding="0" '
                   f'style="margin-top:{self._table_top(2)}px; margin-bottom:{{mb}}px">'
                   f'<tr><td style="border-left: 3px solid {lk.quote_bar}; background-color:{lk.quote_bg}; '
                   f'padding: 6px 10px 6px 12px; color:{lk.muted}">', GAP, table=True)
        self.boxes.append(_Box("quote"))

    def _blockquote_close(self, tok: Token) -> None:
        self._close_box()
        self.out.append("</td></tr></table>")

    def _bullet_list_open(self, tok: Token) -> None:
        self._open('<ul style="margin-top:0px; margin-bottom:{mb}px">', GAP)

    def _bullet_list_close(self, tok: Token) -> None:
        self.out.append("</ul>")

    def _ordered_list_open(self, tok: Token) -> None:
        start = tok.attrs.get("start")
        first = f' start="{int(start)}"' if isinstance(start, int | str) and str(start).isdigit() else ""
        self._open(f'<ol{first} style="margin-top:0px; margin-bottom:{{mb}}px">', GAP)

    def _ordered_list_close(self, tok: Token) -> None:
        self.out.append("</ol>")

    def _list_item_open(self, tok: Token) -> None:
        self.out.append(f'<li style="margin-bottom:2px; line-height:{LINE}">')
        self.boxes.append(_Box("li"))

    def _list_item_close(self, tok: Token) -> None:
        self._close_box()
        self.out.append("</li>")

    def _hr(self, tok: Token) -> None:
        self._open(f'<hr style="margin-top:{self._top(6)}px; margin-bottom:{{mb}}px; '
                   f'background-color:{self.look.border}">', GAP)

    def _fence(self, tok: Token) -> None:
        self._code(tok.content, language_of(tok.info))

    def _code_block(self, tok: Token) -> None:
        self._code(tok.content, "")

    def _code(self, content: str, language: str) -> None:
        lk = self.look
        code = content[:-1] if content.endswith("\n") else content
        n = len(self.code)
        self.code.append(code)
        small = f"font-size:{lk.font_pt * 0.85:.1f}pt"
        line = f"1px solid {lk.border}"
        # Borders per cell: a table's own border would also run between the header's cells.
        head = f"background-color:{lk.code_head}; border-top:{line}; border-bottom:{line}; padding: 5px 10px"
        copy = "Copied ✓" if n == self.copied else "Copy"
        colored = self.colored and not (self.streaming and len(code) > STREAMING_HIGHLIGHT)
        body = highlight(code, language, lk.dark) if colored else esc(code)
        self._open(f'<table width="100%" cellspacing="0" cellpadding="0" '
                   f'style="margin-top:{self._table_top(CODE_GAP - 2)}px; margin-bottom:{{mb}}px; '
                   f'border-collapse:collapse">', CODE_GAP, table=True)
        self.out.append(
            f'<tr><td style="{head}; border-left:{line}"><span style="color:{lk.muted}; {small}">'
            f'{esc(language or "code")}</span></td>'
            f'<td align="right" style="{head}; border-right:{line}"><a href="{copy_href(n)}" '
            f'style="color:{lk.muted}; text-decoration:none; {small}">{copy}</a></td></tr>'
            f'<tr><td colspan="2" style="background-color:{lk.code_bg}; border-left:{line}; '
            f'border-right:{line}; border-bottom:{line}; padding: 10px 12px">'
            f'<pre style="margin:0px; white-space:pre-wrap; font-family:{lk.mono}; '
            f'color:{plain_color(lk.dark)}">{body}</pre></td></tr></table>')

    def _table_open(self, tok: Token) -> None:
        self._open(f'<table cellspacing="0" cellpadding="6" style="margin-top:{self._table_top(2)}px; '
                   f'margin-bottom:{{mb}}px; border-collapse:collapse; '
                   f'border: 1px solid {self.look.border}">', GAP, table=True)

    def _table_close(self, tok: Token) -> None:
        self.out.append("</table>")

    def _tr_open(self, tok: Token) -> None:
        self.out.append("<tr>")

    def _tr_close(self, tok: Token) -> None:
        self.out.append("</tr>")

    def _th_open(self, tok: Token) -> None:
        self._cell(tok, f"background-color:{self.look.table_head}; font-weight:600; ")

    def _td_open(self, tok: Token) -> None:
        self._cell(tok, "")

    def _cell(self, tok: Token, style: str) -> None:
        align = str(tok.attrs.get("style", "")).removeprefix("text-align:")
        where = f' align="{align}"' if align in ("left", "center", "right") else ""
        self.out.append(f'<{tok.tag}{where} style="{style}border: 1px solid {self.look.border}">')
        self.boxes.append(_Box("cell"))

    def _th_close(self, tok: Token) -> None:
        self._close_box()
        self.out.append("</th>")

    def _td_close(self, tok: Token) -> None:
        self._close_box()
        self.out.append("</td>")

    # --- inline

    def inline(self, children: list[Token]) -> str:
        lk = self.look
        parts: list[str] = []
        for tok in children:
            kind = tok.type
            if kind == "text":
                parts.append(esc(tok.content))
            elif kind == "softbreak":
                parts.append(" ")
            elif kind == "hardbreak":
                parts.append("<br>")
            elif kind == "code_inline":
                parts.append(f'<code style="background-color:{lk.inline_code_bg}; font-family:{lk.mono}; '
                             f'font-size:{lk.font_pt * 0.92:.1f}pt">{esc(tok.content)}</code>')
            elif kind in _TAGS:
                parts.append(_TAGS[kind])
            elif kind == "link_open":
                href = str(tok.attrs.get("href", ""))
                safe = href.lower().startswith(LINK_SCHEMES)
                self.links.append(safe)
                if safe:
                    parts.append(f'<a href="{html.escape(href, quote=True)}" '
                                 f'style="color:{lk.link}; text-decoration:none">')
            elif kind == "link_close":
                if self.links and self.links.pop():
                    parts.append("</a>")
            elif kind == "image":
                alt = "".join(c.content for c in (tok.children or [])) or "image"
                parts.append(f'<span style="color:{lk.muted}">[image: {esc(alt)}]</span>')
            else:  # anything else the parser may add: its text, escaped
                parts.append(esc(tok.content))
        return "".join(parts)


_TAGS = {"em_open": "<i>", "em_close": "</i>", "strong_open": "<b>", "strong_close": "</b>",
         "s_open": "<s>", "s_close": "</s>"}


def esc(text: Any) -> str:
    return html.escape(str(text), quote=False)
