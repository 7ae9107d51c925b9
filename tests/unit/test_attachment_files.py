"""The attachment store's files, as an attacker who could plant links in the data folder would
try them: a link where an upload in progress, a whole file, its temporary name or a folder of
the store should be is never written or read through."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from backend.store import attachments as store

SHA = hashlib.sha256(b"hello").hexdigest()


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    target = tmp_path / "bashrc"
    target.write_text("kept\n")
    return target


def test_an_upload_in_progress_is_never_appended_through_a_link(tmp_path: Path, secret: Path) -> None:
    root = tmp_path / "attachments"
    (root / "partial").mkdir(parents=True)
    (root / "partial" / SHA).symlink_to(secret)
    with pytest.raises(OSError, match="symbolic link"):
        store.append_partial(root, SHA, 0, b"echo pwned\n")
    with pytest.raises(OSError, match="symbolic link"):
        store.read_partial(root, SHA)
    assert secret.read_text() == "kept\n"


def test_a_whole_file_is_never_read_through_a_link(tmp_path: Path, secret: Path) -> None:
    root = tmp_path / "attachments"
    (root / SHA[:2]).mkdir(parents=True)
    (root / SHA[:2] / SHA).symlink_to(secret)
    with pytest.raises(OSError, match="symbolic link"):
        store.read_file(root, SHA)


def test_a_link_at_the_temporary_name_is_replaced_not_written_through(
        tmp_path: Path, secret: Path) -> None:
    root = tmp_path / "attachments"
    (root / SHA[:2]).mkdir(parents=True)
    tmp = store.file_path(root, SHA).with_name(f".{SHA}.{os.getpid()}.tmp")
    tmp.symlink_to(secret)
    store.write_file(root, SHA, b"hello")
    assert secret.read_text() == "kept\n"
    assert store.read_file(root, SHA) == b"hello"


def test_a_folder_of_the_store_that_is_a_link_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "attachments"
    root.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (root / SHA[:2]).symlink_to(elsewhere)
    (root / "partial").symlink_to(elsewhere)
    with pytest.raises(OSError, match="symbolic link"):
        store.write_file(root, SHA, b"hello")
    with pytest.raises(OSError, match="symbolic link"):
        store.append_partial(root, SHA, 0, b"hello")
    assert list(elsewhere.iterdir()) == []
