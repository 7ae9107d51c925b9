"""A real MCP server for the tests, built on the official SDK's MCPServer (FastMCP).

Run as `python -m tests.fakes.mcp_server [--http PORT]`: stdio by default, or
streamable HTTP on 127.0.0.1:PORT at /mcp.  With FAKE_MCP_MARKS set to a
folder, it appends its pid to MARKS/starts when it starts and leaves marks
there that a test can look for (a call cancelled, a call finished).  With
FAKE_MCP_FAIL_START set it prints that text on stderr and exits at once.
With FAKE_MCP_HTTP_TOKEN set, the HTTP server answers 401 to a request
without `Authorization: Bearer <token>`.

Tools: echo, add (structured result), whoami (pid, folder, environment),
read_path / write_path (what the sandbox lets it do), slow (sleeps, marks
when cancelled), crash (exits mid-call), grow (adds a tool and announces the
list change), picture (an image), fail (an error result).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import sys
import time
from pathlib import Path
from typing import Any

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.utilities.types import Image

MARKS = os.environ.get("FAKE_MCP_MARKS")
# The smallest PNG: one transparent pixel.
PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==")

class Fake(MCPServer):
    """Lists slowly (0.5 s) once `grow` has run, so a client that does not wait for the
    listing a change announcement started would offer the old list."""

    grown = False

    async def list_tools(self) -> Any:
        if self.grown:
            await asyncio.sleep(0.5)
        return await super().list_tools()


server = Fake("fake")


def mark(name: str, text: str = "") -> None:
    if MARKS:
        with open(Path(MARKS) / name, "a") as f:
            f.write(text + "\n")


@server.tool()
def echo(text: str) -> str:
    """Returns the text it is given."""
    return text


@server.tool()
def add(a: int, b: int) -> dict[str, int]:
    """Adds two integers; the sum comes back as structured content."""
    return {"sum": a + b}


@server.tool()
def whoami() -> dict[str, Any]:
    """The server's pid, working folder and environment variable names."""
    return {"pid": os.getpid(), "cwd": os.getcwd(), "env": sorted(os.environ),
            "secret": os.environ.get("FAKE_SECRET", "")}


@server.tool()
def read_path(path: str) -> str:
    """Reads a file; says what stopped it when it cannot."""
    try:
        return Path(path).read_text()
    except OSError as exc:
        return f"cannot read: {type(exc).__name__}: {exc.strerror}"


@server.tool()
def write_path(path: str, text: str) -> str:
    """Writes a file; says what stopped it when it cannot."""
    try:
        Path(path).write_text(text)
    except OSError as exc:
        return f"cannot write: {type(exc).__name__}: {exc.strerror}"
    return "written"


@server.tool()
async def slow(seconds: float, tag: str = "slow") -> str:
    """Sleeps, then answers; marks `cancelled-TAG` when the call is cancelled."""
    mark("began", tag)
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        mark(f"cancelled-{tag}")
        raise
    mark(f"finished-{tag}")
    return f"slept {seconds}"


@server.tool()
async def steps(n: int, ctx: Context) -> str:
    """Reports progress n times, then answers."""
    for i in range(1, n + 1):
        await ctx.report_progress(i, n, f"step {i}")
        await asyncio.sleep(0.05)
    return f"{n} steps"


@server.tool()
def crash() -> str:
    """Exits the server in the middle of the call."""
    sys.stderr.write("fake server: crashing on purpose\n")
    sys.stderr.flush()
    os._exit(3)


@server.tool()
async def grow(ctx: Context) -> str:
    """Adds the tool `double` and tells the client its list changed."""
    def double(x: int) -> int:
        """Doubles x."""
        return 2 * x

    server.add_tool(double, name="double", description="Doubles x.")
    server.grown = True
    await ctx.notify_tools_changed()
    try:
        await ctx.request_context.session.send_tool_list_changed()
    except Exception as exc:  # a 2026-07-28 connection has only the stream above
        print(f"fake server: legacy list_changed not sent: {exc!r}", file=sys.stderr)
    return "grown"


@server.tool()
def picture() -> Image:
    """A one-pixel PNG."""
    return Image(data=PIXEL, format="png")


@server.tool()
def fail(why: str) -> str:
    """Raises, so the call's result is an error."""
    raise ValueError(why)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, default=None, help="serve streamable HTTP on this port")
    parser.add_argument("--tag", default="", help="ignored: names the process for a test to find")
    parser.add_argument("--linger", action="store_true",
                        help="stay alive after stdin closes (only a signal ends it)")
    args = parser.parse_args()
    failing = os.environ.get("FAKE_MCP_FAIL_START")
    if failing:
        print(failing, file=sys.stderr, flush=True)
        sys.exit(2)
    mark("starts", str(os.getpid()))
    if args.http is None:
        try:
            server.run("stdio")
        except BaseException:
            if not args.linger:
                raise
        if args.linger:  # like a server that ignores EOF and a broken pipe: only a signal ends it
            time.sleep(3600)
        return
    token = os.environ.get("FAKE_MCP_HTTP_TOKEN")
    if not token:
        server.run("streamable-http", host="127.0.0.1", port=args.http)
        return
    import uvicorn
    from starlette.responses import PlainTextResponse
    from starlette.types import ASGIApp, Receive, Scope, Send

    app = server.streamable_http_app()

    def guarded(inner: ASGIApp) -> ASGIApp:
        async def asgi(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] == "http":
                headers = dict(scope.get("headers") or [])
                if headers.get(b"authorization") != f"Bearer {token}".encode():
                    await PlainTextResponse("unauthorized", status_code=401)(scope, receive, send)
                    return
            await inner(scope, receive, send)
        return asgi

    uvicorn.run(guarded(app), host="127.0.0.1", port=args.http, log_level="warning")


if __name__ == "__main__":
    main()
