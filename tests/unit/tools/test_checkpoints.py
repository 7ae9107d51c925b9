"""Undo's restore on real files: through an fd, never through a symlink that appeared since."""

import os
from pathlib import Path

from backend.tools.checkpoints import _restore_all


def test_restore_puts_content_back_and_removes_created_files(tmp_path: Path) -> None:
    blob = tmp_path / "blob"
    blob.write_bytes(b"old\n")
    changed, created = tmp_path / "work" / "sub" / "a.txt", tmp_path / "work" / "new.txt"
    created.parent.mkdir()
    created.write_text("made by the turn")
    rows = [(str(changed), True, str(blob)), (str(created), False, None)]
    assert _restore_all(rows) == [str(changed), str(created)]
    assert changed.read_bytes() == b"old\n", "its folder is made again"
    assert not created.exists()


def test_restore_refuses_a_path_that_now_goes_through_a_symlink(tmp_path: Path) -> None:
    work, out = tmp_path / "work", tmp_path / "out"
    work.mkdir()
    out.mkdir()
    (out / "b.txt").write_text("keep")
    blob = tmp_path / "blob"
    blob.write_bytes(b"old\n")
    (work / "sub").symlink_to(out)  # was a folder when the turn changed sub/a.txt
    (work / "b.txt").symlink_to(out / "b.txt")
    (work / "ok.txt").write_text("new")
    rows = [(str(work / "sub" / "a.txt"), True, str(blob)), (str(work / "b.txt"), False, None),
            (str(work / "ok.txt"), True, str(blob))]
    assert _restore_all(rows) == [str(work / "ok.txt")], "the others are left, the rest goes back"
    assert sorted(os.listdir(out)) == ["b.txt"]
    assert (out / "b.txt").read_text() == "keep"
    assert (work / "ok.txt").read_bytes() == b"old\n"
