"""The HTML of a delegate call's card: the task, the sub-agent's state, its answer, and Open.

The transcript view paints it like any tool card (`transcript_view.tool_html` hands
delegate calls here); the Open link is an app action (`OPEN_CHILD`), which the view
turns into a request to open the sub-agent's session in a window of its own.
"""

from __future__ import annotations

import html

from desktop.qt import markdown, theme
from desktop.state.delegation import answer_of, child_state, context_of, task_of
from desktop.state.transcript import ToolItem

OPEN_CHILD = f"{markdown.ACTION}:open-child"
TASK_LINES = 3  # of the task, in a collapsed card
ANSWER_LINES = 6  # of the answer, in a collapsed card
ANSWER_MAX_LINES = 400


def card(item: ToolItem, label: str, took: str, look: markdown.Look | None = None,
         copied: int = -1) -> markdown.Rendered:
    """The card; `label` is the call's status in words, `took` how long it ran (" · 3.2 s").
    With a `look`, the sub-agent's answer is markdown rendered as the conversation's own
    answers are (its code blocks then have Copy links: `Rendered.code`); without, plain."""
    colors = theme.colors()
    state = child_state(item)
    arrow = "▾" if item.expanded else "▸"
    color = str(getattr(colors, state.tone))
    opener = (f' <span style="color:{colors.muted}">·</span> '
              f'<a href="{OPEN_CHILD}" style="color:{colors.accent}">Open its session</a>'
              if item.child_session_id else "")
    head = (f'<p><span style="color:{colors.muted}">{arrow}</span> <b>Sub-agent</b> '
            f'<span style="color:{color}"><b>{_esc(label)}</b>{_esc(took)}</span>{opener}</p>')
    parts = [head, _block(task_of(item), None if item.expanded else TASK_LINES)]
    context = context_of(item)
    if item.expanded and context:
        parts.append(f'<p style="color:{colors.muted}">Context it was given</p>')
        parts.append(_block(context, None))
    parts.append(f'<p style="color:{color}">{_esc(state.words)}</p>')
    answer = answer_of(item)
    code: tuple[str, ...] = ()
    if answer:
        limit = ANSWER_MAX_LINES if item.expanded else ANSWER_LINES
        if look is None:
            parts.append(_block(answer, limit, boxed=True))
        else:
            rendered = markdown.render(_cut(answer, limit), look, copied=copied)
            parts.append(rendered.html)
            code = rendered.code
            more = len(answer.splitlines()) - limit
            if more > 0:
                parts.append(_more(more))
    if item.expanded and item.spilled_path:
        parts.append(f'<p style="color:{colors.muted}">Full answer: {_esc(item.spilled_path)}</p>')
    return markdown.Rendered("".join(parts), code)


def card_html(item: ToolItem, label: str, took: str) -> str:
    """The card as plain HTML, its answer as written (no markdown)."""
    return card(item, label, took).html


def _cut(text: str, max_lines: int) -> str:
    """The first `max_lines` lines; a code fence left open by the cut is closed, so the rest
    of the card is not taken for code."""
    lines = text.splitlines()[:max_lines]
    fences = sum(1 for ln in lines if ln.lstrip().startswith(("```", "~~~")))
    return "\n".join(lines) + ("\n```" if fences % 2 else "")


def _more(n: int) -> str:
    return (f'<p style="color:{theme.colors().muted}">… {n} more line{"s" if n > 1 else ""} '
            "(click the card to see all)</p>")


def _block(text: str, max_lines: int | None, boxed: bool = False) -> str:
    """Text as written (line breaks kept, wrapped), cut to `max_lines` with a note saying so."""
    lines = text.splitlines()
    shown = lines if max_lines is None else lines[:max_lines]
    more = len(lines) - len(shown)
    colors = theme.colors()
    style = "white-space:pre-wrap"
    if boxed:
        style += f"; margin-left:8px; border-left: 2px solid {colors.border}"
    out = f'<p style="{style}">{_esc(chr(10).join(shown))}</p>'
    if more > 0:
        out += _more(more)
    return out


def _esc(text: object) -> str:
    return html.escape(str(text), quote=False)
