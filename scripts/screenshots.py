"""Screenshots of the real app for the README: run through scripts/screenshots (it starts Xvfb).

A throwaway data folder, a real backend, and the scripted fake model (the same
one the tests use, on loopback) play a few realistic turns; then the app's own
windows are captured to docs/screenshots/.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from PySide6.QtWidgets import QApplication  # noqa: E402, I001  (PySide6 before qasync)

import qasync  # noqa: E402

from desktop.qt import theme  # noqa: E402
from desktop.qt.aio import settle  # noqa: E402
from desktop.qt.controller import Controller  # noqa: E402
from desktop.qt.settings import SettingsDialog  # noqa: E402
from desktop.qt.tray import window_icon  # noqa: E402
from shared.methods import ApprovalRespond, ConfigSet, McpTest, PromptSubmit, SessionCreate  # noqa: E402
from tests.fakes.openai_server import FakeOpenAI, Reply, content_text  # noqa: E402
from tests.integration.backend_proc import Backend  # noqa: E402

OUT = ROOT / "docs" / "screenshots"

BUGGY = textwrap.dedent('''\
    from datetime import date


    def parse_date(text: str) -> date:
        year, month, day = (int(part) for part in text.split("-"))
        return date(year, month, day)
    ''')
FIXED = textwrap.dedent('''\
    from datetime import date


    def parse_date(text: str) -> date | None:
        """An ISO date, or None when it names no real day (2026-02-30)."""
        try:
            year, month, day = (int(part) for part in text.split("-"))
            return date(year, month, day)
        except ValueError:
            return None
    ''')
EXPLAIN = textwrap.dedent('''\
    `parse_date` hands the parts straight to `datetime.date`, which **raises `ValueError`** for a
    day that does not exist — February has no 30th:

    ```python
    >>> date(2026, 2, 30)
    ValueError: day is out of range for month
    ```

    Two reasonable fixes:

    1. return `None` for impossible dates and let callers decide, or
    2. raise your own `InvalidDate` with the original text in the message.

    The first is a small change:

    ```python
    def parse_date(text: str) -> date | None:
        \"\"\"An ISO date, or None when it names no real day.\"\"\"
        try:
            year, month, day = (int(part) for part in text.split("-"))
            return date(year, month, day)
        except ValueError:  # "2026-02-30", "soon", ""
            return None
    ```

    > The importer already skips rows with a missing date, so `None` fits.''')


async def wait(pred, timeout: float = 20.0) -> None:  # type: ignore[no-untyped-def]
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not pred():
        if loop.time() > end:
            raise TimeoutError("the app did not get there in time")
        await asyncio.sleep(0.05)


async def run_turn(ctl: Controller, conv, text: str, users: int) -> None:  # type: ignore[no-untyped-def]
    from desktop.state.transcript import UserItem

    conv.composer.setPlainText(text)
    conv.send()
    await wait(lambda: (sum(isinstance(i, UserItem) for i in conv.state.transcript.items) >= users
                        and conv.state.status in ("idle", "waiting_approval")
                        and all(not i.key.startswith(("stream:", "prompt:"))
                                for i in conv.state.transcript.items))
               or bool(conv.cards))


def conv_users(conv) -> int:  # type: ignore[no-untyped-def]
    from desktop.state.transcript import UserItem

    return sum(isinstance(i, UserItem) for i in conv.state.transcript.items)


def switch_theme(app: QApplication, name: str) -> None:
    os.environ["TURNKEY_THEME"] = name
    theme.apply(app)


def screen_shot(path: Path) -> bool:
    """The whole X screen, window manager's frames included (ImageMagick's `import`)."""
    if not shutil.which("import"):
        print("screenshots: no `import` (imagemagick): two-windows.png skipped", file=sys.stderr)
        return False
    done = subprocess.run(["import", "-window", "root", str(path)], check=False)
    return done.returncode == 0


async def main(data: Path, project: Path, fake: FakeOpenAI) -> None:
    app = QApplication.instance()
    assert isinstance(app, QApplication)
    ctl = Controller(data, restart_after_s=None)
    ctl.keep_layout = False
    main_win = ctl.main
    main_win.resize(1240, 800)
    main_win.move(20, 20)
    ctl.start(restore=False)
    await wait(lambda: ctl.link.current == "connected")
    link = ctl.link
    other = project.parent / "importer"
    other.mkdir(exist_ok=True)
    for title, folder in (("Release notes for 0.4", project), ("Profile the importer", other),
                          ("Why is CI slow?", project)):
        made = await link.call(SessionCreate(title=title, cwd=str(folder)))
        fake.script(Reply(deltas=[f"Here is a first look at “{title.lower()}”."]))
        await link.call(PromptSubmit(session_id=made.session.session_id, request_id="r1", text=title))
    await asyncio.sleep(1.0)
    made = await link.call(SessionCreate(title="Fix the date parser", cwd=str(project)))
    sid = made.session.session_id
    conv = ctl.open_session(sid).conversation
    await wait(lambda: conv.state.loaded)
    fake.script(Reply(deltas=[EXPLAIN[i:i + 40] for i in range(0, len(EXPLAIN), 40)]))
    await run_turn(ctl, conv, "Why does parse_date('2026-02-30') blow up?", 1)
    OUT.mkdir(parents=True, exist_ok=True)
    main_win.banner.hide()
    await asyncio.sleep(0.6)
    conv.view.scrollToBottom()
    await asyncio.sleep(0.4)
    main_win.grab().save(str(OUT / "code.png"))
    fake.script(
        Reply.calls({"name": "read_file", "arguments": {"path": "dates.py"}},
                    text="Let me look at the file first."),
        Reply.calls({"name": "write_file", "arguments": {"path": "dates.py", "content": FIXED}}),
        Reply.calls({"name": "terminal", "arguments": {"command": "python -c 'import dates; "
                     "print(dates.parse_date(\"2026-02-30\"))'"}}),
        Reply(deltas=["Fixed: `parse_date` now returns `None` for impossible dates, and the "
                      "check above prints `None` instead of crashing."]),
    )
    await run_turn(ctl, conv, "Go with option 1 and check it.", 2)
    # Open the diff card so the screenshot shows it.
    from desktop.state.transcript import ToolItem

    for i, item in enumerate(conv.state.transcript.items):
        if isinstance(item, ToolItem) and item.name == "write_file":
            conv.state.transcript.toggle(i)
    OUT.mkdir(parents=True, exist_ok=True)
    main_win.banner.hide()  # "turn finished" for the other sessions: said, and seen
    for name in ("light", "dark"):
        switch_theme(app, name)
        await asyncio.sleep(0.8)
        conv.view.scrollToBottom()
        await asyncio.sleep(0.4)
        main_win.grab().save(str(OUT / f"main-{name}.png"))
    # An approval, with the sidebar searching for what matched.
    switch_theme(app, "light")
    fake.script(
        Reply.calls({"name": "terminal", "arguments": {"command": "rm -rf build dist"}},
                    text="Removing the stale build output."),
        Reply(deltas=["Cleaned."]),
    )
    conv.composer.setPlainText("Clean the build folders")
    conv.send()
    await wait(lambda: bool(conv.cards))
    await asyncio.sleep(0.8)
    conv.view.scrollToBottom()
    await asyncio.sleep(0.4)
    main_win.grab().save(str(OUT / "approval.png"))
    # Two windows on one session, side by side, as the window manager shows them.
    switch_theme(app, "dark")
    main_win.resize(1000, 760)
    main_win.move(10, 10)
    popped = ctl.open_session(sid, new_window=True)
    popped.resize(720, 700)
    popped.move(900, 250)
    await wait(lambda: popped.conversation.state.loaded)
    await asyncio.sleep(1.2)
    popped.conversation.view.scrollToBottom()
    popped.raise_()
    popped.activateWindow()
    await asyncio.sleep(0.8)
    screen_shot(OUT / "two-windows.png")
    switch_theme(app, "light")
    ctl.open_settings()
    assert ctl.settings is not None
    ctl.settings.resize(760, 620)
    await asyncio.sleep(1.5)
    ctl.settings.grab().save(str(OUT / "settings.png"))
    # Settings → MCP servers: one working (its tools listed), one that cannot connect (its key
    # is not stored), one switched off.
    await link.call(ConfigSet(patch={"mcp": {"servers": {
        "time": {"command": ["mcp-server-time", "--local-timezone", "UTC"]},
        "github": {"url": "https://api.githubcopilot.com/mcp/",
                   "header_secrets": {"Authorization": "mcp-github"}},
        "notes": {"command": ["npx", "-y", "@modelcontextprotocol/server-filesystem", "~/notes"],
                  "enabled": False},
    }}}))
    for name in ("time", "github"):
        await link.call(McpTest(name=name), timeout=120)
    settings = ctl.settings
    assert isinstance(settings, SettingsDialog)
    settings.reload(refill=False)
    settings.show_tab("MCP servers")
    settings.resize(900, 620)
    await wait(lambda: not settings.busy)
    settings.mcp_page.select("time")
    await asyncio.sleep(1.0)
    settings.grab().save(str(OUT / "settings-mcp.png"))
    ctl.settings.close()
    for w in list(ctl.windows):
        w.close()
    # Answer, so the turn goes on.
    await link.call(ApprovalRespond(approval_id=next(iter(conv.cards)), decision="deny"))
    await wait(lambda: conv.state.status == "idle" and not conv.cards)
    main_win.resize(1240, 800)
    ctl.show_main()
    # A file write outside the folder waits for approval and shows what it would write.
    shared_dir = project.parent / "shared-utils"
    shared_dir.mkdir(exist_ok=True)
    fake.script(
        Reply.calls({"name": "write_file", "arguments": {"path": str(shared_dir / "dates.py"),
                                                         "content": FIXED}},
                    text="The shared copy has the same bug; I will write the fix there too."),
        Reply(deltas=["Left the shared copy alone."]),
    )
    await run_turn(ctl, conv, "Fix the copy in shared-utils as well.", 4)
    await asyncio.sleep(0.8)
    conv.view.scrollToBottom()
    await asyncio.sleep(0.4)
    main_win.grab().save(str(OUT / "write-approval.png"))
    await link.call(ApprovalRespond(approval_id=next(iter(conv.cards)), decision="deny"))
    await wait(lambda: conv.state.status == "idle" and not conv.cards)
    # A command's output as it runs.
    fake.script(
        Reply.calls({"name": "terminal", "arguments": {"command": (
            "for t in parse_date format_date leap_years week_numbers time_zones iso_weeks "
            "month_ends quarters holidays spans; do printf 'tests/test_%s.py ' $t; "
            "sleep 0.25; echo '\033[32mPASSED\033[0m'; done")}},
            text="Running the date tests."),
        Reply(deltas=["All ten test files pass."]),
    )
    conv.composer.setPlainText("Run the date tests.")
    conv.send()

    def live_lines() -> int:
        for item in conv.state.transcript.items:
            if isinstance(item, ToolItem) and item.status == "running":
                return item.progress.count("PASSED")
        return 0

    await wait(lambda: live_lines() >= 6)
    conv.view.scrollToBottom()
    await asyncio.sleep(0.3)
    main_win.grab().save(str(OUT / "live-output.png"))
    await wait(lambda: conv.state.status == "idle")
    # An MCP tool's card in a conversation: the tool's own name, labelled with its server.
    await link.call(ConfigSet(patch={"mcp": {"servers": {"time": {"approval": "trusted"}}}}))
    fake.script(
        Reply.calls({"name": "mcp__time__get_current_time", "arguments": {"timezone": "Asia/Tokyo"}},
                    text="Let me check the clock in Tokyo."),
        Reply(deltas=["Tokyo is 9 hours ahead of UTC and does not observe daylight saving time; "
                      "the tool's answer above has the exact time there."]),
    )
    main_win.resize(1000, 640)
    await run_turn(ctl, conv, "What time is it in Tokyo?", conv_users(conv) + 1)
    for i, item in enumerate(conv.state.transcript.items):  # open the card: the server's answer
        if isinstance(item, ToolItem) and item.name.startswith("mcp__"):
            conv.state.transcript.toggle(i)
    await asyncio.sleep(0.8)
    conv.view.scrollToBottom()
    await asyncio.sleep(0.4)
    main_win.grab().save(str(OUT / "mcp-tool.png"))
    await asyncio.sleep(0.5)
    # Steering: a steer typed while the tests run waits for the next step, beside Queue.
    gate = project / "gate"
    os.mkfifo(gate)
    fake.script(
        Reply.calls({"name": "terminal", "arguments": {"command": "cat gate; echo 41 passed"}},
                    text="Running the whole suite."),
        Reply(deltas=["All 41 tests pass. As you asked, I left the slow tests out of the "
                      "summary; the suite above includes them."]),
    )
    conv.composer.setPlainText("Run the whole test suite.")
    conv.send()
    await wait(lambda: conv.steer_button.isVisible())
    conv.composer.setPlainText("Leave the slow tests out of the summary.")
    conv.steer()
    await wait(lambda: bool(conv.queue_rows))
    conv.composer.setPlainText("Then update the changelog.")
    await asyncio.sleep(0.4)
    conv.view.scrollToBottom()
    main_win.grab().save(str(OUT / "steer.png"))
    conv.composer.clear()
    with gate.open("w") as fifo:
        fifo.write("go\n")
    await wait(lambda: conv.state.status == "idle" and not conv.queue_rows)
    # Sub-agents: two delegate calls in one reply, one done (its answer rendered), one working.
    release = threading.Event()
    first_task = ("List every function in dates.py that can raise on bad input, with the line "
                  "it raises on.")
    second_task = "Check whether the importer calls parse_date on text users upload."

    def delegating(body: dict[str, Any]) -> Reply:
        asked = next(content_text(m) for m in body["messages"] if m.get("role") == "user")
        if first_task in asked:
            return Reply(deltas=[
                "Two functions can raise on bad input:\n\n- `parse_date` (line 5): `int()` "
                "raises `ValueError` on a non-number part, and `date()` on a day that does not "
                "exist (`2026-02-30`).\n- `parse_range` (line 14): calls `parse_date` twice.\n\n"
                "Nothing else in `dates.py` raises."])
        if second_task in asked:
            return Reply(deltas=["Yes: line 22."], hang_after=0, release=release)
        if any(m.get("role") == "tool" for m in body["messages"][-2:]):
            return Reply(deltas=["Both checks are done."])
        return Reply.calls(
            {"name": "delegate", "arguments": {"task": first_task}},
            {"name": "delegate", "arguments": {"task": second_task,
                                               "context": "The importer reads CSV files."}},
            text="I'll run two independent checks at the same time.")

    fake.responder = delegating
    main_win.resize(1000, 700)
    conv.composer.setPlainText("Find where bad dates can crash us, and whether users can trigger it.")
    conv.send()

    def subagents() -> list[ToolItem]:
        return [i for i in conv.state.transcript.items
                if isinstance(i, ToolItem) and i.name == "delegate"]

    await wait(lambda: len(subagents()) == 2 and subagents()[0].status == "ok"
               and bool(subagents()[1].child_session_id))
    await asyncio.sleep(0.8)
    conv.view.scrollToBottom()
    await asyncio.sleep(0.4)
    main_win.grab().save(str(OUT / "sub-agents.png"))
    release.set()
    await wait(lambda: conv.state.status == "idle")
    fake.responder = None
    for w in list(ctl.windows):
        w.close()
    main_win.close()
    await settle()
    await link.close()


async def backends_scene(tmp: Path, fake: FakeOpenAI) -> None:
    """docs/screenshots/backends.png: this computer's sessions and a paired build box's in
    the sidebar, a third pairing that does not answer, a remote session open."""
    import keyring

    from desktop import pairings
    from shared.client import Client
    from shared.methods import TokenCreate
    from shared.remote import RemoteTarget
    from tests.fakes.memory_keyring import MemoryKeyring
    from tests.integration.tls_backend import outside_address, start_tls_backend

    data = tmp / "desk"
    local = Backend(data, fake.base_url)
    local.start()
    remote = start_tls_backend(tmp / "build-box", fake.base_url, outside_address())
    os.environ.pop("TURNKEY_NO_KEYRING", None)  # the app's pairings go to this keyring
    keyring.set_keyring(MemoryKeyring())
    # A pairing remembered from an earlier run whose computer is switched off (TEST-NET-1).
    pairings.remember(data, pairings.Pairing("bk_gpu", "gpu-server", "192.0.2.10", 8765,
                                             "5e" * 32), "a-token-it-would-send")
    ctl = Controller(data, restart_after_s=None)
    ctl.keep_layout = False
    win = ctl.main
    win.resize(1240, 800)
    win.move(20, 20)
    try:
        ctl.start(restore=False)
        await wait(lambda: ctl.link.current == "connected")
        for title in ("Fix the date parser", "Release notes for 0.4"):
            made = await ctl.link.call(SessionCreate(title=title, cwd=str(tmp / "date-utils")))
            fake.script(Reply(deltas=[f"A first look at “{title.lower()}”."]))
            await ctl.link.call(PromptSubmit(session_id=made.session.session_id,
                                             request_id="r1", text=title))
        owner = Client(remote.data_dir, name="owner", reconnect=False)
        await owner.connect()
        token = (await owner.call(TokenCreate(scopes=["read", "submit", "approve"],
                                              label="laptop"))).token
        await owner.close()
        target = RemoteTarget(remote.target_host, remote.port, token,
                              remote.info["tls_fingerprint"])
        link = await ctl.add_remote(target, "build-box")
        there = tmp / "importer"  # (a folder on the build box)
        there.mkdir(exist_ok=True)
        sids = []
        for title, ask, answer in (
            ("Bump the CI image to Debian 13", "Bump the CI image", "Done: the image builds."),
            ("Nightly benchmark regression", "Why did the import benchmark get slower?",
             "The nightly run on **build-box** got 18% slower after `a41c9e2`: the importer now "
             "parses every date twice. Caching `parse_date` per row brings it back to 2.1 s."),
        ):
            made = await link.call(SessionCreate(title=title, cwd=str(there)))
            sid = made.session.session_id
            sids.append(sid)
            fake.script(Reply(deltas=[answer[i:i + 30] for i in range(0, len(answer), 30)]))
            await link.call(PromptSubmit(session_id=sid, request_id="r1", text=ask))
        sidebar = ctl.main.sidebar
        await wait(lambda: all(sidebar.link_of(sid) is link for sid in sids))
        conv = ctl.open_session(sids[-1]).conversation
        await wait(lambda: conv.state.loaded and conv.state.status == "idle")
        gpu = ctl.backends.link("bk_gpu")
        assert gpu is not None
        await wait(lambda: gpu.current == "reconnecting", 30)
        await asyncio.sleep(2.5)  # the sessions' "turn finished" notes pass
        win.banner.hide()
        sidebar.mark_current(sids[-1])
        await asyncio.sleep(0.6)
        conv.view.scrollToBottom()
        await asyncio.sleep(0.4)
        OUT.mkdir(parents=True, exist_ok=True)
        win.grab().save(str(OUT / "backends.png"))
    finally:
        win.close()
        await settle()
        await ctl.backends.close()
        await ctl.link.close()
        remote.close()
        local.close()


async def doors_scene(tmp: Path, fake: FakeOpenAI) -> None:
    """docs/screenshots/doors.png: a Matrix door connected (its row at the foot of the sidebar,
    its card open above it), a room's session marked in the list and open beside it.  The
    homeserver is the tests' Synapse (tests/matrix_server.py, `scripts/bootstrap dev`)."""
    import json

    from desktop.qt.doors import DoorWatch
    from tests.matrix_server import MatrixServer

    server = MatrixServer()
    await asyncio.to_thread(server.start)
    data = tmp / "doors"
    backend: Backend | None = None
    ctl: Controller | None = None
    try:
        agent = await asyncio.to_thread(server.register, "agent")
        me = await asyncio.to_thread(server.register, "me")
        backend = Backend(data, fake.base_url, extra_config=(
            f'[doors.matrix]\nhomeserver = "{server.url}"\nuser_id = "{agent.user_id}"\n'
            f'allowed_users = ["{me.user_id}"]\nedit_interval_s = 0.2\n'))
        # (TURNKEY_NO_KEYRING: the token where secret.set would put it without a keyring)
        (data / "secrets.json").write_text(json.dumps({"doors.matrix": agent.access_token}))
        (data / "secrets.json").chmod(0o600)
        backend.start()
        ctl = Controller(data, restart_after_s=None)
        ctl.keep_layout = False
        win = ctl.main
        win.resize(1240, 800)
        win.move(20, 20)
        ctl.start(restore=False)
        await wait(lambda: ctl is not None and ctl.link.current == "connected")
        for title in ("Fix the date parser", "Release notes for 0.4"):
            made = await ctl.link.call(SessionCreate(title=title, cwd=str(tmp / "date-utils")))
            fake.script(Reply(deltas=[f"A first look at “{title.lower()}”."]))
            await ctl.link.call(PromptSubmit(session_id=made.session.session_id,
                                             request_id="r1", text=title))
        doors = DoorWatch.of(ctl.link)
        await wait(lambda: bool(doors.doors) and doors.doors[0].state == "connected", 60)
        person = server.client(me)
        room = await asyncio.to_thread(person.create_room, [agent.user_id], "Ops: nightly builds")
        await wait(lambda: agent.user_id in person.joined_members(room), 60)  # the door joins
        answer = ("The nightly import got **18% slower** after `a41c9e2`: the importer now "
                  "parses every date twice. Caching `parse_date` per row brings it back to 2.1 s.")
        fake.script(Reply(deltas=[answer[i:i + 30] for i in range(0, len(answer), 30)]))
        await asyncio.to_thread(person.send_text, room, "Why did the nightly import get slower?")
        await wait(lambda: bool(doors.doors and doors.doors[0].rooms), 60)
        sid = doors.doors[0].rooms[0].session_id
        await wait(lambda: ctl is not None and ctl.main.sidebar.link_of(sid) is not None)
        conv = ctl.open_session(sid).conversation
        await wait(lambda: conv.state.loaded and conv.state.status == "idle")
        await asyncio.sleep(2.5)  # the "turn finished" note passes
        win.banner.hide()
        ctl.main.sidebar.mark_current(sid)
        strip = ctl.main.sidebar.doors
        strip.show_popover(strip.rows[0])  # a popup: grabbed from the screen, not the window
        await asyncio.sleep(0.8)
        screen = win.screen()
        frame = win.geometry()  # the window without its frame, as the other shots
        OUT.mkdir(parents=True, exist_ok=True)
        screen.grabWindow(0, frame.x(), frame.y(), frame.width(), frame.height()).save(
            str(OUT / "doors.png"))
        if strip.popover is not None:
            strip.popover.hide()
    finally:
        if ctl is not None:
            ctl.main.close()
            await settle()
            await ctl.link.close()
        if backend is not None:
            backend.close()
        server.close()


CHANGELOG = "# Changelog\n\n## 0.4\n\n- Faster imports.\n"
TESTS = textwrap.dedent('''\
    from dates import parse_date


    def test_an_impossible_day_is_none() -> None:
        assert parse_date("2026-02-30") is None


    def test_a_real_day_parses() -> None:
        assert parse_date("2026-02-28").day == 28
    ''')


async def changes_scene(data: Path, tmp: Path, fake: FakeOpenAI) -> None:
    """docs/screenshots/changes-panel-{light,dark}.png: the changes panel open beside a
    conversation whose two turns changed three files, one file's diff shown."""
    from PySide6.QtCore import Qt

    app = QApplication.instance()
    assert isinstance(app, QApplication)
    project = tmp / "date-parser"
    project.mkdir()
    (project / "dates.py").write_text(BUGGY)
    (project / "CHANGELOG.md").write_text(CHANGELOG)
    ctl = Controller(data, restart_after_s=None)
    ctl.keep_layout = False
    win = ctl.main
    win.resize(1240, 800)
    win.move(20, 20)
    try:
        ctl.start(restore=False)
        await wait(lambda: ctl.link.current == "connected")
        made = await ctl.link.call(SessionCreate(title="Fix the date parser", cwd=str(project)))
        conv = ctl.open_session(made.session.session_id).conversation
        await wait(lambda: conv.state.loaded)
        fake.script(
            Reply.calls({"name": "write_file", "arguments": {"path": "dates.py", "content": FIXED}},
                        text="I will make impossible dates return None, with tests."),
            Reply.calls({"name": "write_file", "arguments": {"path": "tests/test_dates.py",
                                                             "content": TESTS}}),
            Reply(deltas=["`parse_date` now returns `None` for a day that does not exist, and "
                          "two tests say so."]),
        )
        await run_turn(ctl, conv, "Make parse_date return None for impossible dates, with tests.", 1)
        fake.script(
            Reply.calls({"name": "patch", "arguments": {
                "path": "CHANGELOG.md", "old": "- Faster imports.\n",
                "new": "- Faster imports.\n- `parse_date` returns None for impossible dates.\n"}}),
            Reply(deltas=["Added a line to the changelog."]),
        )
        await run_turn(ctl, conv, "Note it in the changelog.", 2)
        await asyncio.sleep(1.5)
        win.banner.hide()
        win.changes.toggleViewAction().trigger()
        panel = win.changes.panel
        await wait(lambda: panel.model.file_count() == 3)
        win.resizeDocks([win.changes], [470], Qt.Orientation.Horizontal)
        first = panel.model.turns[-1].turn_id
        panel.choose(first, str((project / "dates.py").resolve()))
        OUT.mkdir(parents=True, exist_ok=True)
        for name in ("light", "dark"):
            switch_theme(app, name)
            await asyncio.sleep(0.8)
            panel.tree.setFocus()
            conv.view.scrollToBottom()
            await asyncio.sleep(0.4)
            win.grab().save(str(OUT / f"changes-panel-{name}.png"))
        switch_theme(app, "light")
    finally:
        win.close()
        await settle()
        await ctl.link.close()


async def messaging_scene(tmp: Path, fake: FakeOpenAI) -> None:
    """docs/screenshots/messaging-form-{light,dark}.png: Settings → Messaging on a backend with no
    door yet, the form filled in (the access token as dots) and Test connection's answer from
    the tests' Synapse (tests/matrix_server.py, `scripts/bootstrap dev`)."""
    from tests.matrix_server import MatrixServer

    app = QApplication.instance()
    assert isinstance(app, QApplication)
    server = MatrixServer()
    await asyncio.to_thread(server.start)
    data = tmp / "messaging"
    backend: Backend | None = None
    ctl: Controller | None = None
    try:
        agent = await asyncio.to_thread(server.register, "agent")
        me = await asyncio.to_thread(server.register, "me")
        backend = Backend(data, fake.base_url)
        backend.start()
        switch_theme(app, "light")
        ctl = Controller(data, restart_after_s=None)
        ctl.keep_layout = False
        ctl.main.resize(1240, 800)
        ctl.main.move(20, 20)
        ctl.start(restore=False)
        await wait(lambda: ctl is not None and ctl.link.current == "connected")
        ctl.open_settings("Messaging")
        settings = ctl.settings
        assert isinstance(settings, SettingsDialog)
        settings.resize(760, 700)
        settings.move(60, 40)
        form = settings.messaging_page.form
        form.homeserver_edit.setText(server.url)
        form.account_edit.setText(agent.user_id)
        form.token_edit.setText(agent.access_token)
        form.users_edit.setPlainText(me.user_id)
        form.test()
        await wait(lambda: "test" not in form.busy, 60)
        await asyncio.sleep(1.0)
        OUT.mkdir(parents=True, exist_ok=True)
        settings.grab().save(str(OUT / "messaging-form-light.png"))
        switch_theme(app, "dark")
        await asyncio.sleep(1.0)
        settings.grab().save(str(OUT / "messaging-form-dark.png"))
        switch_theme(app, "light")
        settings.close()
    finally:
        if ctl is not None:
            ctl.main.close()
            await settle()
            await ctl.link.close()
        if backend is not None:
            backend.close()
        server.close()


async def branches_scene(data: Path, tmp: Path, fake: FakeOpenAI) -> None:
    """docs/screenshots/branch-switcher-{light,dark}.png: a message answered twice (‹ 2/2 ›
    under the answer shown; the model reads that one) and edited into a branch (the message
    links to it), seen in the original session."""
    from desktop.state.transcript import AssistantItem, UserItem

    app = QApplication.instance()
    assert isinstance(app, QApplication)
    project = tmp / "naming"
    project.mkdir()
    ctl = Controller(data, restart_after_s=None)
    ctl.keep_layout = False
    win = ctl.main
    win.resize(1240, 800)
    win.move(20, 20)
    try:
        ctl.start(restore=False)
        await wait(lambda: ctl.link.current == "connected")
        made = await ctl.link.call(SessionCreate(title="Name the date parser", cwd=str(project)))
        sid = made.session.session_id
        conv = ctl.open_session(sid).conversation
        await wait(lambda: conv.state.loaded)
        fake.script(Reply(deltas=["`parse_date` says what it does: it reads a date out of "
                                  "text. Keep it."]))
        await run_turn(ctl, conv, "Is parse_date a good name for the function in dates.py?", 1)
        fake.script(Reply(deltas=["Consider `date_from_text`: it reads as what you get back, "
                                  "and leaves room for `date_from_parts` later."]))
        conv.regenerate()

        def answered() -> list[str]:
            return [i.text for i in conv.state.transcript.items
                    if isinstance(i, AssistantItem) and not i.hidden]

        await wait(lambda: any("date_from_text" in t for t in answered())
                   and conv.state.status == "idle" and conv.state.transcript.last_bar() is not None)
        prompt = next(i for i in conv.state.transcript.items if isinstance(i, UserItem))
        fake.script(Reply(deltas=["For a public API, `parse_iso_date` is clearer: it names the "
                                  "format it accepts."]))
        conv.answers._fork(prompt.key, "Is parse_date a good name for a public API function?", False)
        await wait(lambda: win.session_id != sid)
        branch = win.conversation
        await wait(lambda: branch.state.loaded and branch.state.status == "idle"
                   and any("parse_iso_date" in t.text for t in branch.state.transcript.items
                           if isinstance(t, AssistantItem)))
        ctl.open_session(sid)
        conv = win.conversation
        await wait(lambda: conv.state.loaded and conv.state.transcript.last_bar() is not None)
        await asyncio.sleep(1.5)
        win.banner.hide()
        OUT.mkdir(parents=True, exist_ok=True)
        for name in ("light", "dark"):
            switch_theme(app, name)
            await asyncio.sleep(0.8)
            conv.view.scrollToBottom()
            conv.composer.setFocus()
            await asyncio.sleep(0.4)
            win.grab().save(str(OUT / f"branch-switcher-{name}.png"))
        switch_theme(app, "light")
    finally:
        win.close()
        await settle()
        await ctl.link.close()


def fake_screenshot() -> Any:
    """A screenshot of a sign-in form showing an error, as someone would paste one."""
    from PySide6.QtCore import QRect, Qt
    from PySide6.QtGui import QColor, QFont, QImage, QPainter

    image = QImage(720, 460, QImage.Format.Format_RGB32)
    image.fill(QColor("#eef1f5"))
    p = QPainter(image)
    p.setRenderHint(QPainter.RenderHint.Antialiasing)
    p.fillRect(QRect(0, 0, 720, 36), QColor("#2d3748"))
    p.setPen(QColor("#ffffff"))
    p.setFont(QFont("DejaVu Sans", 11))
    p.drawText(QRect(14, 0, 400, 36), Qt.AlignmentFlag.AlignVCenter, "Acme Portal — Sign in")
    p.setBrush(QColor("#ffffff"))
    p.setPen(QColor("#d0d5dd"))
    p.drawRoundedRect(QRect(190, 70, 340, 330), 10, 10)
    p.setPen(QColor("#1a202c"))
    p.setFont(QFont("DejaVu Sans", 16, QFont.Weight.Bold))
    p.drawText(QRect(190, 86, 340, 36), Qt.AlignmentFlag.AlignCenter, "Welcome back")
    p.setFont(QFont("DejaVu Sans", 10))
    for n, (label, value) in enumerate((("Email", "dana@acme.test"), ("Password", "••••••••••"))):
        top = 140 + n * 70
        p.setPen(QColor("#4a5568"))
        p.drawText(QRect(215, top, 290, 18), Qt.AlignmentFlag.AlignLeft, label)
        p.setPen(QColor("#cbd5e0"))
        p.setBrush(QColor("#f7fafc"))
        p.drawRoundedRect(QRect(215, top + 22, 290, 34), 6, 6)
        p.setPen(QColor("#1a202c"))
        p.drawText(QRect(227, top + 22, 270, 34), Qt.AlignmentFlag.AlignVCenter, value)
    p.setPen(Qt.PenStyle.NoPen)
    p.setBrush(QColor("#fde8e8"))
    p.drawRoundedRect(QRect(215, 286, 290, 34), 6, 6)
    p.setPen(QColor("#c53030"))
    p.drawText(QRect(215, 286, 290, 34), Qt.AlignmentFlag.AlignCenter,
               "Something went wrong (HTTP 500)")
    p.setPen(Qt.PenStyle.NoPen)
    p.setBrush(QColor("#3182ce"))
    p.drawRoundedRect(QRect(215, 334, 290, 38), 6, 6)
    p.setPen(QColor("#ffffff"))
    p.setFont(QFont("DejaVu Sans", 11, QFont.Weight.Bold))
    p.drawText(QRect(215, 334, 290, 38), Qt.AlignmentFlag.AlignCenter, "Sign in")
    p.end()
    return image


async def attachments_scene(data: Path, tmp: Path, fake: FakeOpenAI) -> None:
    """docs/screenshots/attachments.png (and attachments-dark.png): a pasted screenshot and a dropped log in
    the transcript (thumbnail and file line), and a stylesheet waiting in the message box."""
    from PySide6.QtGui import QGuiApplication

    from desktop.state.transcript import UserItem

    app = QApplication.instance()
    assert isinstance(app, QApplication)
    project = tmp / "acme-portal"
    project.mkdir()
    log = project / "server.log"
    log.write_text("2026-03-02 09:14:07 INFO  POST /api/session 500 (41 ms)\n"
                   "2026-03-02 09:14:07 ERROR KeyError: 'remember_me'\n"
                   "  File \"portal/auth.py\", line 88, in create_session\n"
                   "    ttl = LONG if form['remember_me'] else SHORT\n")
    css = project / "login.css"
    css.write_text(".error { color: #c53030; background: #fde8e8; }\n")
    ctl = Controller(data, restart_after_s=None)
    ctl.keep_layout = False
    win = ctl.main
    win.resize(1240, 800)
    win.move(20, 20)
    try:
        ctl.start(restore=False)
        await wait(lambda: ctl.link.current == "connected")
        # The fake model's name says nothing of vision: configured as seeing, as a real one is.
        await ctl.link.call(ConfigSet(patch={"providers": {"main": {"vision": True}}}))
        made = await ctl.link.call(SessionCreate(title="Sign-in fails with a 500",
                                                 cwd=str(project)))
        sid = made.session.session_id
        conv = ctl.open_session(sid).conversation
        await wait(lambda: conv.state.loaded)
        QGuiApplication.clipboard().setImage(fake_screenshot())
        conv.composer.setFocus()
        conv.composer.paste()
        conv.attaching.give_paths([str(log)])
        await wait(lambda: len(conv.attaching.pending.files) == 2
                   and not conv.attaching.pending.uploading)
        fake.script(Reply(deltas=[
            "The form posts without a `remember_me` field when the box is unchecked, and "
            "`create_session` reads it with `form['remember_me']` (server.log, line 2), so the "
            "request fails with `KeyError` and the page shows the 500 in your screenshot.\n\n"
            "Read it with a default instead:\n\n"
            "```python\nttl = LONG if form.get('remember_me') else SHORT\n```"]))
        await run_turn(ctl, conv, "Signing in shows this error. The server log is attached: "
                       "what's wrong?", 1)
        prompt = next(i for i in conv.state.transcript.items if isinstance(i, UserItem))
        thumbs = [a.thumbnail for a in prompt.attachments if a.thumbnail]
        await wait(lambda: all(t in conv.attaching.thumbnails.images for t in thumbs))
        conv.attaching.give_paths([str(css)])
        conv.composer.setPlainText("And make the error box match our red from login.css")
        await wait(lambda: not conv.attaching.pending.uploading)
        await asyncio.sleep(1.0)
        win.banner.hide()
        OUT.mkdir(parents=True, exist_ok=True)
        for name in ("light", "dark"):
            switch_theme(app, name)
            await asyncio.sleep(0.8)
            conv.view.scrollToBottom()
            conv.composer.setFocus()
            await asyncio.sleep(0.4)
            win.grab().save(str(OUT / ("attachments.png" if name == "light"
                                       else "attachments-dark.png")))
        switch_theme(app, "light")
    finally:
        win.close()
        await settle()
        await ctl.link.close()


async def clarify_scene(data: Path, tmp: Path, fake: FakeOpenAI) -> None:
    """docs/screenshots/clarify.png: the model asks which way to go before changing anything;
    its question waits on a card with the choices as buttons and a field for other words."""
    from shared.methods import ClarifyRespond

    app = QApplication.instance()
    assert isinstance(app, QApplication)
    project = tmp / "billing"
    project.mkdir()
    ctl = Controller(data, restart_after_s=None)
    ctl.keep_layout = False
    win = ctl.main
    win.resize(1240, 800)
    win.move(20, 20)
    try:
        ctl.start(restore=False)
        await wait(lambda: ctl.link.current == "connected")
        made = await ctl.link.call(SessionCreate(title="Round invoice totals",
                                                 cwd=str(project)))
        conv = ctl.open_session(made.session.session_id).conversation
        await wait(lambda: conv.state.loaded)
        switch_theme(app, "light")
        fake.script(Reply.calls({"name": "clarify", "arguments": {
            "question": "Invoices are rounded per line today, so a total can differ from the "
                        "sum of its lines by a cent. Which rule should the totals follow?",
            "choices": ["Round each line, then add (as now)",
                        "Add exact amounts, round the total once",
                        "Banker's rounding on the total"]}},
            text="Before I change `invoice_total`, one thing only you can decide."),
            Reply(deltas=["Done."]))
        conv.composer.setPlainText("Make invoice totals match what the accountants expect")
        conv.send()
        await wait(lambda: len(conv.shelves.questions) == 1)
        await asyncio.sleep(1.0)
        win.banner.hide()
        conv.view.scrollToBottom()
        next(iter(conv.shelves.questions.values())).buttons[1].setFocus()
        await asyncio.sleep(0.5)
        OUT.mkdir(parents=True, exist_ok=True)
        win.grab().save(str(OUT / "clarify.png"))
        await ctl.link.call(ClarifyRespond(question_id=next(iter(conv.shelves.questions)),
                                           choice=1))
        await wait(lambda: conv.state.status == "idle")
    finally:
        win.close()
        await settle()
        await ctl.link.close()


def run(scenes: list[str] | None = None) -> int:
    """Every screenshot, or only the scenes named ("backends", "doors", "changes", "branches",
    "messaging", "attachments", "clarify")."""
    only = set(scenes or [])
    with tempfile.TemporaryDirectory(prefix="turnkey-shots-") as tmp:
        data, project = Path(tmp) / "data", Path(tmp) / "date-utils"
        project.mkdir()
        (project / "dates.py").write_text(BUGGY)
        (project / "build").mkdir()
        fake = FakeOpenAI()
        os.environ["TURNKEY_NO_KEYRING"] = "1"
        # The venv's programs on the PATH commands (and MCP servers) get: `mcp-server-time`.
        path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
        backend = Backend(data, fake.base_url, extra_env={"PATH": path})
        backend.start()
        try:
            app = QApplication(sys.argv[:1])
            app.setQuitOnLastWindowClosed(False)  # main() quits when it is done
            app.setApplicationName("Turnkey")
            app.setWindowIcon(window_icon())
            theme.apply(app)

            async def everything() -> None:
                if not only:
                    await main(data, project, fake)
                if not only or "backends" in only:
                    await backends_scene(Path(tmp), fake)
                if not only or "doors" in only:
                    await doors_scene(Path(tmp), fake)
                if not only or "changes" in only:
                    await changes_scene(data, Path(tmp), fake)
                if not only or "branches" in only:
                    await branches_scene(data, Path(tmp), fake)
                if not only or "messaging" in only:
                    await messaging_scene(Path(tmp), fake)
                if not only or "attachments" in only:
                    await attachments_scene(data, Path(tmp), fake)
                if not only or "clarify" in only:
                    await clarify_scene(data, Path(tmp), fake)
                app.quit()

            qasync.run(everything())
        finally:
            backend.close()
            fake.close()
    print(f"screenshots in {OUT}", flush=True)
    # Every shot is saved and the backend is stopped.  Interpreter teardown of this script's Qt
    # objects segfaults now and then (no Python frame; the app itself quits cleanly, checked
    # under Xvfb): end here instead of in that teardown.
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    raise SystemExit(run(sys.argv[1:]))
