"""A background review's note in the app: it arrives by `review.noted` as a quiet note of the
session (no turn, not an answer), offers Undo, and `review.undone` marks it undone; a note
read back from the transcript keeps its undone state."""

from __future__ import annotations

from desktop.state.items import NoteItem
from desktop.state.transcript import Transcript, items_from_messages
from desktop.state.turns import latest
from tests.unit.desktop.factories import assistant, event, message, user


def review_note(message_id: str, *, undone: bool = False) -> dict[str, object]:
    meta: dict[str, object] = {"changes": [{"kind": "memory", "target": "user", "action": "add",
                                            "text": "Prefers tabs."}]}
    if undone:
        meta["undone"] = True
    return {"message": message(message_id, "system_note", "Noted: added to USER.md: Prefers tabs.",
                               note_kind="review", meta=meta)}


def test_a_review_note_arrives_once_and_is_marked_undone() -> None:
    t = Transcript()
    t.load([user("0001", "hi", "t1"), assistant("0002", "hello", "t1")], has_more=False)
    t.apply(event("review.noted", review_note("0003"), seq=9))
    t.apply(event("review.noted", review_note("0003"), seq=9))  # a replay: still one
    notes = [i for i in t.items if isinstance(i, NoteItem)]
    assert [(n.key, n.kind, n.undone, n.turn_id) for n in notes] == [("0003", "review", False, None)]
    # The latest turn's actions are the person's turn's, not the note's.
    assert latest(t.items, "idle").prompt_key == "0001"
    t.apply(event("review.undone", {"message_id": "0003"}, seq=10))
    assert notes[0].undone


def test_an_undone_note_read_back_says_so() -> None:
    [item] = items_from_messages([message("0003", "system_note", "Noted: …", note_kind="review",
                                          meta={"undone": True})])
    assert isinstance(item, NoteItem)
    assert item.undone
