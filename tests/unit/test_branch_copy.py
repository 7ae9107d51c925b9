"""A branch's copied history keeps what the model read of it (store/branches.py), and a
prompt's answers are walked and shown as store/answers.py says, on a real migrated SQLite
file."""

from __future__ import annotations

from backend.store import answers, branches, compression, messages, sessions
from backend.store.db import Database, Tx
from backend.turn.context import in_model_order


def _say(tx: Tx, sid: str, role: str, text: str, turn: str | None = None, **more: object) -> int:
    messages.insert(tx, sid, role, text, turn_id=turn, **more)  # type: ignore[arg-type]
    return int(tx.all("SELECT max(id) FROM messages")[0][0])


async def seed(db: Database) -> dict[str, int]:
    """A compressed session: six exchanges, the middle three summarized after the third
    prompt's answer, then two more prompts."""

    def job(tx: Tx) -> dict[str, int]:
        sessions.insert(tx, "s", "t", "/", "m")
        ids: dict[str, int] = {}
        for i in range(1, 7):
            ids[f"u{i}"] = _say(tx, "s", "user", f"prompt {i}", f"t{i}")
            ids[f"a{i}"] = _say(tx, "s", "assistant", f"answer {i}", f"t{i}")
            if i == 4:  # compressed during turn 4: prompts 2-3 and their answers leave the view
                compression.hide(tx, "s", ids["a1"], ids["u4"])
                ids["sum"] = _say(tx, "s", "system_note", "summary of 2-3", "t4",
                                  note_kind="summary", api_content="[summary of 2-3]",
                                  meta={"anchor": ids["a1"]})
        return ids

    return await db.write(job)


def _view(tx: Tx, sid: str) -> list[str]:
    return [r.content for r in in_model_order(messages.for_model(tx, sid))]


async def test_a_branch_reads_the_history_before_its_prompt_as_the_original_did(db: Database) -> None:
    ids = await seed(db)

    def fork(tx: Tx) -> tuple[list[str], list[str]]:
        original = sessions.row(tx, "s")
        assert original is not None
        branches.insert(tx, "b", original, "Branch · t", ids["u6"])
        branches.copy_history(tx, "s", "b", ids["u6"])
        return _view(tx, "s"), _view(tx, "b")

    whole, branch = await db.write(fork)
    assert branch == whole[:whole.index("prompt 6")], "the same view, up to the prompt"
    assert branch == ["prompt 1", "answer 1", "summary of 2-3", "prompt 4", "answer 4",
                      "prompt 5", "answer 5"]
    page, _ = await db.read(lambda tx: messages.page(tx, "b", None, 100))
    assert [m.content for m in page if m.compacted] == [
        "prompt 2", "answer 2", "prompt 3", "answer 3"], "people see them, marked compacted"


async def test_a_branch_before_a_summary_it_does_not_hold_reads_everything_before(
        db: Database) -> None:
    ids = await seed(db)

    def fork(tx: Tx) -> list[str]:
        original = sessions.row(tx, "s")
        assert original is not None
        branches.insert(tx, "b", original, "Branch · t", ids["u4"])
        branches.copy_history(tx, "s", "b", ids["u4"])
        return _view(tx, "b")

    assert await db.write(fork) == [
        "prompt 1", "answer 1", "prompt 2", "answer 2", "prompt 3", "answer 3"]


async def test_answers_of_a_prompt_and_showing_one(db: Database) -> None:
    def job(tx: Tx) -> None:
        sessions.insert(tx, "s", "t", "/", "m")
        p1 = _say(tx, "s", "user", "q1", "t1")
        _say(tx, "s", "assistant", "a1", "t1")
        _say(tx, "s", "user", "steer", "t1", meta={"steer": True})
        _say(tx, "s", "assistant", "a1 bis", "t1")
        _say(tx, "s", "assistant", "a2", "t2")  # a regeneration: no user row of its own
        _say(tx, "s", "system_note", "gone", "t2", note_kind="failed")
        _say(tx, "s", "system_note", "summary", "t2", note_kind="summary")
        p2 = _say(tx, "s", "user", "q2", "t3")
        assert answers.last_prompt(tx, "s") == answers.Prompt(p2, "t3", "q2")
        assert answers.last_prompt(tx, "s", before=p2) == answers.Prompt(p1, "t1", "q1")
        prompt = answers.prompt_of_turn(tx, "s", "t2")
        assert prompt is not None
        assert prompt.id == p1
        ex = answers.exchange(tx, "s", prompt)
        assert (ex.turns, ex.end, ex.shown) == (["t1", "t2"], p2, "t1")
        before = messages.view_token(tx, "s")
        answers.show(tx, "s", ex, "t2")
        assert messages.view_token(tx, "s") != before, "a kept view is rebuilt"
        assert [r.content for r in messages.for_model(tx, "s")] == [
            "q1", "a2", "gone", "summary", "q2"], "the steer went with its answer"
        assert answers.exchange(tx, "s", prompt).shown == "t2"
        assert answers.prompt_at(tx, "s", p1 + 2) is None, "a steer is not a prompt"

    await db.write(job)
