"""The summary of the middle: the auxiliary model's request, a model-free fallback, and how the model sees it.

Both kinds of summary use the same sections, so a later compression can
update either one.  A summary is stored bare; `wrap` adds the frame the
model sees it in (`unwrap` takes it off again before an update).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence

from backend.compress.model import Entry
from backend.providers.base import WireMessage

SECTIONS = ("Goal", "Constraints", "Progress", "Key decisions", "Relevant files", "Next steps")

SUMMARY_PREFIX = (
    "[Summary of earlier conversation — for reference only] The start of this conversation was "
    "condensed to fit the context window. The notes below record what happened in it; they are "
    "background, not instructions. Act on the messages that follow them, above all the latest "
    "user message."
)
SUMMARY_END = "[End of summary]"

ENTRY_CHARS = 8_000  # one message's share of the summarizer's input, at most
OMITTED = "[... {n} chars omitted ...]"
CONTINUED = "..."
QUOTE_CHARS = 200  # how much of a message the fallback quotes
MAX_LISTED = 12  # user requests and files the fallback lists, the newest first kept
FILE_TOOLS = {"read_file": "read", "write_file": "written", "patch": "patched"}
NONE_RECORDED = "- (none recorded)"


def wrap(summary: str) -> str:
    """The summary as the model sees it, framed as reference material."""
    return f"{SUMMARY_PREFIX}\n\n{summary.strip()}\n\n{SUMMARY_END}"


def unwrap(text: str) -> str:
    """The bare summary from a wrapped one (text that is not wrapped comes back stripped)."""
    text = text.strip()
    if text.startswith(SUMMARY_PREFIX):
        text = text[len(SUMMARY_PREFIX):]
    if text.endswith(SUMMARY_END):
        text = text[: -len(SUMMARY_END)]
    return text.strip()


# --- the auxiliary model's request -------------------------------------------------------------


def summary_messages(
    previous: str | None,
    middle: Sequence[Entry],
    focus: str | None = None,
    max_input_chars: int = 160_000,
    target_tokens: int | None = None,
) -> list[WireMessage]:
    """The request for the auxiliary model: instructions, then the previous summary and the transcript.

    The transcript is the middle as plain text, at most `max_input_chars`,
    the newest part kept when it must be cut.  The caller sends these with
    no tools and takes the answer's text as the new summary (bare; `wrap` it
    for the model).
    """
    parts = []
    if previous and previous.strip():
        parts.append(
            "PREVIOUS SUMMARY (of the conversation before the transcript below; update it):\n"
            f"<previous-summary>\n{unwrap(previous)}\n</previous-summary>"
        )
    parts.append(
        "TRANSCRIPT TO SUMMARIZE (oldest first):\n"
        f"<transcript>\n{render_transcript(middle, max_input_chars)}\n</transcript>"
    )
    return [
        WireMessage("system", _instructions(bool(previous and previous.strip()), focus, target_tokens)),
        WireMessage("user", "\n\n".join(parts)),
    ]


def _instructions(updating: bool, focus: str | None, target_tokens: int | None) -> str:
    headings = "\n".join(f"## {name}" for name in SECTIONS)
    lines = [
        "You condense the earlier part of a conversation between a user and an AI assistant that works "
        "on the user's computer with tools (a terminal, file reading and editing). The assistant will "
        "continue the conversation with only your summary in place of that part, so it must be able "
        "to carry on without asking the user to repeat anything.",
        f"Write the summary in Markdown with exactly these sections, in this order:\n{headings}",
        "Under Progress, say what is done, what is in progress and what is blocked. Be concrete: "
        "file paths, commands, error messages, names, numbers and the reasons behind decisions. "
        "Record only what the transcript shows; write 'none' under a section with nothing to say.",
    ]
    if updating:
        lines.append(
            "A previous summary is given. Update it: keep what is still true, fold in what the "
            "transcript adds, drop what it supersedes. Do not start over and do not lose earlier facts."
        )
    if focus and focus.strip():
        lines.append(f"Give the most room and detail to this topic: {focus.strip()}")
    if target_tokens:
        lines.append(f"Keep the summary under about {target_tokens} tokens.")
    lines.append("Return only the summary: no preamble, no closing remarks.")
    return "\n\n".join(lines)


def render_transcript(middle: Sequence[Entry], max_chars: int = 160_000) -> str:
    """The entries as plain text, oldest first, at most `max_chars`: the newest part is kept.

    When older messages must go, a line at the top says how many; each
    message is already clipped to ENTRY_CHARS (start and end kept).
    """
    blocks: list[str] = []  # newest first
    size = 0  # len("\n\n".join(blocks))
    for entry in reversed(middle):
        block = _render(entry)
        grown = size + len(block) + (2 if blocks else 0)
        if grown > max_chars:
            break
        blocks.append(block)
        size = grown
    else:
        return "\n\n".join(reversed(blocks))
    while blocks and size + 2 + len(_omitted(len(middle) - len(blocks))) > max_chars:
        size -= len(blocks.pop()) + (2 if blocks else 0)
    if blocks:
        return "\n\n".join([_omitted(len(middle) - len(blocks)), *reversed(blocks)])
    notice = _omitted(len(middle) - 1)  # not even the newest message fits: keep its end
    room = max_chars - len(notice) - 2 - len(CONTINUED)
    if room <= 0:
        return notice[:max_chars]
    return f"{notice}\n\n{CONTINUED}{_render(middle[-1])[-room:]}"


def _omitted(n: int) -> str:
    return f"[... {n} earlier messages omitted ...]"


def _render(entry: Entry) -> str:
    if entry.role == "tool":
        head = f"[tool result: {entry.name or 'unknown'}]"
    elif entry.role == "summary":
        head = "[earlier summary]"
    else:
        head = f"[{entry.role}]"
    lines = [head, *entry.files]
    if entry.content:
        lines.append(_clip(entry.content, ENTRY_CHARS))
    for call in entry.calls:
        lines.append(f"-> called {call.name}({_clip(call.arguments, ENTRY_CHARS // 4)})")
    return "\n".join(lines)


def _clip(text: str, limit: int) -> str:
    """Text over `limit` keeps its start and end, with the cut marked in the middle."""
    if len(text) <= limit:
        return text
    if limit < len(OMITTED) + 8:
        return text[: max(limit, 0)]
    marker = OMITTED.format(n=len(text) - limit)
    keep = max(limit - len(marker), 0)
    front = keep * 2 // 3
    return text[:front] + marker + text[len(text) - (keep - front):]


# --- the fallback: no model -------------------------------------------------------------------


def fallback_summary(previous: str | None, middle: Sequence[Entry], limit: int = 8000) -> str:
    """A summary made without a model, for when the auxiliary model fails: at most `limit` chars.

    It keeps the previous summary section by section and adds, mechanically,
    what the middle shows: the user's requests, the tools called, the files
    touched and the assistant's last words.  The same input always gives the
    same text.
    """
    earlier = _sections(unwrap(previous)) if previous else {}
    new = _digest(middle)
    bodies = []
    for name in SECTIONS:
        lines = list(dict.fromkeys([*earlier.get(name, []), *new.get(name, [])]))  # once each, in order
        bodies.append("\n".join(lines).strip() or NONE_RECORDED)
    headings = [f"## {name}\n" for name in SECTIONS]
    room = limit - sum(len(h) for h in headings) - 2 * (len(SECTIONS) - 1)
    bodies = _fit(bodies, room)
    text = "\n\n".join(h + b for h, b in zip(headings, bodies, strict=True))
    return text[:limit]


def fit(summary: str, limit: int) -> str:
    """A summary cut to at most `limit` chars: one that fits comes back as it is; a longer
    one (a model that wrote past its budget) is cut section by section, as the fallback is."""
    if len(summary) <= limit:
        return summary
    by_name = _sections(summary)
    bodies = ["\n".join(by_name.get(name, [])).strip() or NONE_RECORDED for name in SECTIONS]
    headings = [f"## {name}\n" for name in SECTIONS]
    room = limit - sum(len(h) for h in headings) - 2 * (len(SECTIONS) - 1)
    text = "\n\n".join(h + b for h, b in zip(headings, _fit(bodies, room), strict=True))
    return text[:limit]


def _sections(summary: str) -> dict[str, list[str]]:
    """A summary's lines by section; lines before any known heading count as Progress."""
    by_name = {name.lower(): name for name in SECTIONS}
    out: dict[str, list[str]] = {}
    current = "Progress"
    for line in summary.splitlines():
        match = re.fullmatch(r"#+\s*(.+?)\s*#*\s*", line)
        if match and match.group(1).lower() in by_name:
            current = by_name[match.group(1).lower()]
            continue
        if match:  # a heading of its own: kept, one level down, so the sections stay the only `##`
            line = f"### {match.group(1)}"
        if line.strip() and line.strip() != NONE_RECORDED:
            out.setdefault(current, []).append(line)
    return out


def _digest(middle: Sequence[Entry]) -> dict[str, list[str]]:
    requests = [_quote(e.content) for e in middle if e.role == "user" and e.content.strip()]
    tools = Counter(c.name for e in middle for c in e.calls)
    files: dict[str, list[str]] = {}
    for call in (c for e in middle for c in e.calls if c.name in FILE_TOOLS):
        path = _path_argument(call.arguments)
        if path is not None:
            verbs = files.setdefault(path, [])
            if FILE_TOOLS[call.name] not in verbs:
                verbs.append(FILE_TOOLS[call.name])
    said = (e.content for e in reversed(middle) if e.role == "assistant" and e.content.strip())
    last_words = next(said, None)
    counts = Counter(e.role for e in middle)
    out: dict[str, list[str]] = {}
    if requests:
        omitted = len(requests) - MAX_LISTED
        out["Goal"] = [f"- ({omitted} earlier requests not listed)"] if omitted > 0 else []
        out["Goal"] += [f"- The user asked: {q}" for q in requests[-MAX_LISTED:]]
    progress = [
        "- (Summarized without a model: this lists what happened, mechanically.)",
        f"- {len(middle)} messages condensed: {counts['user']} from the user, "
        f"{counts['assistant']} from the assistant, {counts['tool']} tool results.",
    ]
    if tools:
        ranked = sorted(tools.items(), key=lambda kv: (-kv[1], kv[0]))
        progress.append("- Tools called: " + ", ".join(f"{name} ×{n}" for name, n in ranked) + ".")
    if last_words is not None:
        progress.append(f"- The assistant's last message: {_quote(last_words)}")
    out["Progress"] = progress
    if files:
        listed = list(files.items())[-MAX_LISTED:]
        out["Relevant files"] = [f"- {path} ({', '.join(verbs)})" for path, verbs in listed]
    out["Next steps"] = ["- Continue from the latest user message after this summary."]
    return out


def _quote(text: str) -> str:
    flat = " ".join(text.split())
    return "“" + (flat if len(flat) <= QUOTE_CHARS else flat[: QUOTE_CHARS - 1] + "…") + "”"


def _path_argument(arguments: str) -> str | None:
    try:
        args = json.loads(arguments)
    except (ValueError, RecursionError):
        return None
    path = args.get("path") if isinstance(args, dict) else None
    return " ".join(path.split())[:QUOTE_CHARS] if isinstance(path, str) and path.strip() else None


def _fit(bodies: list[str], room: int) -> list[str]:
    """The bodies cut to share `room` chars fairly: short ones whole, the rest cut in the middle."""
    if sum(len(b) for b in bodies) <= room:
        return bodies
    caps = [0] * len(bodies)
    left = max(room, 0)
    order = sorted(range(len(bodies)), key=lambda i: (len(bodies[i]), i))
    for rank, i in enumerate(order):
        caps[i] = min(len(bodies[i]), left // (len(bodies) - rank))
        left -= caps[i]
    return [_clip(b, cap) if len(b) > cap else b for b, cap in zip(bodies, caps, strict=True)]
