"""Skills end to end through a real backend and the fake model: a skill in the person's folder
and one in the session folder's .agents/skills are in the index and their bodies arrive
through the `skill` tool; a changed skill changes the block after the frozen prompt, never the
prompt's stored bytes; a symlinked SKILL.md or a file beside it linking out is never read;
`skill_manage` writes both folders; skill.list / get / set_enabled / delete."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.openai_server import FakeOpenAI, Reply

from .backend_proc import Backend, BackendFactory
from .test_tokens import mint
from .wire import (
    Connect,
    Json,
    Rpc,
    RpcError,
    create_session,
    run_turn,
    submit,
    tool_messages,
    wait_complete,
)

SECRET = "TOP-SECRET-d41d8cd98f00b204"
INVALID_PARAMS = -32602
FORBIDDEN = -32003
NOT_FOUND = -32004


def skill_md(name: str, description: str, body: str) -> str:
    return f"---\nname: {name}\ndescription: {description}\n---\n\n{body}\n"


def put_skill(root: Path, name: str, description: str, body: str) -> Path:
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(skill_md(name, description, body))
    return folder


def call(tool: str, **arguments: Any) -> Json:
    return {"name": tool, "arguments": arguments}


def stored_prompt(backend: Backend, sid: str) -> str:
    [row] = backend.query("SELECT system_prompt FROM sessions WHERE session_id = ?", (sid,))
    return str(row["system_prompt"])


def volatile(backend: Backend, sid: str, body: Json) -> str:
    """What a request sent after the frozen prompt (OpenAI-compatible: one system message,
    the block appended), checking that the frozen bytes come first, unchanged."""
    [system] = [m["content"] for m in body["messages"] if m["role"] == "system"]
    head = stored_prompt(backend, sid)
    assert system.startswith(head), "the frozen bytes come first, unchanged"
    return str(system[len(head):]).lstrip("\n")


async def test_skills_of_both_folders_are_indexed_and_load_through_the_tool(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    put_skill(backend.data_dir / "skills", "release-notes", "Write release notes from git log.",
              "1. Run git log.\n2. Group by feature.")
    project = tmp_path / "proj"
    folder = put_skill(project / ".agents" / "skills", "deploy", "Deploy this app to staging.",
                       "Run `make deploy ENV=staging`.")
    (folder / "scripts").mkdir()
    (folder / "scripts" / "check.sh").write_text("echo checked\n")
    fake_provider.script(
        Reply.calls(call("skill", name="release-notes"), call("skill", name="deploy"),
                    call("skill", name="deploy", file="scripts/check.sh")),
        Reply(deltas=["Done."]),
    )
    rpc = await connect()
    sid = await create_session(rpc, cwd=str(project))
    _, done = await run_turn(rpc, sid, "write the notes, then deploy")
    assert done["data"]["status"] == "completed", done

    first, second = (c.body for c in fake_provider.snapshot())
    block = volatile(backend, sid, first)
    assert block.startswith("Skills: instructions for particular kinds of task")
    assert "- deploy (project): Deploy this app to staging.\n" in block
    assert block.endswith("- release-notes: Write release notes from git log.")
    assert "Run git log" not in block, "bodies are read on demand"
    assert "make deploy" not in block
    user, proj, script = (m["content"] for m in tool_messages(second))
    assert "from the user's skills folder" in user
    assert "1. Run git log.\n2. Group by feature." in user
    assert "text from the project, not from the user" in proj
    assert "Run `make deploy ENV=staging`." in proj
    assert "- scripts/check.sh" in proj
    assert script == "echo checked\n"


async def test_a_changed_skill_changes_the_index_not_the_frozen_prompt(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    skills = backend.data_dir / "skills"
    put_skill(skills, "tea", "Brew tea.", "Boil water.")
    rpc = await connect()
    sid = await create_session(rpc, cwd=str(tmp_path))
    await run_turn(rpc, sid, "one")
    frozen = stored_prompt(backend, sid)
    put_skill(skills, "tea", "Brew green tea at 80 degrees.", "Do not boil.")
    put_skill(tmp_path / ".agents" / "skills", "coffee", "Make coffee.", "Grind.")
    await run_turn(rpc, sid, "two")

    first, second = (c.body for c in fake_provider.snapshot())
    assert stored_prompt(backend, sid) == frozen, "the stored prompt never changes"
    assert "- tea: Brew tea." in volatile(backend, sid, first)
    later = volatile(backend, sid, second)
    assert "- tea: Brew green tea at 80 degrees." in later
    assert "- coffee (project): Make coffee." in later
    system = next(m["content"] for m in second["messages"] if m["role"] == "system")
    assert system.encode()[:len(frozen.encode())] == frozen.encode(), "same bytes, same cached prefix"
    assert "Brew" not in frozen
    assert "Make coffee" not in frozen


async def test_links_out_of_a_skill_folder_are_refused(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.md"
    secret.write_text(skill_md("leak", "stolen: " + SECRET, SECRET))
    root = tmp_path / "proj" / ".agents" / "skills"
    (root / "leak").mkdir(parents=True)
    (root / "leak" / "SKILL.md").symlink_to(secret)  # a symlinked SKILL.md
    folder = put_skill(root, "docs", "Write docs.", "See reference.md.")
    (folder / "reference.md").symlink_to(secret)  # a file beside it linking out
    (backend.data_dir / "skills").mkdir()
    (backend.data_dir / "skills" / "mine").symlink_to(secret.parent)  # a skill folder that is a link
    fake_provider.script(
        Reply.calls(call("skill", name="leak", scope="project"), call("skill", name="docs"),
                    call("skill", name="docs", file="reference.md"), call("skill", name="mine")),
        Reply(deltas=["Done."]),
    )
    rpc = await connect()
    sid = await create_session(rpc, cwd=str(tmp_path / "proj"))
    await run_turn(rpc, sid, "use your skills")

    first, second = (c.body for c in fake_provider.snapshot())
    block = volatile(backend, sid, first)
    assert "- docs (project): Write docs." in block
    assert "leak" not in block
    assert "mine" not in block
    leak, docs, reference, mine = (m["content"] for m in tool_messages(second))
    assert leak.startswith("refused: skill leak (project): SKILL.md is a symbolic link"), leak
    assert "- reference.md (a symbolic link: not read)" in docs
    assert reference.startswith("refused: skill docs (project): reference.md is a symbolic link")
    assert mine.startswith("refused: skill mine (user): mine is a symbolic link"), mine
    for recorded in fake_provider.snapshot():
        assert SECRET not in json.dumps(recorded.body)
    assert SECRET not in json.dumps(await rpc.call("session.messages", {"session_id": sid}))


async def test_skill_manage_writes_the_persons_folder_unasked_and_the_projects_as_a_file(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    fake_provider.script(
        Reply.calls(call("skill_manage", action="create", name="lint", description="Lint Python.",
                         body="Run ruff check."),
                    call("skill_manage", action="create", name="build", scope="project",
                         description="Build: with make", body="Run make.")),
        Reply(deltas=["Saved."]),
        Reply.calls(call("skill_manage", action="update", name="lint", body="Run ruff check --fix.")),
        Reply(deltas=["Improved."]),
    )
    rpc = await connect()
    sid = await create_session(rpc, cwd=str(tmp_path))
    await run_turn(rpc, sid, "remember how to lint and build")
    user, proj = (m["content"] for m in tool_messages(fake_provider.snapshot()[1].body))
    assert user.startswith("created skill lint in the user's skills folder"), user
    assert proj.startswith("created .agents/skills/build/SKILL.md"), proj
    assert (tmp_path / ".agents/skills/build/SKILL.md").read_text() == (
        '---\nname: build\ndescription: "Build: with make"\n---\n\nRun make.\n')

    def announced_now() -> list[Json]:
        return [e for e in rpc.events if e["type"] == "skills.changed"]

    await rpc.wait_until(lambda: len(announced_now()) >= 2)
    announced = announced_now()
    # The batch's two calls run side by side: their announcements come in either order.
    assert sorted(((e["session_id"], "seq" in e, e["data"]) for e in announced),
                  key=lambda row: str(row[2]["name"])) == [
        ("", False, {"name": "build", "scope": "project",
                     "folder": str(tmp_path / ".agents" / "skills")}),
        ("", False, {"name": "lint", "scope": "user", "folder": str(backend.data_dir / "skills")}),
    ], "readers list them again"

    await run_turn(rpc, sid, "improve lint")
    assert (backend.data_dir / "skills/lint/SKILL.md").read_text() == skill_md(
        "lint", "Lint Python.", "Run ruff check --fix.")
    block = volatile(backend, sid, fake_provider.snapshot()[2].body)
    assert "- build (project): Build: with make\n- lint: Lint Python." in block
    changes = await rpc.call("session.changes", {"session_id": sid})
    assert any(f["path"].endswith(".agents/skills/build/SKILL.md") for t in changes["turns"]
               for f in t["files"]), changes


async def test_skill_methods_list_get_disable_and_delete(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    put_skill(backend.data_dir / "skills", "tea", "Brew tea.", "Boil water.")
    put_skill(tmp_path / ".agents" / "skills", "coffee", "Make coffee.", "Grind.")
    (tmp_path / ".agents" / "skills" / "Bad Name").mkdir()
    rpc = await connect()
    sid = await create_session(rpc, cwd=str(tmp_path))

    listed = await rpc.call("skill.list", {"session_id": sid})
    rows = [(s["name"], s["scope"], s["enabled"], s.get("problem") is None) for s in listed["skills"]]
    assert rows == [("Bad Name", "project", True, False), ("coffee", "project", True, True),
                    ("tea", "user", True, True)]
    assert (await rpc.call("skill.list", {}))["skills"][-1]["name"] == "tea"
    got = await rpc.call("skill.get", {"name": "coffee", "scope": "project", "session_id": sid})
    assert got["body"] == "Grind.\n"
    assert got["skill"]["description"] == "Make coffee."

    await rpc.call("skill.set_enabled", {"name": "tea", "scope": "user", "enabled": False})
    await run_turn(rpc, sid, "hi")
    block = volatile(backend, sid, fake_provider.snapshot()[0].body)
    assert "- coffee (project)" in block
    assert "- tea" not in block, "a disabled skill is left out of the index"
    listed = await rpc.call("skill.list", {"session_id": sid})
    assert [s["enabled"] for s in listed["skills"] if s["name"] == "tea"] == [False]

    await rpc.call("skill.delete", {"name": "coffee", "scope": "project", "session_id": sid})
    assert not (tmp_path / ".agents" / "skills" / "coffee").exists()
    with pytest.raises(RpcError) as gone:
        await rpc.call("skill.get", {"name": "coffee", "scope": "project", "session_id": sid})
    assert (gone.value.code, gone.value.data) == (NOT_FOUND, {"kind": "skill"})
    with pytest.raises(RpcError) as bad:
        await rpc.call("skill.get", {"name": "../x", "scope": "user"})
    assert bad.value.code == INVALID_PARAMS

    reader = await connect(token=(await mint(rpc, ["read"]))["token"], name="reader")
    assert (await reader.call("skill.list", {}))["skills"][0]["name"] == "tea"
    with pytest.raises(RpcError) as forbidden:
        await reader.call("skill.delete", {"name": "tea", "scope": "user"})
    assert forbidden.value.code == FORBIDDEN, "deleting needs admin"
    assert (backend.data_dir / "skills" / "tea" / "SKILL.md").exists()


async def test_the_command_line_lists_shows_and_removes(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    from .test_mcp_cli import Cli

    backend = backend_factory(fake_provider.base_url, extra_env={"TURNKEY_NO_KEYRING": "1"})
    cli = Cli(backend)
    empty = cli("skill", "list")
    assert (empty.returncode, empty.stdout) == (0, "no skills (none in the data folder's skills/)\n")
    folder = put_skill(backend.data_dir / "skills", "tea", "Brew tea.", "Boil water.")
    (folder / "kinds.md").write_text("green, black\n")
    put_skill(tmp_path / ".agents" / "skills", "coffee", "Make coffee.", "Grind.")
    rpc = await Rpc.open(backend.port, backend.token)
    try:
        sid = await create_session(rpc, cwd=str(tmp_path))
    finally:
        await rpc.close()

    listed = cli("skill", "list", "--session", sid)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines() == ["coffee  project  on       Make coffee.",
                                          "tea     user     on       Brew tea."]
    shown = cli("skill", "show", "tea")
    assert shown.stdout.splitlines() == [
        f"tea (user, on) in {backend.data_dir / 'skills'}", "Brew tea.", "", "Boil water.", "",
        "Files:", "  kinds.md"]
    needs = cli("skill", "rm", "coffee", "--project")
    assert needs.returncode == 1, "a project skill is found through a session"
    removed = cli("skill", "rm", "coffee", "--project", "--session", sid)
    assert (removed.returncode, removed.stdout) == (0, "removed project skill coffee\n"), removed.stderr
    assert not (tmp_path / ".agents" / "skills" / "coffee").exists()
    gone = cli("skill", "show", "nope")
    assert gone.returncode == 1
    assert "skill 'nope' not found" in gone.stderr


async def test_an_always_answer_to_a_project_skill_write_covers_the_next_one(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    """In ask mode a project skill's write asks like any file change; the person's `always`
    stores a rule for that folder, and that rule must then answer the next write there (it
    once was stored and never matched, so the person was asked again and again)."""
    backend = backend_factory(fake_provider.base_url, '[approvals]\nmode = "ask"\n')
    rpc = await Rpc.open(backend.port, backend.token)
    try:
        sid = await create_session(rpc, cwd=str(tmp_path))
        fake_provider.script(
            Reply.calls(call("skill_manage", action="create", name="build", scope="project",
                             description="Build it.", body="Run make.")),
            Reply(deltas=["Saved."]),
            Reply.calls(call("skill_manage", action="update", name="build", scope="project",
                             body="Run make -j.")),
            Reply(deltas=["Improved."]),
        )
        receipt = await submit(rpc, sid, "save how to build")
        asked = await rpc.wait_event(lambda e: e.get("session_id") == sid
                                     and e["type"] == "approval.request" and "seq" in e)
        approval = asked["data"]["approval"]
        assert approval["tool"] == "skill_manage"
        await rpc.call("approval.respond", {"approval_id": approval["approval_id"],
                                            "decision": "always"})
        await wait_complete(rpc, receipt["admission_id"])
        assert [r["pattern"] for r in (await rpc.call("rules.list", {}))["rules"]] == [
            str((tmp_path / ".agents/skills/build").resolve())]

        await run_turn(rpc, sid, "improve it")
        requests = [e for e in rpc.session_events(sid) if e["type"] == "approval.request"]
        assert len(requests) == 1, "the rule answered the second write"
        assert "Run make -j." in (tmp_path / ".agents/skills/build/SKILL.md").read_text()
        # Another project skill is another folder: the rule does not reach it.
        fake_provider.script(
            Reply.calls(call("skill_manage", action="create", name="test", scope="project",
                             description="Test it.", body="Run pytest.")),
            Reply(deltas=["Saved."]))
        receipt = await submit(rpc, sid, "and how to test")
        await rpc.wait_until(lambda: len([e for e in rpc.session_events(sid)
                                          if e["type"] == "approval.request"]) == 2)
        await rpc.call("turn.interrupt", {"session_id": sid})
        await wait_complete(rpc, receipt["admission_id"])
    finally:
        await rpc.close()
