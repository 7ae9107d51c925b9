"""Normalizing and digesting submitted input (no I/O): what is queued is what we understood."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from backend.errors import InvalidParams
from shared.codec import clean_text
from shared.protocol import MAX_ATTACHMENTS, Attachment, PromptSubmitParams

MAX_TEXT_BYTES = 1024 * 1024
TITLE_CHARS = 60  # a title made from a prompt, at most (its ellipsis included)


@dataclass(frozen=True)
class Payload:
    text: str
    steer: bool = False  # submitted with intent "steer": joins the running turn
    # session.regenerate's: the message_id of the prompt it answers again (`text` is that
    # prompt's): its turn stores no user row.
    regenerates: str | None = None
    # The files sent with it, in order: (sha256, name).  Their bytes are held by the store
    # (store/attachments.py); the admission names them in its own transaction.
    attachments: tuple[tuple[str, str], ...] = ()

    def to_json(self) -> str:
        # A plain prompt's bytes (and so its digest) are what they were before steering and
        # attachments existed; a steer's, a regeneration's and one with files differ, so one
        # request_id cannot be two of them.
        body: dict[str, object] = {"text": self.text}
        if self.steer:
            body["intent"] = "steer"
        if self.regenerates is not None:
            body["regenerate"] = self.regenerates
        if self.attachments:
            body["attachments"] = [{"sha256": sha, "name": name} for sha, name in self.attachments]
        return json.dumps(body, ensure_ascii=False, sort_keys=True)

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.to_json().encode()).hexdigest()

    def title(self) -> str:
        """A session title from this prompt: its first non-empty line, spaces collapsed, cut
        to TITLE_CHARS at a word boundary (mid-word only when the first word alone is longer
        than half of that), with an ellipsis when something was cut.  A prompt of files
        alone is titled by its first file's name."""
        line = next((" ".join(ln.split()) for ln in self.text.splitlines() if ln.strip()), "")
        if not line and self.attachments:
            line = " ".join(self.attachments[0][1].split())
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
                   regenerates=body.get("regenerate"),
                   attachments=tuple((a["sha256"], a["name"]) for a in
                                     body.get("attachments", ())))


def normalize(params: PromptSubmitParams) -> Payload:
    """Validates and cleans a submission; raises InvalidParams naming the field.  Whether
    each file is held whole, and the prompt's total size, the admission checks in its
    transaction (store/attachments.py)."""
    files = attachments(params.attachments or [])
    return Payload(text=prompt_text(params.text, may_be_empty=bool(files)),
                   steer=params.intent == "steer", attachments=files)


def attachments(given: list[Attachment]) -> tuple[tuple[str, str], ...]:
    """The files named by a submission, as (sha256, name), bounded; raises InvalidParams
    naming the field (`attachments.N.name`)."""
    if len(given) > MAX_ATTACHMENTS:
        raise InvalidParams("attachments", f"at most {MAX_ATTACHMENTS} files go with one "
                            f"prompt; this one has {len(given)}")
    out: list[tuple[str, str]] = []
    for i, a in enumerate(given):
        name = clean_text(a.name)
        if "/" in name or "\0" in name or not name.strip():
            raise InvalidParams(f"attachments.{i}.name", "a file's name is its last part: "
                                "not blank, without '/' or NUL")
        out.append((a.sha256, name))
    return tuple(out)


def prompt_text(raw: str, field: str = "text", *, may_be_empty: bool = False) -> str:
    """A prompt's text as admitted: cleaned, line ends made \\n, not empty (unless files go
    with it), bounded; raises InvalidParams naming `field`."""
    text = clean_text(raw).replace("\r\n", "\n")
    if not text.strip() and not may_be_empty:
        raise InvalidParams(field, "text is empty; type a message to send")
    if len(text.encode()) > MAX_TEXT_BYTES:
        raise InvalidParams(
            field, f"text is larger than {MAX_TEXT_BYTES // 1024} KiB; attach long input as a file"
        )
    return text
