"""Resolving a path once into an open folder: real files and links in temp folders, through
openat2 and through the fallback walk alike."""

import errno
import os
from pathlib import Path

import pytest

from backend.tools.beneath import MagicLink, NotPlain, Place, locate, read_plain

pytestmark = pytest.mark.usefixtures("resolver")  # openat2 and the walk alike


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """cwd/ with a file, a folder, links inside and out; out/ beside it."""
    root = tmp_path.resolve()
    cwd, out = root / "cwd", root / "out"
    (cwd / "sub").mkdir(parents=True)
    out.mkdir()
    (cwd / "a.txt").write_text("a")
    (out / "o.txt").write_text("o")
    (cwd / "in").symlink_to("sub")
    (cwd / "abs_in").symlink_to(cwd / "sub")
    (cwd / "out").symlink_to(out)
    (cwd / "rel_out").symlink_to("../out/o.txt")
    (cwd / "dangling").symlink_to(out / "new" / "deep")
    return cwd


def where(path: str, cwd: Path) -> tuple[str, tuple[str, ...], str]:
    with locate(path, str(cwd)) as place:
        assert os.path.samestat(os.fstat(place.dir_fd), os.stat(place.real_dir))
        return place.real_dir, place.missing, place.name


def test_a_file_its_folder_and_the_folder_itself(tree: Path) -> None:
    assert where("a.txt", tree) == (str(tree), (), "a.txt")
    assert where(str(tree / "a.txt"), tree) == (str(tree), (), "a.txt")
    assert where("sub", tree) == (str(tree / "sub"), (), "")
    assert where(".", tree) == (str(tree), (), "")
    assert where("sub/..", tree) == (str(tree), (), "")


def test_missing_folders_are_listed_not_made(tree: Path) -> None:
    assert where("new/deeper/x.txt", tree) == (str(tree), ("new", "deeper"), "x.txt")
    assert not (tree / "new").exists()
    with pytest.raises(FileNotFoundError):
        locate("new/../x.txt", str(tree))  # as the kernel: `..` of a folder that is not there


def test_symlinks_inside_resolve_to_their_real_place(tree: Path) -> None:
    assert where("in/x.txt", tree) == (str(tree / "sub"), (), "x.txt")
    assert where("abs_in/x.txt", tree) == (str(tree / "sub"), (), "x.txt")
    assert where("in/../a.txt", tree) == (str(tree), (), "a.txt")  # `..` of the real folder


def test_symlinks_and_dotdot_out_land_outside(tree: Path) -> None:
    out = tree.parent / "out"
    assert where("out/x.txt", tree) == (str(out), (), "x.txt")
    assert where("../out/o.txt", tree) == (str(out), (), "o.txt")
    assert where("rel_out", tree) == (str(out), (), "o.txt"), "a link as the last part is followed"
    assert where("dangling", tree) == (str(out), ("new",), "deep"), "to where it would create"
    assert where("dangling/x", tree) == (str(out), ("new", "deep"), "x")


def test_a_symlink_loop_and_a_file_as_folder_fail(tree: Path) -> None:
    (tree / "loop").symlink_to("pool")
    (tree / "pool").symlink_to("loop")
    with pytest.raises(OSError, match="symbolic links") as loop:
        locate("loop/x", str(tree))
    assert loop.value.errno == errno.ELOOP
    with pytest.raises(NotADirectoryError):
        locate("a.txt/x", str(tree))


def test_proc_links_of_a_process_are_refused(tree: Path) -> None:
    for path in ("/proc/self/root/etc/hostname", "/proc/self/cwd/x", f"/proc/{os.getpid()}/root",
                 "/proc/self/fd/0", "/dev/fd/0"):
        with pytest.raises(MagicLink):
            locate(path, str(tree))
    pid = str(os.getpid())
    assert where("/proc/self/environ", tree) == (f"/proc/{pid}", (), "environ")


def test_follow_false_refuses_any_link(tree: Path) -> None:
    assert where(str(tree / "sub" / "x"), tree) == (str(tree / "sub"), (), "x")
    for path in ("in/x", "rel_out", "dangling/x"):
        with pytest.raises(OSError, match="symbolic link") as refused:
            locate(str(tree / path), "/", follow=False)
        assert refused.value.errno == errno.ELOOP


def test_opening_never_follows_a_link_swapped_in_after_resolving(tree: Path) -> None:
    with locate("a.txt", str(tree)) as place:
        (tree / "a.txt").unlink()
        (tree / "a.txt").symlink_to(tree.parent / "out" / "o.txt")
        with pytest.raises(OSError, match="symbolic links") as swapped:
            place.open(os.O_RDONLY)
        assert swapped.value.errno == errno.ELOOP


def test_the_folder_fd_stays_where_it_was_resolved(tree: Path) -> None:
    with locate("in/x.txt", str(tree)) as place:
        (tree / "in").unlink()
        (tree / "in").symlink_to(tree.parent / "out")  # the path now leads out
        fd = place.open(os.O_WRONLY | os.O_CREAT)
        os.close(fd)
    assert (tree / "sub" / "x.txt").exists()
    assert not (tree.parent / "out" / "x.txt").exists()


def test_making_folders_refuses_a_link_put_at_their_name(tree: Path) -> None:
    place: Place
    with locate("new/deeper/x.txt", str(tree)) as place:
        (tree / "new").symlink_to(tree.parent / "out")
        with pytest.raises(OSError, match="new became a symlink or a file") as refused:
            place.make_folders()
        assert refused.value.errno == errno.ELOOP
    assert not (tree.parent / "out" / "deeper").exists()
    with locate("made/x.txt", str(tree)) as place:
        place.make_folders()
        assert place.missing == ()
        assert place.real == str(tree / "made" / "x.txt")
    assert (tree / "made").is_dir()


def test_read_plain_reads_a_plain_file_bounded(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("x" * 100)
    assert read_plain(str(tmp_path), "AGENTS.md", 10) == b"x" * 10
    assert read_plain(str(tmp_path), "TURNKEY.md", 10) is None, "absent"
    assert read_plain(str(tmp_path / "gone"), "AGENTS.md", 10) is None, "no folder"


def test_read_plain_refuses_a_symlink_even_to_a_file_inside(tmp_path: Path) -> None:
    (tmp_path / "notes.md").write_text("inside")
    (tmp_path / "AGENTS.md").symlink_to("notes.md")
    (tmp_path / "TURNKEY.md").symlink_to("/proc/self/environ")
    with pytest.raises(NotPlain, match=r"a symbolic link \(to notes.md\)"):
        read_plain(str(tmp_path), "AGENTS.md", 100)
    with pytest.raises(NotPlain, match="/proc/self/environ"):
        read_plain(str(tmp_path), "TURNKEY.md", 100)


def test_read_plain_refuses_a_fifo_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "AGENTS.md")
    with pytest.raises(NotPlain, match="not a plain file"):
        read_plain(str(tmp_path), "AGENTS.md", 100)


def test_read_plain_refuses_a_hard_link(tmp_path: Path) -> None:
    outside = tmp_path / "secret.txt"
    outside.write_text("token")
    folder = tmp_path / "project"
    folder.mkdir()
    os.link(outside, folder / "AGENTS.md")
    with pytest.raises(NotPlain, match="2 names"):
        read_plain(str(folder), "AGENTS.md", 100)


def test_read_plain_takes_names_only(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not a name"):
        read_plain(str(tmp_path), "../AGENTS.md", 100)
