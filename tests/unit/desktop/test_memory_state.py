"""The Memory page's rule without Qt: a change from elsewhere never replaces unsaved typing,
and our own save's echo (which may come before the save's answer) is not news."""

from __future__ import annotations

from desktop.state.memory import Notebook, measure, usage_words
from shared import protocol as p


def _file(text: str) -> p.MemoryFile:
    return p.MemoryFile(text=text, used=len(text), limit=1400)


def test_a_change_replaces_a_clean_editor_and_is_kept_aside_from_typing() -> None:
    nb = Notebook("user")
    assert nb.loaded(_file("Likes tea."), "") == "Likes tea."
    assert nb.changed("Likes coffee.", "Likes tea.") == "Likes coffee."  # clean: shown
    assert not nb.changed_aside
    assert nb.changed("Likes water.", "Likes coffee. And") is None  # typing: kept
    assert nb.changed_aside
    assert nb.dirty("Likes coffee. And")
    assert nb.reverted() == "Likes water."
    assert not nb.changed_aside


def test_a_change_equal_to_the_draft_settles_it() -> None:
    nb = Notebook("user")
    nb.loaded(_file("a"), "")
    assert nb.changed("b", "b") is None
    assert not nb.changed_aside
    assert not nb.dirty("b")


def test_our_own_saves_echo_before_its_answer_is_not_news() -> None:
    nb = Notebook("environment")
    nb.loaded(_file("old"), "")
    nb.save_started()
    assert nb.changed("new", "new  ") is None  # the echo, held while the save is in flight
    assert nb.save_done(_file("new"), "new  ", "new  ") == "new"  # the cleaned text shown
    assert not nb.changed_aside


def test_a_change_after_our_save_still_counts() -> None:
    nb = Notebook("environment")
    nb.loaded(_file("old"), "")
    nb.save_started()
    nb.changed("mine", "mine")
    nb.changed("the agent's", "mine")
    assert nb.save_done(_file("mine"), "mine", "mine") == "the agent's"  # clean: shown
    nb.save_started()
    nb.changed("mine again", "mine again and more")
    nb.changed("the agent's again", "mine again and more")
    assert nb.save_done(_file("mine again"), "mine again and more", "mine again") is None
    assert nb.changed_aside  # typed on during the save: kept, with the notice


def test_a_failed_save_keeps_the_draft() -> None:
    nb = Notebook("user")
    nb.loaded(_file("saved"), "")
    nb.save_started()
    assert nb.save_done(None, "draft", "draft") is None
    assert nb.saved == "saved"
    assert nb.dirty("draft")


def test_measure_counts_as_the_backend_does() -> None:
    assert measure("a  \n\n\nb\r\n") == 3
    assert usage_words(812, 1400) == "812 / 1,400 characters"
