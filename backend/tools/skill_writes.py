"""Skills written: SKILL.md composed and checked, the person's folder changed, the disabled list.

The person's folder (`DIR/skills/`) is the agent's own, like its memory: the `skill_manage`
tool writes it without asking, so every folder on the way is opened without following a
link and SKILL.md is replaced atomically (`fileio.write_at`).  The project's folder is
written by the tool through the file tools' approval path instead (tools/skill_tools.py);
here only a person removes a project skill (`skill.delete`).  Which skills a person
turned off is kept in `DIR/skills.json` (`{"disabled": [key, ...]}`, `Skill.key`).
"""

from __future__ import annotations

import json
import os
import shutil
import threading
from pathlib import Path

from backend.tools import fileio, skills
from backend.tools.injection import first_marker
from backend.tools.memory import SECRET_PATTERNS, cleaned
from backend.tools.skills import SKILL_FILE, SkillScope

MAX_DESCRIPTION = 1_024
MAX_BODY = 50_000
_LOCK = threading.Lock()  # one backend holds a data folder (its lock file); this serializes its threads


class SkillRefused(Exception):
    """A write that may not happen; the message says what to do (the model and people read it)."""


# --- SKILL.md's text ------------------------------------------------------------------------


def checked_description(description: str) -> str:
    text = skills.one_line(description)
    if not text:
        raise SkillRefused("argument 'description' is empty; say in one line when the skill helps")
    if len(text) > MAX_DESCRIPTION:
        raise SkillRefused(f"the description is {len(text):,} characters; keep it under "
                           f"{MAX_DESCRIPTION:,} (one line on when to use the skill)")
    marked = first_marker(text)
    if marked is not None:  # it goes into a system message, the index
        raise SkillRefused(f"refused: the description contains {marked[1]!r}, {marked[0].what}; "
                           "describe the skill in plain words")
    return text


def checked_body(body: str) -> str:
    text = cleaned(body) if body.strip() else ""
    if not text:
        raise SkillRefused("argument 'body' is empty; give the skill's instructions")
    if len(text) > MAX_BODY:
        raise SkillRefused(f"the body is {len(text):,} characters; keep it under {MAX_BODY:,} "
                           "(put long references in files beside SKILL.md)")
    for what, pattern in SECRET_PATTERNS:
        if pattern.search(text):
            raise SkillRefused(f"refused: the body looks like it holds {what}; skills are sent to "
                               "the model provider, so never save keys, tokens or passwords")
    return text


def compose(name: str, description: str, body: str) -> str:
    """SKILL.md's whole text; the description double-quoted when plain YAML would misread it."""
    if not skills.valid_name(name):
        raise SkillRefused(f"{name!r} is not a skill name: 1 to 64 of a-z, 0-9 and -, not "
                           "starting or ending with -")
    desc = checked_description(description)
    if ": " in desc or desc[0] in "\"'#&*!|>%@`[]{},-?":
        desc = '"' + desc.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return f"---\nname: {name}\ndescription: {desc}\n---\n\n{checked_body(body)}\n"


def updated(name: str, current: str, description: str | None, body: str | None) -> str:
    """SKILL.md with the given parts replaced and the others kept."""
    fields, old_body = skills.parse(current)
    if description is None and body is None:
        raise SkillRefused("action 'update' needs 'description', 'body' or both")
    return compose(name, description if description is not None else fields.get("description", ""),
                   body if body is not None else old_body)


# --- the person's folder -------------------------------------------------------------------


def _user_root(data_dir: Path, create: bool) -> int | None:
    if create:
        data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        base = os.open(data_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.mkdir(skills.USER_PARTS[0], 0o700, dir_fd=base)
        except FileExistsError:
            pass
        finally:
            os.close(base)
    return skills.open_root(data_dir, skills.USER_PARTS)


def read_user(data_dir: Path, name: str) -> str | None:
    """The person's skill's SKILL.md as it is now (None: no such skill)."""
    fd = _user_root(data_dir, create=False)
    if fd is None:
        return None
    try:
        skill_fd = skills.open_folder(fd, name)
        if skill_fd is None:
            return None
        try:
            read = skills.read_text(skill_fd, SKILL_FILE, skills.MAX_SKILL_BYTES)
        finally:
            os.close(skill_fd)
    finally:
        os.close(fd)
    return None if read is None else read[0]


def write_user(data_dir: Path, name: str, text: str, *, create: bool) -> None:
    """Creates (`create`) or replaces a skill of the person's folder; SkillRefused when it
    already exists, or does not; SkillUnsafe when a link is on the way."""
    with _LOCK:
        root = _user_root(data_dir, create=True)
        assert root is not None
        try:
            try:
                os.mkdir(name, 0o700, dir_fd=root)
                existed = False
            except FileExistsError:
                existed = True
            skill_fd = skills.open_folder(root, name)
            assert skill_fd is not None
            try:
                present = skills.read_text(skill_fd, SKILL_FILE, 1) is not None  # refuses a link
                if create and present:
                    raise SkillRefused(f"a skill {name!r} exists already; use action 'update'")
                if not create and not present:
                    raise SkillRefused(f"there is no skill {name!r} to update; use action 'create'")
                fileio.write_at(skill_fd, SKILL_FILE, text.encode())
                os.fsync(skill_fd)
            finally:
                os.close(skill_fd)
        except BaseException:
            if create and not existed:
                _quietly_remove_empty(root, name)
            raise
        finally:
            os.close(root)


def _quietly_remove_empty(root: int, name: str) -> None:
    try:
        os.rmdir(name, dir_fd=root)
    except OSError:
        pass


def remove(scope: SkillScope, name: str, data_dir: Path, cwd: Path | None) -> None:
    """Removes a skill's whole folder, never through a link (a person's `skill.delete`, or the
    tool's delete in the person's folder).  FileNotFoundError when there is none."""
    where = skills.root_of(scope, data_dir, cwd)
    if where is None or not skills.valid_name(name):
        raise FileNotFoundError(f"no skill {name!r}")
    with _LOCK:
        root = skills.open_root(*where)
        if root is None:
            raise FileNotFoundError(f"no skill {name!r}")
        try:
            inner = skills.open_folder(root, name)  # SkillUnsafe for a link: refused, not removed
            if inner is None:
                raise FileNotFoundError(f"no skill {name!r}")
            os.close(inner)
            shutil.rmtree(name, dir_fd=root)  # fd-based: it never follows a link inside
        finally:
            os.close(root)


# --- which skills are off -------------------------------------------------------------------


def set_enabled(data_dir: Path, key: str, enabled: bool) -> None:
    with _LOCK:
        keys = set(skills.disabled(data_dir))
        (keys.discard if enabled else keys.add)(key)
        fd = os.open(data_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            fileio.write_at(fd, skills.STATE_FILE, json.dumps({"disabled": sorted(keys)}, indent=1).encode())
            os.fsync(fd)
        finally:
            os.close(fd)

