"""The offline model's server stops when idle and starts again on the next request.

A tiny Python HTTP server stands in for llama.cpp's (through LocalChat's `command`
seam): it answers GET /v1/models, streams a reply in three slow pieces, counts tokens,
starts a grandchild (to prove the whole process group goes) and, like a real server,
takes a moment to exit on SIGTERM (so a request can arrive while it stops).
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

from backend.providers.base import ChatRequest, TextChunk, UsageChunk, WireMessage
from backend.providers.local import LocalChat
from shared.config import ProviderConfig

STAND_IN = r'''
import json, os, signal, subprocess, sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

port, pidfile, delay, term_delay = int(sys.argv[1]), sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
with open(pidfile, "w") as f:
    f.write(f"{os.getpid()} {child.pid}")

def on_term(signum, frame):
    time.sleep(term_delay)  # a slow exit, like a server unloading its model
    os._exit(0)  # the grandchild is left behind on purpose: the group kill must get it

signal.signal(signal.SIGTERM, on_term)

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *args):
        pass
    def _json(self, obj):
        body = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def do_GET(self):
        self._json({"data": [{"id": "stand-in"}]})
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.path.startswith("/extras"):
            return self._json({"count": 3})
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        for piece in ["one ", "two ", "three"]:
            time.sleep(delay)
            chunk = {"choices": [{"index": 0, "delta": {"content": piece}}]}
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.flush()
        done = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
        self.wfile.write(f"data: {json.dumps(done)}\n\ndata: [DONE]\n\n".encode())
        self.wfile.flush()
        self.close_connection = True

ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
'''

REQUEST = ChatRequest(model="stand-in", messages=[WireMessage("user", "hi")])


class StandIn:
    def __init__(self, tmp_path: Path, delay: float = 0.0, term_delay: float = 0.0) -> None:
        self.script = tmp_path / "stand_in.py"
        self.script.write_text(STAND_IN)
        self.model = tmp_path / "model.gguf"
        self.model.write_bytes(b"not read")
        self.pidfile = tmp_path / "pids"
        self.delay, self.term_delay = delay, term_delay
        self.cfg = ProviderConfig(kind="local", model="stand-in", model_path=str(self.model),
                                  context_window=2048)

    def command(self, model_path: Path, port: int, cfg: ProviderConfig) -> list[str]:
        return [sys.executable, str(self.script), str(port), str(self.pidfile),
                str(self.delay), str(self.term_delay)]

    def pids(self) -> tuple[int, int]:
        server, child = self.pidfile.read_text().split()
        return int(server), int(child)

    def chat(self, tmp_path: Path, minutes: float) -> LocalChat:
        return LocalChat("local", self.cfg, tmp_path, lambda: minutes, self.command)


async def ask(chat: LocalChat) -> str:
    chunks = [c async for c in chat.stream(REQUEST)]
    assert any(isinstance(c, UsageChunk) for c in chunks)
    return "".join(c.text for c in chunks if isinstance(c, TextChunk))


async def until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped by its parent) counts as gone.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


async def test_stops_when_idle_then_starts_again_on_the_next_request(tmp_path: Path) -> None:
    stand_in = StandIn(tmp_path)
    chat = stand_in.chat(tmp_path, minutes=0.005)  # 0.3 s
    try:
        assert await ask(chat) == "one two three"
        server, child = stand_in.pids()
        assert chat.running()
        await until(lambda: not chat.running())
        assert chat.idle_stops == 1
        await until(lambda: not alive(server) and not alive(child), 3.0)  # the whole group

        assert await ask(chat) == "one two three", "the next request starts it again"
        assert chat.starts == 2
        assert stand_in.pids()[0] != server
    finally:
        await chat.aclose()
    # SIGKILL is delivered as aclose returns; the grandchild's exit may take a moment on a
    # loaded machine (the same wait as after the idle stop above).
    await until(lambda: not any(alive(pid) for pid in stand_in.pids()), 3.0)


async def test_a_request_in_flight_keeps_the_server(tmp_path: Path) -> None:
    stand_in = StandIn(tmp_path, delay=0.4)  # each reply takes 1.2 s
    chat = stand_in.chat(tmp_path, minutes=0.002)  # 0.12 s
    try:
        await ask(chat)
        await until(lambda: not chat.running())  # idle after the first: stopped
        # Two overlapping requests, each far longer than the idle time.
        first = asyncio.create_task(ask(chat))
        await asyncio.sleep(0.6)
        second = asyncio.create_task(ask(chat))
        assert await first == "one two three"
        assert chat.running(), "the second request still holds the server"
        assert await second == "one two three"
        assert chat.starts == 2, "no stop between overlapping requests"
        await until(lambda: not chat.running())
        assert chat.idle_stops == 2
    finally:
        await chat.aclose()


async def test_a_request_arriving_while_the_server_stops_waits_and_restarts_it(
    tmp_path: Path,
) -> None:
    stand_in = StandIn(tmp_path, term_delay=0.8)  # the stop takes 0.8 s
    chat = stand_in.chat(tmp_path, minutes=0.002)
    try:
        await ask(chat)
        old_server, old_child = stand_in.pids()
        await until(lambda: chat.idle_stops == 1)  # the stop is under way (SIGTERM sent)
        assert alive(old_server), "still exiting"
        answer = await ask(chat)  # arrives mid-stop
        assert answer == "one two three", "not lost"
        assert chat.starts == 2
        assert not alive(old_server), "the old server went first"
        assert not alive(old_child), "with its whole group"
        assert stand_in.pids()[0] != old_server
    finally:
        await chat.aclose()


async def test_zero_minutes_never_stops(tmp_path: Path) -> None:
    stand_in = StandIn(tmp_path)
    chat = stand_in.chat(tmp_path, minutes=0)
    try:
        await ask(chat)
        await asyncio.sleep(0.5)
        assert chat.running()
        assert chat.idle_stops == 0
    finally:
        await chat.aclose()
    server, child = stand_in.pids()
    assert not alive(server), "aclose stops the server"
    assert not alive(child), "and its whole group"


async def test_aclose_during_an_idle_stop_leaves_nothing_running(tmp_path: Path) -> None:
    stand_in = StandIn(tmp_path, term_delay=0.5)
    chat = stand_in.chat(tmp_path, minutes=0.001)
    await ask(chat)
    await until(lambda: chat.idle_stops == 1)
    await chat.aclose()  # while the idle stop waits for the server to exit
    server, child = stand_in.pids()
    assert not alive(server)
    assert not alive(child)
