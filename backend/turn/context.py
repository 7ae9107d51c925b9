"""What the model sees this turn: the session's frozen system prompt and the wire copy.

The system prompt is built once per session, stored on the session row
before the first model call, and replayed byte-for-byte after that, so the
provider's prompt cache keeps its prefix.  The wire copy is built fresh for
every request from the transcript and never written back.
"""

from __future__ import annotations

import base64
import json
import platform
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from backend.providers.base import WireFile, WireImage, WireMessage, WireToolCall
from backend.store.messages import ModelRow
from backend.tools.beneath import NotPlain, read_plain
from shared.codec import clean_text

CONTEXT_FILES = ("AGENTS.md", "TURNKEY.md")
MAX_CONTEXT_FILE_CHARS = 20_000

IDENTITY = (
    "You are Turnkey, an AI assistant running on the user's own computer as a desktop app. "
    "Answer directly and precisely. Use Markdown for structure and fenced code blocks for code. "
    "When you are unsure, say so instead of guessing."
)

TOOL_GUIDANCE = (
    "You can act on the user's computer with tools: run shell commands (terminal), read, write "
    "and patch files, search files and list folders. Relative paths are relative to the working "
    "folder. Read before you change a file, prefer patch for small edits, and check your work. "
    "Some actions need the user's approval; if one is denied, do not retry it — explain or take "
    "another way. Tool results may be marked skipped, interrupted, denied or unknown: unknown "
    "means the outcome was not recorded, so check before you assume it did or did not happen."
)


@dataclass(frozen=True)
class SystemPrompt:
    """The built prompt, and what people must be told about it: a project file that was
    not read because it is not a plain file of the folder (`beneath.read_plain`)."""

    text: str
    notices: tuple[str, ...] = ()


def build_system_prompt(cwd: str, model: str) -> SystemPrompt:
    """Three layers, most stable first: identity and environment, project context, volatile."""
    stable = [
        IDENTITY,
        TOOL_GUIDANCE,
        f"Environment: {platform.system()} {platform.release()}; working folder: {cwd}; "
        f"model: {model}.",
    ]
    context: list[str] = []
    notices: list[str] = []
    for name in CONTEXT_FILES:
        try:
            context.append(_context_file(cwd, name))
        except NotPlain as refused:
            notices.append(
                f"{name} in this folder is {refused.what}, so it was not read into the "
                "model's instructions: project instructions must be a plain file inside the "
                "folder. If you did not make it so, something in the folder did.")
    volatile = [f"The session started on {datetime.now(UTC):%A %Y-%m-%d} (UTC)."]
    text = "\n\n".join(part for part in (*stable, *context, *volatile) if part)
    return SystemPrompt(text, tuple(notices))


def _context_file(cwd: str, name: str) -> str:
    """A project instructions file, read only as a plain file of the folder (never through
    a link out of it: NotPlain), bounded."""
    raw = read_plain(cwd, name, MAX_CONTEXT_FILE_CHARS * 4 + 4)
    if raw is None:
        return ""
    text = raw.decode("utf-8", errors="replace")
    if len(text) > MAX_CONTEXT_FILE_CHARS:
        text = text[:MAX_CONTEXT_FILE_CHARS] + "\n[... truncated]"
    return f"Project instructions from {name}:\n{text.strip()}"


def wire_messages(system_prompt: str, rows: list[ModelRow]) -> list[WireMessage]:
    """The request's messages: the stored prompt, then each visible row as it was sent.

    `api_content` replays the exact bytes sent before, where they differ from
    what people see.  Notes (interrupted, failed, recovered) are for people;
    the model sees only summaries among them.  Tool pairs are repaired on the
    way out: a result whose call is not in view is dropped, and a call with no
    result gets one saying so, because providers reject unpaired calls.
    """
    out = [WireMessage("system", system_prompt)]
    results = {r.call_id: r for r in rows if r.role == "tool" and r.call_id is not None}
    for r in in_model_order(rows):
        out.extend(row_messages(r, results).messages)
    return out


@dataclass(frozen=True)
class Emitted:
    """What one row puts on the wire, and whether a call of it is still unanswered (its
    messages change when the result is stored: turn/transcript.py keeps the rest)."""

    messages: tuple[WireMessage, ...] = ()
    unanswered: bool = False


NOTHING = Emitted()


def row_messages(r: ModelRow, results: Mapping[str, ModelRow]) -> Emitted:
    """One row's wire messages in model order: a tool row's come right after the assistant row
    that called it (from `results`, each call's stored result by call id)."""
    role = r.role
    if role == "tool":
        return NOTHING  # emitted right after the assistant row that called it
    if role == "system_note":
        if r.note_kind != "summary":
            return NOTHING
        role = "user"
    content = clean_text(r.api_content if r.api_content is not None else r.content)
    if role == "assistant" and r.tool_calls:
        calls = json.loads(_wire_calls(r))
        out = [WireMessage("assistant", content, tool_calls=tuple(
            WireToolCall(c["call_id"], c["name"], _raw_arguments(c)) for c in calls
        ))]
        out.extend(_result(c, results.get(c["call_id"])) for c in calls)
        return Emitted(tuple(out), any(c["call_id"] not in results for c in calls))
    files = prompt_files(r) if role == "user" else ()
    if role in ("user", "assistant") and (content or files):
        return Emitted((WireMessage(role, content, files=files),))
    return NOTHING


def prompt_files(row: ModelRow) -> tuple[WireFile, ...]:
    """The files a user's prompt carries (meta.attachments, items with a sha256; a tool
    row's older `path` items are MCP images, `_images`), in the order given."""
    items = _meta(row).get("attachments") if row.meta else None
    if not isinstance(items, list):
        return ()
    return tuple(WireFile(
        sha256=str(a["sha256"]), name=str(a.get("name") or "file"),
        mime_type=str(a.get("mime_type") or ""), kind=str(a.get("kind") or ""),
        bytes=_int(a.get("bytes")) or 0, width=_int(a.get("width")),
        height=_int(a.get("height")), pages=_int(a.get("pages")),
    ) for a in items if isinstance(a, dict) and isinstance(a.get("sha256"), str))


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def in_model_order(rows: list[ModelRow]) -> list[ModelRow]:
    """Head + summary + tail, whatever the row order: a compression's summary note is stored
    when it happens (after the rows it follows in time), but the model reads it where the
    compacted rows were — right after the protected head, its `anchor` (meta)."""
    summaries = [r for r in rows if r.role == "system_note" and r.note_kind == "summary"]
    if not summaries:
        return rows
    summary = summaries[-1]  # a newer summary replaces (and updates) the older ones
    anchor = int(_meta(summary).get("anchor") or 0)
    rest = [r for r in rows if r.id != summary.id
            and not (r.role == "system_note" and r.note_kind == "summary")]
    head = [r for r in rest if r.id <= anchor]
    return [*head, summary, *(r for r in rest if r.id > anchor)]


def _meta(row: ModelRow) -> dict[str, Any]:
    return json.loads(row.meta) if row.meta else {}


def _wire_calls(row: ModelRow) -> str:
    """The calls as the model is sent them: pruned arguments (api_tool_calls) once
    compression has cut them, else as stored."""
    return str(row.api_tool_calls or row.tool_calls)


def _raw_arguments(call: dict[str, Any]) -> str:
    raw = call.get("arguments_raw")
    return raw if isinstance(raw, str) else json.dumps(call.get("arguments") or {})


def _result(call: dict[str, Any], row: ModelRow | None) -> WireMessage:
    if row is None:
        text = "[No result was recorded for this call; its outcome is not known.]"
    else:
        text = clean_text(row.api_content if row.api_content is not None else row.content)
        if row.status not in (None, "ok", "error"):
            text = f"[status: {row.status}] {text}"
    images = _images(row) if row is not None and row.api_content is None else ()
    return WireMessage("tool", text, tool_call_id=call["call_id"], name=call["name"], images=images)


IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
MAX_IMAGE_BYTES = 3_750_000  # 5 MB once in base64: what Anthropic takes per image
MAX_IMAGES_PER_RESULT = 4


def _images(row: ModelRow) -> tuple[WireImage, ...]:
    """The images a tool result saved beside spilled output (an MCP tool's, mcp/tool.py:
    `meta.attachments`), for providers that take them.  A pruned result (api_content set)
    sends none; a file gone or too large is left out (the text still names it)."""
    attachments = _meta(row).get("attachments") if row.meta else None
    if not isinstance(attachments, list):
        return ()
    out: list[WireImage] = []
    for item in attachments:
        if len(out) >= MAX_IMAGES_PER_RESULT:
            break
        if not isinstance(item, dict) or item.get("mime_type") not in IMAGE_TYPES:
            continue
        if not isinstance(item.get("bytes"), int) or item["bytes"] > MAX_IMAGE_BYTES:
            continue
        try:
            data = Path(str(item.get("path"))).read_bytes()
        except OSError:
            continue
        out.append(WireImage(str(item["mime_type"]), base64.b64encode(data).decode("ascii")))
    return tuple(out)
