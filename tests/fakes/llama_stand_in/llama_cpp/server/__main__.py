"""A stand-in for llama.cpp's OpenAI-compatible server, for tests of a server that dies.

Run as `python -m llama_cpp.server ... --port N ...` (this folder first on PYTHONPATH) or
as a script.  `FAKE_LLAMA_MODE` says how it behaves; each event is appended to the file
`FAKE_LLAMA_JOURNAL` (one line: `start`, `check` for a one-token request, `answer`):

- `ok`: answers everything ("hello from the stand-in", streamed in two pieces);
- `sigill_answer`: answers a one-token request, and on any other sends the stream's
  headers, then kills itself with SIGILL, before any text (mid-answer);
- `sigill_after_text`: as above, but after the first piece of text;
- `sigill_always`: SIGILL on every request, the one-token check included;
- `sigill_once`: the first answer of all processes sharing the journal dies as in
  `sigill_answer`; later ones are answered;
- `exit_start`: exits with status 3 before it listens;
- `slow`: answers, waiting 2 s before each piece.
"""

import json
import os
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

MODE = os.environ.get("FAKE_LLAMA_MODE", "ok")
JOURNAL = Path(os.environ["FAKE_LLAMA_JOURNAL"])
PIECES = ["hello from ", "the stand-in"]


def note(line: str) -> None:
    with JOURNAL.open("a") as journal:
        journal.write(line + "\n")


def die() -> None:
    sys.stdout.flush()
    sys.stderr.write("stand-in: dying with SIGILL\n")
    sys.stderr.flush()
    # Sent to this very thread, as a real SIGILL is: the thread writes nothing more.
    signal.pthread_kill(threading.get_ident(), signal.SIGILL)
    time.sleep(60)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def _json(self, obj: object) -> None:
        body = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._json({"data": [{"id": "stand-in"}]})

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        if self.path.startswith("/extras"):
            return self._json({"count": 3})
        check = request.get("max_tokens") == 1
        note("check" if check else "answer")
        first_answer = not check and JOURNAL.read_text().split().count("answer") == 1
        if MODE == "sigill_always" or (
            not check and (MODE == "sigill_answer" or (MODE == "sigill_once" and first_answer))
        ):
            self._stream_headers()
            die()
        if not request.get("stream"):
            return self._json({"choices": [{"index": 0, "finish_reason": "length", "message": {
                "role": "assistant", "content": "Hello"}}]})
        self._stream_headers()
        for piece in PIECES:
            if MODE == "slow":
                time.sleep(2)
            self._chunk({"content": piece})
            if MODE == "sigill_after_text":
                die()
        self._chunk({}, finish="stop")
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
        self.close_connection = True

    def _stream_headers(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.flush()

    def _chunk(self, delta: dict[str, str], finish: str | None = None) -> None:
        chunk = {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
        self.wfile.flush()


def main() -> None:
    note("start")
    if MODE == "exit_start":
        sys.stderr.write("stand-in: cannot start\n")
        sys.exit(3)
    port = int(sys.argv[sys.argv.index("--port") + 1])
    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


main()
