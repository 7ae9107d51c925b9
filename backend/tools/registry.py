"""The built-in tools by name, their specs for the model, and argument validation against their schemas.

Validation covers the small JSON-Schema subset the built-ins use: an object
with typed properties (string, integer, number, boolean), `required`,
`additionalProperties: false` and `default`.  Messages say what to fix, since
the model reads them and tries again.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from backend.providers.base import ToolSpec
from backend.tools.base import Tool
from backend.tools.clarify import Asker, Clarify
from backend.tools.delegate import Delegate, Delegator
from backend.tools.files import Patch, ReadFile, WriteFile
from backend.tools.folders import ListDir, SearchFiles
from backend.tools.memory import Memory
from backend.tools.sandbox import Sandbox
from backend.tools.skill_tools import SkillManage, SkillTool
from backend.tools.terminal import Terminal


@runtime_checkable
class ChecksOwnArgs(Protocol):
    def check_args(self, args: object) -> dict[str, Any]:
        """The arguments checked (raises ValueError saying what to fix)."""
        ...


class ToolArgsError(Exception):
    """The model's arguments do not fit the tool's schema; the message says what to fix."""


TERMINAL = Terminal()
MEMORY = Memory()  # the backend sets MEMORY.changed at start-up (memory.changed events)
DELEGATE = Delegate()
SKILL, SKILL_MANAGE = SkillTool(), SkillManage()
CLARIFY = Clarify()
_ORDER: tuple[Tool, ...] = (
    TERMINAL, ReadFile(), WriteFile(), Patch(), SearchFiles(), ListDir(), MEMORY, SKILL, SKILL_MANAGE,
    DELEGATE, CLARIFY,
)
BUILTINS: dict[str, Tool] = {tool.name: tool for tool in _ORDER}


def use_sandbox(sandbox: Sandbox) -> None:
    """The backend's sandbox, set once at start-up; until then commands are judged as if
    there were none (the fallback policy asks for anything not plainly read-only)."""
    TERMINAL.sandbox = sandbox


def use_delegator(delegator: Delegator) -> None:
    """What runs the delegate tool's child sessions, set once at start-up; until then (and
    in a session too deep for it, `offered`) the tool is not offered."""
    DELEGATE.delegator = delegator


def use_asker(asker: Asker) -> None:
    """What asks the person the clarify tool's questions, set once at start-up; until then
    the tool is not offered."""
    CLARIFY.asker = asker


# The agent's own tools (memory, skills, sub-agents, questions) need room: their schemas take ~500 tokens and
# the memory block up to ~900 more, a quarter to two thirds of a 2,048-token window such as
# the bundled offline model's, which could then answer nothing.  A model that small cannot
# curate a memory or direct sub-agents anyway; below this window it gets the file and
# command tools only, and no memory block (turn/runner.py).
AGENT_TOOLS_MIN_WINDOW = 8_192


def offered(depth: int, window: int = AGENT_TOOLS_MIN_WINDOW) -> dict[str, Tool]:
    """The built-ins a session `depth` delegations below a person's is offered, in order,
    for a model with a `window`-token context: all of them, less `delegate` where
    sub-agents may not delegate further, less `clarify` without an asker, and less the agent's
    own tools for a small window."""
    left_out: set[str] = set()
    delegator = DELEGATE.delegator
    if delegator is None or not delegator.offered(depth):
        left_out.add(DELEGATE.name)
    if CLARIFY.asker is None:
        left_out.add(CLARIFY.name)
    if window < AGENT_TOOLS_MIN_WINDOW:
        left_out |= {DELEGATE.name, MEMORY.name, SKILL.name, SKILL_MANAGE.name, CLARIFY.name}
    return {name: tool for name, tool in BUILTINS.items() if name not in left_out}


_ARTICLE = {"string": "a string", "integer": "an integer", "number": "a number", "boolean": "a boolean",
            "object": "an object", "array": "an array"}


def specs(tools: dict[str, Tool] | None = None) -> tuple[ToolSpec, ...]:
    """What the model is offered of `tools` (default: every built-in), always in the same
    order (a stable prompt prefix caches)."""
    chosen = BUILTINS if tools is None else tools
    return tuple(ToolSpec(t.name, t.description, t.parameters) for t in chosen.values())


def validate(tool: Tool, args: object) -> dict[str, Any]:
    """The arguments checked against the tool's schema, defaults filled in.  An optional
    argument given as null counts as absent.  Raises ToolArgsError."""
    if not isinstance(args, dict):
        raise ToolArgsError(f"arguments must be a JSON object, got {_json_type(args)}")
    if isinstance(tool, ChecksOwnArgs):  # a schema from elsewhere (an MCP server's): all of JSON Schema
        try:
            return tool.check_args(args)
        except ValueError as exc:
            raise ToolArgsError(str(exc)) from None
    schema = tool.parameters
    props: dict[str, Any] = schema.get("properties", {})
    required: list[str] = schema.get("required", [])
    unknown = sorted(str(k) for k in args if k not in props)
    if unknown and schema.get("additionalProperties") is False:
        expected = ", ".join(props) or "none"
        names = ", ".join(repr(k) for k in unknown)
        plural = "s" if len(unknown) > 1 else ""
        raise ToolArgsError(f"unknown argument{plural} {names} for {tool.name}; expected: {expected}")
    out: dict[str, Any] = {}
    for name, prop in props.items():
        value = args.get(name)
        if value is None:
            if name in required:
                raise ToolArgsError(f"argument {name!r} is required ({prop.get('type', 'any')})")
            if "default" in prop:
                out[name] = prop["default"]
            continue
        out[name] = _checked(name, prop, value)
    return out


def _checked(name: str, prop: dict[str, Any], value: object) -> object:
    kind = prop.get("type")
    ok = {
        "string": isinstance(value, str),
        "integer": isinstance(value, int) and not isinstance(value, bool),
        "number": isinstance(value, int | float) and not isinstance(value, bool),
        "boolean": isinstance(value, bool),
    }.get(str(kind), True)
    if kind == "integer" and isinstance(value, float) and value.is_integer():
        return int(value)  # JSON has one number type; 120.0 means 120
    if not ok:
        wanted = _ARTICLE.get(str(kind), str(kind))
        raise ToolArgsError(f"argument {name!r} must be {wanted}, got {_json_type(value)}")
    return value


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object" if isinstance(value, dict) else type(value).__name__
