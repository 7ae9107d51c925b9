"""The load bench's paced fake provider, in a process of its own.

Each streamed turn is paced by the fake (`TimedDeltas`: every delta stamped with
``time.perf_counter()`` just before it is written).  With 50 sessions that is 50 handler threads
waking 1,000 times a second; in the bench's own process they shared the GIL (and the cyclic
collector) with the readers' event loop, so part of what the readers measured was the bench being
late, not the backend.  Here the fake runs in a child process (spawned, not forked: the parent has
threads) and hands the stamps back when asked.  ``perf_counter`` is CLOCK_MONOTONIC on Linux, one
clock for every process on the host, so stamps taken there compare with arrivals taken here.
"""

from __future__ import annotations

import multiprocessing
import re
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from multiprocessing.connection import Connection

from tests.fakes.openai_server import FakeOpenAI, Recorded, Reply

from .client import Json
from .test_turn_overhead import TimedDeltas

MARK = re.compile(r"PACE-(\S+)")


class Pacer:
    """The fake's responder: a paced stream for a prompt carrying PACE-<label>, else instant."""

    def __init__(self, deltas: int, rate: float) -> None:
        self.deltas = deltas
        self.rate = rate
        self.paced: dict[str, TimedDeltas] = {}

    def __call__(self, body: Json) -> Reply:
        found = MARK.search(Recorded(body=body, started=0.0).last_user_text)
        if found is None:
            return Reply(deltas=["ok"])  # the long session's turn and its summary call
        deltas = TimedDeltas(self.deltas, self.rate)
        assert found.group(1) not in self.paced, "one model call per paced turn"
        self.paced[found.group(1)] = deltas
        return Reply(deltas=deltas)  # type: ignore[arg-type]  # any iterable of str works


def _serve(conn: Connection, deltas: int, rate: float) -> None:
    """The child: serves until told "close"; answers "stamps" with every paced turn's stamps."""
    fake = FakeOpenAI()
    pacer = Pacer(deltas, rate)
    fake.responder = pacer
    conn.send(fake.base_url)
    try:
        while (asked := conn.recv()) != "close":
            assert asked == "stamps", asked
            conn.send(({label: list(t.sent) for label, t in pacer.paced.items()}, list(fake.errors)))
    finally:
        fake.close()


class PacedFake:
    """The parent's handle: the fake's base URL and, once the turns are done, their stamps."""

    def __init__(self, conn: Connection, base_url: str) -> None:
        self._conn = conn
        self.base_url = base_url

    def stamps(self) -> dict[str, list[float]]:
        """Per paced label, when each delta was written (perf_counter); asserts the fake saw
        no bad request and no handler failure."""
        self._conn.send("stamps")
        stamps, errors = self._conn.recv()
        assert errors == [], errors
        return dict(stamps)


@contextmanager
def paced_fake(deltas: int, rate: float) -> Iterator[PacedFake]:
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_serve, args=(child, deltas, rate), name="paced-fake", daemon=True)
    proc.start()
    try:
        if not parent.poll(60):
            raise TimeoutError("the paced fake did not start")
        yield PacedFake(parent, parent.recv())
    finally:
        with suppress(OSError):  # the child is gone already
            parent.send("close")
        proc.join(10)
        if proc.is_alive():
            proc.kill()
            proc.join(5)
