"""The MCP page's add form without Qt: what is typed made into a `[mcp.servers.NAME]` table,
or what is wrong with it in words led by the field it names; and what the form says for a
program or a URL."""

from __future__ import annotations

import shlex
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from desktop.state.mcp import Kind, secret_name


@dataclass(frozen=True)
class NewServer:
    """The add form as typed."""

    name: str
    kind: Kind
    command: str
    url: str
    key_to: str  # the header or variable the key goes into
    key: str
    approval: str


# The form's field each problem names first ("Name: …"), as the form labels it.
FORM_FIELDS = ("Name", "Command", "URL", "Header", "Variable", "Key")


def command_words(line: str) -> list[str] | str:
    """A command line split as a shell would (quotes, backslashes); or what is wrong with it."""
    try:
        argv = shlex.split(line)
    except ValueError as exc:
        return f"Command: {str(exc).rstrip('.')} (check the quotes)."
    return argv or "Command: give the program to run, and its arguments."


def new_server_table(kind: Kind, target: str, key_to: str, has_key: bool, approval: str,
                     secret: str) -> dict[str, Any] | str:
    """The add form as a `[mcp.servers.NAME]` table, or what is wrong with it (in words)."""
    table: dict[str, Any]
    if kind == "http":
        url = target.strip()
        if not url:
            return "URL: give the server's address (https://…)."
        table = {"url": url}
    else:
        argv = command_words(target)
        if isinstance(argv, str):
            return argv
        table = {"command": argv}
    key_to = key_to.strip()
    where = "Header" if kind == "http" else "Variable"
    if has_key and not key_to:
        return f"{where}: name the {where.lower()} the key goes into, or clear the key."
    if key_to and not has_key:
        return f"Key: paste the key for {key_to}, or clear the {where.lower()}."
    if key_to:
        table["header_secrets" if kind == "http" else "env_secrets"] = {key_to: secret}
    if approval != "ask":
        table["approval"] = approval
    return table


def form_table(form: NewServer, existing: Collection[str]) -> tuple[str, dict[str, Any]] | str:
    """(name, table) of the add form, or what is wrong with it."""
    name = form.name.strip()
    if not name:
        return "Name: give the server a name."
    if name in existing:
        return f"Name: a server called “{name}” already exists."
    target = form.url if form.kind == "http" else form.command
    table = new_server_table(form.kind, target, form.key_to, bool(form.key.strip()),
                             form.approval, secret_name(name))
    return table if isinstance(table, str) else (name, table)


def problem_field(words: str) -> str:
    """The form field a problem names ("" when it names none of them)."""
    field = words.split(":", 1)[0] if words else ""
    return field if field in FORM_FIELDS else ""


def key_hint(name: str, kind: Kind) -> str:
    """Under the add form: where a key goes, named after the server as typed so far."""
    where = "header" if kind == "http" else "environment variable"
    return (f"A key is stored in the system keyring as “{secret_name(name.strip() or 'NAME')}” "
            f"(never in config.toml) and sent as that {where}.")


@dataclass(frozen=True)
class KindWords:
    """What the add form says for a kind of server: the key's row label and placeholders."""

    key_to: str
    key_to_example: str
    key_example: str


def kind_words(kind: Kind) -> KindWords:
    if kind == "http":
        return KindWords("Header", "optional, e.g. Authorization",
                         "the header's whole value, e.g. Bearer abc…")
    return KindWords("Variable", "optional, e.g. GITHUB_TOKEN", "the variable's value")
