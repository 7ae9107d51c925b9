"""The desktop's paint path: a keypress to the first streamed token painted, and scrolling a
10,000-message transcript (issue 39).

Real parts: the backend as a subprocess, the fake provider on loopback, the desktop's Controller
and windows in this process on a qasync loop; offscreen (Qt's `offscreen` platform, the default
of tests/desktop) and, in `test_paint_under_xvfb`, the same two tests again in a child pytest
on Xvfb with openbox (Qt's `xcb` platform, as people run it).  Prints `BENCH` lines (run with
-s); asserts only correctness (the token shown, every page fetched), never timings.

- first token: the composer gets a real Return key event (QTest.keyClick); the fake provider
  answers after a known delay D with one delta, stamping when it was asked and when it wrote
  the delta.  Key event -> the first paint of the transcript viewport with that token's row
  in sight, stamped when the event loop is free again after that paint.  Reported minus the
  provider's own time to first token (written - asked, about D) and as written -> painted.
  Baseline in the same run: a raw WebSocket client's prompt.submit sent -> first
  message.delta arrived, minus the same provider time.
- scrolling: a seeded 10,000-message session opened in a window, then scrolled up over the
  whole transcript a page at a time (the scroll bar's page step; at the top each older page is
  fetched and laid out), then a fling of wheel events down, posted every 8 ms without waiting
  for frames.  Every paint of the viewport is timed (its paintEvent, by an event filter that
  delivers the event itself), and each step's frame: the step taken -> its paint done and the
  loop free again.  Then page steps down at a reader's pace (a pause of 300 ms before each),
  where the rows the view renders ahead while idle are ready.
"""

from __future__ import annotations

import asyncio
import bisect
import functools
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import (
    QCoreApplication,
    QElapsedTimer,
    QEvent,
    QEventLoop,
    QModelIndex,
    QObject,
    QPersistentModelIndex,
    QPoint,
    QPointF,
    QSize,
    Qt,
    QTimer,
)
from PySide6.QtGui import QGuiApplication, QWheelEvent
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QStyledItemDelegate, QStyleOptionViewItem, QWidget

from desktop.qt.aio import settle
from desktop.qt.controller import Controller
from desktop.qt.conversation import Conversation
from desktop.qt.transcript_view import TranscriptModel, TranscriptView, make_view
from desktop.state.transcript import AssistantItem, Item, ToolItem, Transcript, UserItem
from shared.methods import SessionCreate
from tests.bench.client import BenchClient, ms, pct
from tests.bench.paint import PaintWatch
from tests.desktop.conftest import desk_backend, drive, qloop  # noqa: F401  (fixtures)
from tests.desktop.seed import SeededSession
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.integration.backend_proc import REPO, Backend

PROVIDER_DELAY_S = 0.05  # D: the fake's time to its first delta
TURNS = 20  # measured, after WARMUP
WARMUP = 2
LONG = 10_000  # messages in the scrolled session
FLING_EVENTS = 600
FLING_EVERY_MS = 8
FRAME_BUDGET_S = 0.016
READ_STEPS = 60  # page steps down at a reader's pace, after the fling
READ_PAUSE_MS = 300
INNER = "TURNKEY_PAINT_BENCH_INNER"  # set in the child pytest run under Xvfb
WINDOW = (1100, 800)


class FirstToken:
    """A Reply's ``deltas``: waits D, stamps, yields ``text``, then a second delta."""

    def __init__(self, text: str, delay: float) -> None:
        self.text = text
        self.delay = delay
        self.asked = time.perf_counter()  # the responder runs when the request has been read
        self.written = 0.0

    def __len__(self) -> int:
        return 2

    def __iter__(self) -> Iterator[str]:
        time.sleep(self.delay)
        self.written = time.perf_counter()
        yield self.text  # the fake writes the chunk right after this yield returns
        yield " (and the rest)"

    @property
    def provider_s(self) -> float:
        return self.written - self.asked


def script_first_tokens(fake: FakeOpenAI) -> list[FirstToken]:
    """Every request answered with a token naming the prompt ("tok-<prompt>")."""
    made: list[FirstToken] = []
    lock = threading.Lock()

    def respond(body: dict[str, Any]) -> Reply:
        text = next((m["content"] for m in reversed(body["messages"]) if m["role"] == "user"), "")
        first = FirstToken(f"tok-{text if isinstance(text, str) else ''}", PROVIDER_DELAY_S)
        with lock:
            made.append(first)
        return Reply(deltas=first)  # type: ignore[arg-type]  # (a list is declared; any iterable works)

    fake.responder = respond
    return made


class LoopLag(QObject):
    """The longest the event loop went without turning (a 1 ms precise timer's longest gap
    between ticks) inside a `with`: what input and painting waited for at worst."""

    def __init__(self) -> None:
        super().__init__()
        self.timer = QTimer(self, interval=1, timerType=Qt.TimerType.PreciseTimer)
        self.timer.timeout.connect(self._tick)
        self.last = 0.0
        self.worst = 0.0

    def __enter__(self) -> LoopLag:
        self.last = time.perf_counter()
        self.worst = 0.0
        self.timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._tick()
        self.timer.stop()

    def _tick(self) -> None:
        now = time.perf_counter()
        self.worst = max(self.worst, now - self.last)
        self.last = now


class FrameWatch(QObject):
    """Times every paintEvent of `widget` (the filter delivers the Paint itself, inside a
    QElapsedTimer) and stamps when the loop is free after each."""

    def __init__(self, widget: QWidget) -> None:
        super().__init__()
        self.widget = widget
        self.paints: list[tuple[float, float]] = []  # (start, duration s)
        self.done: list[float] = []  # loop free after a paint
        self._inside = False
        self._pending = False
        widget.installEventFilter(self)

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:
        if event.type() != QEvent.Type.Paint or self._inside:
            return False
        self._inside = True
        start = time.perf_counter()
        timer = QElapsedTimer()
        timer.start()
        try:
            QCoreApplication.sendEvent(obj, event)  # on to the view's paintEvent
        finally:
            self._inside = False
        self.paints.append((start, timer.nsecsElapsed() / 1e9))
        if not self._pending:
            self._pending = True
            QTimer.singleShot(0, self._after)
        return True

    def _after(self) -> None:
        self._pending = False
        self.done.append(time.perf_counter())

    def done_after(self, t: float) -> float | None:
        """The first frame done after `t`, if any yet."""
        i = bisect.bisect_right(self.done, t)
        return self.done[i] if i < len(self.done) else None

    def stop(self) -> None:
        self.widget.removeEventFilter(self)


def platform() -> str:
    return QGuiApplication.platformName()


def spread(values: list[float]) -> str:
    return (f"p50 {ms(pct(values, 50))}, p95 {ms(pct(values, 95))}, p99 {ms(pct(values, 99))}, "
            f"max {ms(max(values))}")


def over(values: list[float]) -> str:
    n = sum(1 for v in values if v > FRAME_BUDGET_S)
    return f"{n} of {len(values)} over 16 ms"


def start_app(qtbot: Any, data_dir: Path) -> Controller:
    ctl = Controller(data_dir, restart_after_s=None)
    ctl.exit_app = lambda: None
    ctl.start(restore=False)
    qtbot.waitUntil(lambda: ctl.link.current == "connected", timeout=15_000)
    return ctl


def stop_app(qtbot: Any, ctl: Controller) -> None:
    for win in list(ctl.windows):
        win.close()
    ctl.main.close()
    drive(qtbot, settle())
    drive(qtbot, ctl.link.close())


def open_window(qtbot: Any, ctl: Controller, sid: str) -> Conversation:
    win = ctl.open_session(sid, new_window=True)
    win.resize(*WINDOW)
    conv = win.conversation
    qtbot.waitUntil(lambda: conv.state.loaded, timeout=30_000)
    qtbot.wait(200)
    return conv


# --- (a) keypress -> first token painted ------------------------------------------------------


async def raw_first_deltas(backend: Backend, made: list[FirstToken]) -> list[float]:
    """prompt.submit sent -> first message.delta arrived, minus the provider's own time."""
    client = await BenchClient.open(backend.port, backend.token)
    out: list[float] = []
    try:
        sid = (await client.call("session.create", {}))["session"]["session_id"]
        for k in range(WARMUP + TURNS):
            before = len(made)
            t0 = time.perf_counter()
            fut = await client.send("prompt.submit", {"session_id": sid, "request_id": f"raw-{k}",
                                                      "text": f"raw {k}"})
            _, resp = await fut
            admission = resp["result"]["receipt"]["admission_id"]
            t1, delta = await client.wait_event("message.delta", admission)
            assert delta["data"]["text"].startswith(f"tok-raw {k}")
            await client.wait_event("admission.settled", admission)
            first = made[before]
            if k >= WARMUP:
                out.append(t1 - t0 - first.provider_s)
    finally:
        await client.close()
    return out


def token_in_sight(conv: Conversation, token: str) -> bool:
    """The streamed row holding `token` is laid out in the viewport (it is among the last rows)."""
    items = conv.state.transcript.items
    for row in range(len(items) - 1, max(-1, len(items) - 4), -1):
        item = items[row]
        if isinstance(item, AssistantItem) and token in item.text:
            rect = conv.view.visualRect(conv.model.index(row, 0))
            return rect.isValid() and rect.intersects(conv.view.viewport().rect())
    return False


def keypress_runs(qtbot: Any, ctl: Controller, made: list[FirstToken]) -> list[dict[str, float]]:
    sid = drive(qtbot, ctl.link.call(SessionCreate())).session.session_id
    conv = open_window(qtbot, ctl, sid)
    runs: list[dict[str, float]] = []
    for k in range(WARMUP + TURNS):
        text = f"desk {k}"
        token = f"tok-{text}"
        conv.composer.setPlainText(text)
        before = len(made)
        watch = PaintWatch(conv.view.viewport(), functools.partial(token_in_sight, conv, token))
        t0 = time.perf_counter()
        QTest.keyClick(conv.composer, Qt.Key.Key_Return)
        qtbot.waitUntil(lambda watch=watch: watch.done is not None, timeout=20_000)
        qtbot.waitUntil(lambda: not conv.state.busy and conv.state.transcript.running is None,
                        timeout=20_000)
        qtbot.wait(30)
        first = made[before]
        assert watch.painted is not None
        assert watch.done is not None
        if k >= WARMUP:
            runs.append({"key_to_done": watch.done - t0, "provider": first.provider_s,
                         "written_to_paint": watch.painted - first.written,
                         "written_to_done": watch.done - first.written})
    return runs


def print_first_token(raw: list[float], runs: list[dict[str, float]]) -> None:
    def med(key: str) -> float:
        return statistics.median(r[key] for r in runs)

    minus = [r["key_to_done"] - r["provider"] for r in runs]
    minus_d = [r["key_to_done"] - PROVIDER_DELAY_S for r in runs]
    written = [r["written_to_done"] for r in runs]
    print(f"BENCH [{platform()}] keypress -> first token painted, minus the provider's own time to "
          f"first token: median {ms(statistics.median(minus))} (min {ms(min(minus))}, "
          f"{spread(minus)}) over {len(runs)} turns — goal <= 20 ms")
    print(f"BENCH [{platform()}]   minus D ({ms(PROVIDER_DELAY_S)}): median "
          f"{ms(statistics.median(minus_d))}; "
          f"the provider's own time (written - asked): median {ms(med('provider'))}")
    print(f"BENCH [{platform()}]   provider wrote the delta -> paint event: median "
          f"{ms(med('written_to_paint'))}; -> painted (loop free): median {ms(statistics.median(written))}, "
          f"{spread(written)}")
    print(f"BENCH [{platform()}]   baseline, raw WebSocket client: prompt.submit sent -> first "
          f"message.delta arrived, minus the provider's time: median {ms(statistics.median(raw))} "
          f"({spread(raw)}); the desktop adds {ms(statistics.median(minus) - statistics.median(raw))}")


def first_token_bench(qtbot: Any, backend: Backend, fake: FakeOpenAI) -> None:
    made = script_first_tokens(fake)
    raw = drive(qtbot, raw_first_deltas(backend, made), timeout_ms=120_000)
    ctl = start_app(qtbot, backend.data_dir)
    try:
        runs = keypress_runs(qtbot, ctl, made)
    finally:
        stop_app(qtbot, ctl)
    print()
    print_first_token(raw, runs)


@pytest.mark.bench
def test_keypress_to_first_token_painted(
    qtbot: Any, qapp: QApplication, qloop: asyncio.AbstractEventLoop,  # noqa: F811
    desk_backend: Backend, fake_provider: FakeOpenAI,  # noqa: F811
) -> None:
    first_token_bench(qtbot, desk_backend, fake_provider)


# --- (b) scrolling a 10,000-message session -----------------------------------------------------

SEED = """
import dataclasses, json, sys
from pathlib import Path
from tests.desktop.seed import seed_long_session_info
print(json.dumps(dataclasses.asdict(seed_long_session_info(Path(sys.argv[1]), int(sys.argv[2])))))
"""


def seed(backend: Backend, n: int) -> SeededSession:
    """Seeds with the backend stopped, in a child process."""
    assert backend.terminate() == 0
    try:
        done = subprocess.run([sys.executable, "-c", SEED, str(backend.data_dir), str(n)],
                              cwd=REPO, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        return SeededSession(**json.loads(done.stdout.strip().splitlines()[-1]))
    finally:
        backend.start()


def step_frame(qtbot: Any, frames: FrameWatch, act: Callable[[], None]) -> float:
    """`act()` (a scroll) -> its paint done and the loop free: the frame's time.  The loop runs
    until then, sleeping between events (not polling: 1,800 steps in a row)."""
    t0 = time.perf_counter()
    act()
    deadline = t0 + 30
    while (done := frames.done_after(t0)) is None:
        assert time.perf_counter() < deadline, "no frame painted within 30 s"
        QCoreApplication.processEvents(QEventLoop.ProcessEventsFlag.WaitForMoreEvents, 100)
    return done - t0


def scroll_up_whole(qtbot: Any, conv: Conversation,
                    frames: FrameWatch) -> tuple[list[float], list[float], list[float], int]:
    """Page by page to the top, fetching every older page on the way: (frames of plain steps,
    frames of steps that fetched a page, the loop's longest stall in each of those, pages
    fetched)."""
    bar = conv.view.verticalScrollBar()
    t = conv.state.transcript
    plain: list[float] = []
    fetched: list[float] = []
    stalls: list[float] = []
    lag = LoopLag()
    pages = 0
    inserted: list[float] = []  # when rows came in (the frame showing them comes after)
    conv.model.rowsInserted.connect(lambda *_: inserted.append(time.perf_counter()))

    def page_frame(start: float) -> float:
        """From `start` to the frame painted once the page's rows are in."""
        qtbot.waitUntil(lambda: bool(inserted) and inserted[-1] > start
                        and frames.done_after(inserted[-1]) is not None, timeout=30_000)
        done = frames.done_after(inserted[-1])
        assert done is not None
        return done - start
    while True:
        if bar.value() <= bar.minimum():
            if not t.has_more:
                break
            rows = len(t.items)

            def fetch() -> None:
                conv.loading.fetch_older()

            with lag:
                start = time.perf_counter()
                fetch()
                qtbot.waitUntil(lambda rows=rows: len(t.items) > rows and not conv.fetching,
                                timeout=30_000)
                fetched.append(page_frame(start))
            stalls.append(lag.worst)
            pages += 1
            continue
        value = bar.value()
        had = t.fetched_messages
        with lag:
            start = time.perf_counter()
            took = step_frame(qtbot, frames, functools.partial(bar.setValue, value - bar.pageStep()))
            plain.append(took)
            fetching = t.fetched_messages != had or conv.fetching
            if fetching:
                # The step reached the top and the view asked for the older page itself: from
                # the step to the frame painted once that page is in.
                qtbot.waitUntil(lambda had=had: t.fetched_messages != had and not conv.fetching,
                                timeout=30_000)
                fetched.append(page_frame(start))
        if fetching:
            stalls.append(lag.worst)
            pages += 1
    return plain, fetched, stalls, pages


def fling(qtbot: Any, conv: Conversation, frames: FrameWatch) -> tuple[list[float], list[float]]:
    """Wheel events down, one every FLING_EVERY_MS, not waiting for frames: (paint durations,
    gaps between consecutive painted frames) during the fling."""
    viewport = conv.view.viewport()
    bar = conv.view.verticalScrollBar()
    sent = [0]
    at = QPointF(viewport.width() / 2, viewport.height() / 2)

    def wheel() -> None:
        if sent[0] >= FLING_EVENTS or bar.value() >= bar.maximum():
            timer.stop()
            sent[0] = FLING_EVENTS
            return
        event = QWheelEvent(at, viewport.mapToGlobal(at), QPoint(0, 0), QPoint(0, -120),
                            Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier,
                            Qt.ScrollPhase.NoScrollPhase, False)
        QApplication.sendEvent(viewport, event)
        sent[0] += 1

    start = time.perf_counter()
    first_paint = len(frames.paints)
    first_done = len(frames.done)
    timer = QTimer(interval=FLING_EVERY_MS)
    timer.timeout.connect(wheel)
    timer.start()
    qtbot.waitUntil(lambda: sent[0] >= FLING_EVENTS, timeout=120_000)
    qtbot.wait(100)
    durations = [d for s, d in frames.paints[first_paint:] if s >= start]
    done = frames.done[first_done:]
    gaps = [b - a for a, b in itertools.pairwise(done)]
    return durations, gaps


def read_down(qtbot: Any, conv: Conversation, frames: FrameWatch) -> list[float]:
    """Page steps down with a reader's pause before each: (each step -> painted)."""
    bar = conv.view.verticalScrollBar()
    steps: list[float] = []
    for _ in range(READ_STEPS):
        if bar.value() >= bar.maximum():
            break
        qtbot.wait(READ_PAUSE_MS)
        steps.append(step_frame(qtbot, frames, functools.partial(bar.setValue, bar.value() + bar.pageStep())))
    return steps


def scroll_bench(qtbot: Any, backend: Backend) -> None:
    seeded = seed(backend, LONG)
    ctl = start_app(qtbot, backend.data_dir)
    try:
        t0 = time.perf_counter()
        conv = open_window(qtbot, ctl, seeded.session_id)
        opened = time.perf_counter() - t0
        frames = FrameWatch(conv.view.viewport())
        plain, fetched, stalls, pages = scroll_up_whole(qtbot, conv, frames)
        t = conv.state.transcript
        assert not t.has_more, "every page fetched"
        assert t.fetched_messages == LONG
        rows = conv.model.rowCount()
        up_paints = [d for _, d in frames.paints]
        fling_start = len(frames.paints)
        durations, gaps = fling(qtbot, conv, frames)
        assert len(frames.paints) > fling_start, "the fling painted"
        reading = read_down(qtbot, conv, frames)
        assert reading, "paged down"
        frames.stop()
    finally:
        stop_app(qtbot, ctl)
    where = f"[{platform()}]"
    print()
    print(f"BENCH {where} 10,000-message session: opened in {ms(opened)} (incl. the 200 ms wait), "
          f"{rows} rows once all {pages + 1} pages were in")
    print(f"BENCH {where}   scrolling up a page at a time (page step -> painted): {spread(plain)}; "
          f"{over(plain)}")
    print(f"BENCH {where}   steps that fetched an older page ({pages}: the step or fetch_older() "
          f"-> the frame once the page is in; reply, prepend and relayout included): "
          f"{spread(fetched)}; {over(fetched)}")
    print(f"BENCH {where}   the loop's longest stall during each of those (input and painting "
          f"waited that long at worst): {spread(stalls)}; {over(stalls)}")
    print(f"BENCH {where}   every paintEvent while scrolling up: {spread(up_paints)}; {over(up_paints)}")
    print(f"BENCH {where}   fling down ({FLING_EVENTS} wheel events, one per {FLING_EVERY_MS} ms): "
          f"paintEvent {spread(durations)}; {over(durations)}")
    print(f"BENCH {where}   fling: gap between consecutive painted frames {spread(gaps)}; {over(gaps)} "
          f"({len(gaps) + 1} frames)")
    print(f"BENCH {where}   reading: {len(reading)} page steps down, {READ_PAUSE_MS} ms apart "
          f"(step -> painted): {spread(reading)}; {over(reading)}")


@pytest.mark.bench
@pytest.mark.timeout(900)  # (1,800 frames and 100 pages: minutes on a loaded machine)
def test_scroll_10k_session(
    qtbot: Any, qapp: QApplication, qloop: asyncio.AbstractEventLoop,  # noqa: F811
    desk_backend: Backend,  # noqa: F811
) -> None:
    scroll_bench(qtbot, desk_backend)


# --- a relayout's cost per row -------------------------------------------------------------------

RELAYOUT_ROWS = 9_000
RELAYOUTS = 7


class ConstantSize(QStyledItemDelegate):
    """The least a delegate can answer: Qt's own cost per row, with one Python call."""

    def sizeHint(self, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex) -> QSize:
        return QSize(100, 60)


def relayout_ms(view: TranscriptView) -> float:
    times = []
    for _ in range(RELAYOUTS):
        t0 = time.perf_counter()
        view.doItemsLayout()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


@pytest.mark.bench
def test_relayout_of_many_rows(qtbot: Any, qapp: QApplication) -> None:
    """What Qt asks each time a page is added above or a streamed row grows: every row's size
    (the heights are cached: each row was measured before)."""
    transcript = Transcript()
    view = make_view(TranscriptModel(transcript))
    view.resize(*WINDOW)
    qtbot.addWidget(view)
    view.show()
    items: list[Item] = []
    for i in range(RELAYOUT_ROWS // 3):
        items += [UserItem(f"u{i}", None, text=f"question {i}"),
                  ToolItem(f"call:{i}", None, call_id=str(i), name="list_dir", summary=".", status="ok"),
                  AssistantItem(f"a{i}", None, text=f"An answer with **some** words ({i}). " * 4)]
    view.model().beginResetModel()  # (all at once: no relayout per row)
    transcript.items[:] = items
    view.model().endResetModel()
    view.doItemsLayout()  # measures every row once
    ours = relayout_ms(view)
    assert view.model().rowCount() == len(items)
    constant = ConstantSize(view)
    view.setItemDelegate(constant)
    floor = relayout_ms(view)
    view.setItemDelegate(view.delegate)
    print()
    print(f"BENCH [{platform()}] relayout of {len(items):,} rows, each measured before: median "
          f"{ms(ours)} ({ours / len(items) * 1e6:.1f} us a row) over {RELAYOUTS}; baseline, a "
          f"delegate answering a constant size: {ms(floor)} ({floor / len(items) * 1e6:.1f} us a row)")


# --- the same under Xvfb + openbox --------------------------------------------------------------


def start_xvfb() -> tuple[subprocess.Popen[bytes], int] | None:
    """Xvfb on the first of :90-:95 it can take (another test may hold one), or None."""
    for n in range(90, 96):
        if Path(f"/tmp/.X11-unix/X{n}").exists() or Path(f"/tmp/.X{n}-lock").exists():
            continue
        xvfb = subprocess.Popen(["Xvfb", f":{n}", "-nolisten", "tcp", "-screen", "0", "1280x1024x24"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while xvfb.poll() is None and time.monotonic() < deadline:
            if Path(f"/tmp/.X11-unix/X{n}").exists():
                return xvfb, n
            time.sleep(0.05)
        xvfb.terminate()  # (it exited: the display was taken after all; or it was too slow)
        xvfb.wait(10)
    return None


@pytest.mark.bench
@pytest.mark.timeout(1800)
@pytest.mark.skipif(os.environ.get(INNER) == "1", reason="the child run itself")
def test_paint_under_xvfb(tmp_path: Path) -> None:
    """The two tests above in a child pytest on Xvfb (display 90-95) with openbox, platform xcb."""
    missing = [tool for tool in ("Xvfb", "openbox") if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"not installed: {', '.join(missing)}")
    started = start_xvfb()
    if started is None:
        pytest.skip("no display of :90-:95 could be taken")
    xvfb, display = started
    env = dict(os.environ, DISPLAY=f":{display}", QT_QPA_PLATFORM="xcb", **{INNER: "1"})
    wm: subprocess.Popen[bytes] | None = None
    try:
        wm = subprocess.Popen(["openbox"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        run = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-s", "-m", "bench", "-p", "no:cacheprovider",
             f"{Path(__file__).relative_to(REPO)}::test_keypress_to_first_token_painted",
             f"{Path(__file__).relative_to(REPO)}::test_scroll_10k_session"],
            cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    finally:
        for proc in (wm, xvfb):
            if proc is not None:
                proc.terminate()
                proc.wait(10)
    lines = [ln for ln in run.stdout.splitlines() if ln.startswith("BENCH")]
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    print()
    for line in lines:
        print(line)
