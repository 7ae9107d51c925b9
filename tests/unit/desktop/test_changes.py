"""The changes panel's model: turns newest first with their files, the file chosen kept across
reloads, what rows say, which events make the listing stale, and how a file is opened."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec

from desktop.state.changes import (
    ChangesModel,
    counts,
    default_open_refusal,
    editor_command,
    file_words,
    is_stale,
    turn_words,
)
from shared import protocol as p
from tests.unit.desktop.factories import SID

DIFF = "--- a/app.py\n+++ b/app.py\n@@ -1,2 +1,2 @@\n-old\n+new\n+more\n keep\n"


def change(label: str, diff: str = DIFF, **extra: Any) -> dict[str, Any]:
    row = {"path": f"/work/{label}", "label": label, "call_ids": ["c1"], "diff": diff,
           "created": False, "deleted": False, "restored": False}
    row.update(extra)
    return row


def result(*turns: tuple[str, list[dict[str, Any]]], has_more: bool = False) -> p.ChangesResult:
    """A session.changes answer as the wire carries it (turns oldest first)."""
    body = {"turns": [{"turn_id": t, "prompt": f"prompt of {t}", "at": "2026-11-29T18:00:00Z",
                       "files": files} for t, files in turns], "has_more": has_more}
    return msgspec.convert(body, p.ChangesResult)


def test_turns_are_shown_newest_first_each_followed_by_its_files() -> None:
    model = ChangesModel(SID)
    assert model.summary() == "Loading…"
    model.load(result(("t1", [change("a.py"), change("b.py")]), ("t2", [change("a.py")])))
    assert [(r.turn.turn_id, r.file.label if r.file else None) for r in model.rows()] == [
        ("t2", None), ("t2", "a.py"), ("t1", None), ("t1", "a.py"), ("t1", "b.py")]
    assert model.summary() == "3 files changed in 2 turns"
    assert model.chosen == ("t2", "/work/a.py"), "the newest file is shown first"
    row = model.current()
    assert row is not None
    assert row.file is not None
    assert row.turn.turn_id == "t2"


def test_the_chosen_file_stays_chosen_while_it_is_listed() -> None:
    model = ChangesModel(SID)
    model.load(result(("t1", [change("a.py"), change("b.py")])))
    model.choose(("t1", "/work/b.py"))
    model.choose(("t1", ""))  # a turn's heading is not a file to choose
    assert model.chosen == ("t1", "/work/b.py")
    model.load(result(("t1", [change("a.py"), change("b.py")]), ("t2", [change("c.py")])))
    assert model.chosen == ("t1", "/work/b.py"), "a live edit elsewhere does not move the choice"
    model.load(result(("t2", [change("c.py")]), has_more=True))
    assert model.chosen == ("t2", "/work/c.py")
    assert model.summary() == "1 file changed in 1 turn (older turns not shown)"
    model.load(result())
    assert model.chosen is None
    assert model.current() is None
    assert model.summary() == "No file changed in this session yet."


def test_following_another_session_forgets_the_listing() -> None:
    model = ChangesModel(SID)
    model.load(result(("t1", [change("a.py")])))
    model.follow(SID)
    assert model.loaded, "the same session: kept"
    model.follow("sess-2")
    assert (model.session_id, model.turns, model.loaded, model.chosen) == ("sess-2", [], False, None)


def test_rows_say_counts_and_marks() -> None:
    assert counts(DIFF) == (2, 1)
    assert counts("(no diff: binary content)") == (0, 0)
    f = msgspec.convert(change("new.txt", created=True), p.FileChange)
    assert file_words(f) == "new.txt, +2 −1, new"
    gone = msgspec.convert(change("old.txt", deleted=True, restored=True), p.FileChange)
    assert file_words(gone) == "old.txt, +2 −1, deleted, undone"
    turn = result(("t1", [])).turns[0]
    local = datetime.fromisoformat("2026-11-29T18:00:00+00:00").astimezone()
    assert turn_words(turn, now=local) == f"{local:%H:%M} · prompt of t1"
    assert turn_words(turn, now=local.replace(year=2027)) == f"{local:%d %b %H:%M} · prompt of t1"


def test_undo_and_open_are_offered_only_when_they_can_work() -> None:
    model = ChangesModel(SID)
    model.load(result(("t1", [change("a.py"), change("gone.py", deleted=True),
                              change("undone.py", restored=True),
                              change("made.py", created=True, restored=True)])))
    assert model.can_undo(busy=False)
    assert not model.can_undo(busy=True), "the backend refuses while a turn runs"
    assert model.can_open(remote=False)
    assert not model.can_open(remote=True), "a remote backend's file is on that computer"
    model.choose(("t1", "/work/gone.py"))
    assert model.can_undo(busy=False)
    assert not model.can_open(remote=False), "nothing there to open"
    model.choose(("t1", "/work/undone.py"))
    assert not model.can_undo(busy=False), "put back once"
    assert model.can_open(remote=False)
    model.choose(("t1", "/work/made.py"))
    assert not model.can_open(remote=False), "put back: the file the turn made is gone"


def test_the_editor_is_visual_with_the_path_else_the_systems_default() -> None:
    assert editor_command("/w/a b.py", {"VISUAL": "code --wait"}) == ["code", "--wait", "/w/a b.py"]
    assert editor_command("/w/a.py", {"VISUAL": "'/opt/my editor/bin/ed'"}) == [
        "/opt/my editor/bin/ed", "/w/a.py"]
    assert editor_command("/w/a.py", {"VISUAL": "  "}) is None
    assert editor_command("/w/a.py", {"EDITOR": "vi"}) is None, "EDITOR is a terminal's"


def test_a_live_edit_a_restore_or_a_turn_end_makes_the_listing_stale() -> None:
    def tool_complete(meta: dict[str, Any] | None) -> p.ToolComplete:
        return p.ToolComplete(call_id="c1", name="write_file", status="ok", summary="wrote a.py",
                              duration_ms=3, meta=meta)

    assert is_stale(tool_complete({"diff": DIFF, "created": False}))
    assert not is_stale(tool_complete({"exit_code": 0})), "a command: nothing checkpointed"
    assert not is_stale(tool_complete(None))
    assert is_stale(p.FilesRestored(turn_id="t1", paths=["/work/a.py"], call_ids=["c1"]))
    assert not is_stale(p.TextDelta(text="hi"))


def test_the_default_opener_gets_text_and_images_never_what_could_run() -> None:
    """The agent wrote the file: with no $VISUAL, the desktop's opener gets text and images
    only (types as the shared MIME database names them, with what they inherit)."""
    text = ["text/plain", "application/octet-stream"]
    assert default_open_refusal("notes.md", "text/markdown", text, executable=False) is None
    assert default_open_refusal("a.py", "text/x-python",
                                ["application/x-executable", *text], executable=False) is None
    assert default_open_refusal("logo.png", "image/png", ["application/octet-stream"],
                                executable=False) is None
    launcher = default_open_refusal("x.desktop", "application/x-desktop", text, executable=False)
    assert launcher is not None
    assert "x.desktop could run" in launcher
    assert "$VISUAL" in launcher
    assert default_open_refusal("run.sh", "application/x-shellscript", text, executable=True)
    assert default_open_refusal("tool", "application/x-executable", ["application/octet-stream"],
                                executable=False)
    assert default_open_refusal("a.AppImage", "application/vnd.appimage",
                                ["application/octet-stream"], executable=False)
    assert default_open_refusal("blob", "application/octet-stream", [], executable=False)
