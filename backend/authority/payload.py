"""Normalizing and digesting submitted input (no I/O): what is queued is what we understood."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from backend.errors import InvalidParams
from shared.codec import clean_text
from shared.protocol import PromptSubmitParams

MAX_TEXT_BYTES = 1024 * 1024


@dataclass(frozen=True)
class Payload:
    text: str

    def to_json(self) -> str:
        return json.dumps({"text": self.text}, ensure_ascii=False, sort_keys=True)

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.to_json().encode()).hexdigest()

    @classmethod
    def from_json(cls, raw: str) -> Payload:
        return cls(text=json.loads(raw)["text"])


def normalize(params: PromptSubmitParams) -> Payload:
    """Validates and cleans a submission; raises InvalidParams naming the field."""
    if params.attachments:
        raise InvalidParams(
            "attachments", "attachments are not supported by this backend yet; send text only"
        )
    text = clean_text(params.text).replace("\r\n", "\n")
    if not text.strip():
        raise InvalidParams("text", "text is empty; type a message to send")
    if len(text.encode()) > MAX_TEXT_BYTES:
        raise InvalidParams(
            "text", f"text is larger than {MAX_TEXT_BYTES // 1024} KiB; attach long input as a file"
        )
    return Payload(text=text)
