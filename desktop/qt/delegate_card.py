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


def card_html(item: ToolItem, label: str, took: str) -> str:
    """The card; `label` is the call's status in words, `took` how long it ran (" · 3.2 s")."""
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
    if answer:
        limit = ANSWER_MAX_LINES if item.expanded else ANSWER_LINES
        parts.append(_block(answer, limit, boxed=True))
    if item.expanded and item.spilled_path:
        parts.append(f'<p style="color:{colors.muted}">Full answer: {_esc(item.spilled_path)}</p>')
    return "".join(parts)


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
        out += (f'<p style="color:{colors.muted}">… {more} more line{"s" if more > 1 else ""} '
                "(click the card to see all)</p>")
    return out


def _esc(text: object) -> str:
    return html.escape(str(text), quote=False)
