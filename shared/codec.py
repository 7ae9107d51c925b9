"""The one codec for frames: JSON text in, JSON bytes out, typed conversion at the edges.

Decoding uses the standard library on purpose: it accepts lone surrogate
escapes (``"\\ud800"``), so that a prompt's text can be normalized rather than
the frame refused as unparseable.  Every other string param holding one is
invalid params (`surrogate_at` finds it): no name, id or path can be stored,
logged or sent on with half a character in it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from typing import Any, TypeVar

import msgspec

T = TypeVar("T")

_encoder = msgspec.json.Encoder()


class ParamsError(ValueError):
    """Params did not match their type; `field` is the dotted path of the first bad one."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def encode(obj: Any) -> str:
    """Encodes a frame; lone surrogates in strings are replaced rather than failing the frame."""
    try:
        return _encoder.encode(obj).decode()
    except UnicodeEncodeError:
        return _encoder.encode(scrub(obj)).decode()


def decode(text: str | bytes) -> Any:
    """Parses one frame; raises ValueError on bad JSON."""
    return json.loads(text)


def scrub(obj: Any) -> Any:
    """Returns `obj` with every lone surrogate in its strings replaced by U+FFFD."""
    if isinstance(obj, str):
        return clean_text(obj)
    if isinstance(obj, dict):
        return {scrub(k): scrub(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [scrub(v) for v in obj]
    if isinstance(obj, msgspec.Struct):
        return scrub(msgspec.to_builtins(obj, str_keys=True, enc_hook=_no_hook))
    return obj


def _no_hook(obj: Any) -> Any:
    raise TypeError(f"cannot encode {type(obj).__name__}")


def clean_text(text: str) -> str:
    """Replaces lone UTF-16 surrogates, which no provider accepts, with U+FFFD."""
    # json.loads already joins valid pairs, so any surrogate left here is lone.
    return _SURROGATE.sub("\ufffd", text)


_SURROGATE = re.compile("[\ud800-\udfff]")


def surrogate_at(data: Any, skip: Collection[str] = (), path: str = "") -> str | None:
    """The dotted path of the first string in `data` that holds a lone surrogate (a key
    holding one is named with it replaced by U+FFFD), or None.  Top-level names in `skip`
    are not looked at."""
    if isinstance(data, str):
        return path if _SURROGATE.search(data) else None
    if isinstance(data, dict):
        for key, value in data.items():
            if path == "" and key in skip:
                continue
            where = f"{path}.{clean_text(key)}" if path else clean_text(key)
            if where != (f"{path}.{key}" if path else key):
                return where
            found = surrogate_at(value, (), where)
            if found is not None:
                return found
    elif isinstance(data, list):
        for i, value in enumerate(data):
            found = surrogate_at(value, (), f"{path}.{i}" if path else str(i))
            if found is not None:
                return found
    return None


_PATH = re.compile(r"at `\$((?:\.[A-Za-z_0-9]+|\[\d+\])*)`")
_NAMED = re.compile(r"field `([^`]+)`")


def convert(data: Any, typ: type[T], *, cleaned: Collection[str] = ()) -> T:
    """Converts decoded JSON to `typ`, translating msgspec's errors into ParamsError.

    A lone surrogate in any string but the top-level fields `cleaned` (which the caller
    replaces) is a ParamsError too, found first: msgspec cannot even compare such a string.
    """
    bad = surrogate_at(data, cleaned)
    if bad is not None:
        raise ParamsError(bad, f"{bad or 'a name'} contains a lone UTF-16 surrogate (half of a "
                               "surrogate pair, U+D800 to U+DFFF), which is not a character; "
                               "send well-formed Unicode text")
    try:
        return msgspec.convert(data, typ)
    except msgspec.ValidationError as exc:
        raise params_error(str(exc)) from None


def params_error(message: str) -> ParamsError:
    """Turns msgspec's "... - at `$.a[0].b`" into field "a.0.b" plus a readable message."""
    parts: list[str] = []
    m = _PATH.search(message)
    if m:
        parts = [p for p in re.split(r"\.|\[|\]", m.group(1)) if p]
    named = _NAMED.search(message)
    if named:
        parts.append(named.group(1))
    text = message.split(" - at ")[0]
    return ParamsError(".".join(parts), text)
