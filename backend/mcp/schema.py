"""An MCP tool's arguments checked against the JSON Schema its server published.

The built-in tools use a small subset checked by hand (tools/registry.py);
a server's schema may use any of JSON Schema, so it is checked with
`jsonschema` (a dependency of the MCP SDK).  The messages name the argument
and say what it must be, since the model reads them and tries again.  A
schema that is not valid JSON Schema is the server's bug: the call is then
checked only for being an object, and the server judges the rest.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger("mcp")

MAX_ERRORS = 3


class ArgsChecker:
    def __init__(self, tool: str, schema: dict[str, Any]) -> None:
        import jsonschema  # loaded with the first MCP tool, not with the backend

        self.tool = tool
        self.schema = schema
        self.validator: Any = None
        try:
            cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
            cls.check_schema(schema)
            self.validator = cls(schema)
        except jsonschema.exceptions.SchemaError as exc:
            log.warning("the input schema of %s is not valid JSON Schema (%s); its calls are "
                        "checked only for being an object", tool, exc.message)

    def check(self, args: object) -> dict[str, Any]:
        """The arguments, with optional ones given as null left out (models send them so);
        raises ValueError saying what to fix."""
        if not isinstance(args, dict):
            raise ValueError("arguments must be a JSON object")
        out = dict(args)
        required = set(self.schema.get("required", ()))
        props = self.schema.get("properties") or {}
        for key, value in args.items():
            if value is None and key not in required and not self._accepts_null(props.get(key)):
                del out[key]
        if self.validator is None:
            return out
        errors = sorted(self.validator.iter_errors(out), key=lambda e: (list(e.path), e.message))
        if errors:
            raise ValueError("; ".join(_words(e) for e in errors[:MAX_ERRORS])
                             + (f" (and {len(errors) - MAX_ERRORS} more)" if len(errors) > MAX_ERRORS
                                else ""))
        return out

    def _accepts_null(self, prop: object) -> bool:
        if not isinstance(prop, dict) or self.validator is None:
            return False
        try:
            return bool(type(self.validator)(prop).is_valid(None))
        except Exception:
            return False


def _words(error: Any) -> str:  # a jsonschema ValidationError
    where = ".".join(str(p) for p in error.absolute_path)
    return f"argument {where!r}: {error.message}" if where else error.message
