"""An MCP server's tool as the executor sees it: the same contract as a built-in tool.

Nothing about an MCP tool is trusted more than a built-in one: its calls are
validated against the schema its server published, written down before
they run, approved (unless the server or the tool is configured `trusted`;
in approval mode `ask` every call is asked), ordered, bounded and recovered
as `unknown` by the same executor.  A server that is down, hangs or dies
turns the call into an error result whose words say what happened; the
turn goes on.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import mimetypes
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from backend.config import write_atomic
from backend.mcp.connection import Connection, McpCallFailed, McpUnavailable
from backend.mcp.schema import ArgsChecker
from backend.tools.base import Guard, ToolContext, ToolResult
from shared.config import ApprovalMode
from shared.protocol import McpApproval

MAX_DESCRIPTION = 2000
MAX_STRUCTURED_META = 16_000
_SAFE = re.compile(r"[^A-Za-z0-9_.-]")


class McpTool:
    spill = True
    changes_files = False  # what a server changes is its own business: no checkpoint to undo

    def __init__(self, name: str, remote: Any, conn: Connection, approval: McpApproval,
                 spill_dir: Path, resolve: Callable[[], Connection] | None = None) -> None:
        self.name = name  # mcp__SERVER__TOOL
        self.remote = str(remote.name)  # the server's own name for it
        self.server = conn.name
        self.conn = conn
        # The connection that serves a call when it runs: the same, unless the server was
        # reconfigured or stopped for idleness since the tool was offered.
        self._resolve = resolve or (lambda: conn)
        self.approval: McpApproval = approval
        self.spill_dir = spill_dir
        schema = remote.input_schema if isinstance(remote.input_schema, dict) else {}
        self.parameters: dict[str, Any] = schema if schema.get("type") == "object" else \
            {"type": "object", "properties": {}}
        self.checker = ArgsChecker(name, self.parameters)
        self.about = (remote.description or getattr(remote, "title", None) or "").strip()
        self._description = f"[MCP server {self.server}] {self.about}"[:MAX_DESCRIPTION].rstrip()

    @property
    def description(self) -> str:
        return self._description

    def check_args(self, args: object) -> dict[str, Any]:
        """The arguments checked against the server's schema; raises ValueError."""
        return self.checker.check(args)

    def summary(self, args: dict[str, Any]) -> str:
        shown = json.dumps(args, ensure_ascii=False, separators=(", ", ": "))
        return f"{self.server} · {self.remote} {shown}"[:300]

    def guard(self, args: dict[str, Any], cwd: Path, mode: ApprovalMode, data_dir: Path) -> Guard | None:
        if mode == "off":
            return None
        if self.approval == "trusted" and mode != "ask":
            return None
        return Guard("dangerous", f"runs the tool {self.remote!r} of the MCP server {self.server!r}",
                     rule_key=self.name)

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        meta: dict[str, Any] = {"mcp_server": self.server, "mcp_tool": self.remote}
        try:
            conn = self._resolve()
            result = await conn.call(self.remote, args, ctx.progress)
        except McpUnavailable as exc:
            return ToolResult("error", f"Not run: {exc}.", self.summary(args), meta)
        except TimeoutError:
            return ToolResult(
                "error", f"{conn.label} did not answer within {conn.cfg.timeout_s:g} s "
                "(timeout_s); the call was cancelled. Whether it had an effect is unknown.",
                self.summary(args), meta)
        except McpCallFailed as exc:
            return ToolResult("error", f"{exc}. Whether the call had an effect is unknown.",
                              self.summary(args), meta)
        content, extra = await asyncio.to_thread(
            convert, result, self.spill_dir, ctx.session_id, ctx.call_id)
        meta.update(extra)
        return ToolResult("error" if result.is_error else "ok", content, self.summary(args), meta)


def convert(result: Any, spill_dir: Path, session_id: str, call_id: str) -> tuple[str, dict[str, Any]]:
    """The model's text for a CallToolResult, and meta for clients.  Text blocks are kept
    as they are; images, audio and binary resources are saved beside spilled output and
    named in the text (`meta.attachments`: turn/context.py sends the images themselves to a
    provider that takes them in a tool result)."""
    parts: list[str] = []
    files: list[dict[str, Any]] = []
    for n, block in enumerate(result.content or []):
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind in ("image", "audio"):
            saved = _save(spill_dir, session_id, call_id, n, block.data, block.mime_type)
            files.append(saved)
            parts.append(f"[{kind} {saved['mime_type']}, {saved['bytes']:,} bytes, saved to "
                         f"{saved['path']}]" if "path" in saved else f"[{kind}: {saved['error']}]")
        elif kind == "resource_link":
            parts.append(f"[resource {block.name}: {block.uri}]")
        elif kind == "resource":
            res = block.resource
            if getattr(res, "text", None) is not None:
                parts.append(f"[resource {res.uri}]\n{res.text}")
            else:
                saved = _save(spill_dir, session_id, call_id, n, res.blob,
                              getattr(res, "mime_type", None) or "application/octet-stream")
                files.append(saved)
                parts.append(f"[resource {res.uri}, saved to {saved.get('path', '?')}]")
        else:
            parts.append(f"[{kind or 'unknown'} content]")
    meta: dict[str, Any] = {}
    structured = result.structured_content
    if structured is not None:
        text = json.dumps(structured, ensure_ascii=False)
        if not parts:
            parts.append(text)
        if len(text) <= MAX_STRUCTURED_META:
            meta["structured"] = structured
    if files:
        meta["attachments"] = files
    content = "\n".join(parts)
    if not content:
        content = "(the tool failed, saying nothing)" if result.is_error else "(the tool returned nothing)"
    return content, meta


def _save(spill_dir: Path, session_id: str, call_id: str, n: int, data: str,
          mime_type: str) -> dict[str, Any]:
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return {"mime_type": mime_type, "error": "the server sent data that is not base64"}
    folder = spill_dir / _SAFE.sub("_", session_id)
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    ext = mimetypes.guess_extension(mime_type.split(";")[0].strip()) or ".bin"
    path = folder / f"{_SAFE.sub('_', call_id)}-{n}{ext}"
    write_atomic(path, raw)
    return {"mime_type": mime_type, "bytes": len(raw), "path": str(path)}
