"""Normalizing and digesting submitted input (no I/O): what is queued is what we understood."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from backend.errors import InvalidParams
from shared.codec import clean_text
from shared.protocol import PromptSubmitParams

MAX_TEXT_BYTES = 1024 * 1024
TITLE_CHARS = 60  # a title made from a prompt, at most (its ellipsis included)


@dataclass(frozen=True)
class Payload:
    text: str
    steer: bool = False  # submitted with intent "steer": joins the running turn
    # session.regenerate's: the message_id of the prompt it answers again (`text` is that
    # prompt's): its turn stores no user row.
    regenerates: str | None = None

    def to_json(self) -> str:
        # A plain prompt's bytes (and so its digest) are what they were before steering
        # existed; a steer's and a regeneration's differ, so one request_id cannot be both.
        body: dict[str, str] = {"text": self.text}
        if self.steer:
            body["intent"] = "steer"
        if self.regenerates is not None:
            body["regenerate"] = self.regenerates
        return json.dumps(body, ensure_ascii=False, sort_keys=True)

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.to_json().encode()).hexdigest()

    def title(self) -> str:
        """A session title from this prompt: its first non-empty line, spaces collapsed, cut
        to TITLE_CHARS at a word boundary (mid-word only when the first word alone is longer
        than half of that), with an ellipsis when something was cut."""
        line = next((" ".join(ln.split()) for ln in self.text.splitlines() if ln.strip()), "")
        if len(line) <= TITLE_CHARS:
            return line
        # The ellipsis leaves TITLE_CHARS - 1 for words; one more character shows whether
        # the last of them ends there.
        head = line[:TITLE_CHARS]
        cut = head.rfind(" ")
        keep = head[:cut] if cut >= TITLE_CHARS // 2 else head[:TITLE_CHARS - 1]
        return keep.rstrip(" ,;:.-") + "…"

    @classmethod
    def from_json(cls, raw: str) -> Payload:
        body = json.loads(raw)
        return cls(text=body["text"], steer=body.get("intent") == "steer",
                   regenerates=body.get("regenerate"))


def normalize(params: PromptSubmitParams) -> Payload:
    """Validates and cleans a submission; raises InvalidParams naming the field."""
    if params.attachments:
        raise InvalidParams(
            "attachments", "attachments are not supported by this backend yet; send text only"
        )
    return Payload(text=prompt_text(params.text), steer=params.intent == "steer")


def prompt_text(raw: str, field: str = "text") -> str:
    """A prompt's text as admitted: cleaned, line ends made \\n, not empty, bounded; raises
    InvalidParams naming `field`."""
    text = clean_text(raw).replace("\r\n", "\n")
    if not text.strip():
        raise InvalidParams(field, "text is empty; type a message to send")
    if len(text.encode()) > MAX_TEXT_BYTES:
        raise InvalidParams(
            field, f"text is larger than {MAX_TEXT_BYTES // 1024} KiB; attach long input as a file"
        )
    return text
