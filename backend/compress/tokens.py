"""Token estimates for compression: characters over a per-provider calibrated ratio, and the budgets.

Why no real tokenizer: the usual Python one (tiktoken) downloads its
encoding tables from the network the first time an encoding is used, and a
desktop app has to work offline, from the first run; it would also only know
OpenAI's vocabularies, not Anthropic's or a local GGUF model's.  So the
estimate is characters divided by a ratio.  What keeps it honest is
`Calibration`: every response reports the input tokens the provider really
counted, and the ratio follows those reports, per provider.  The estimate
only has to be close enough to decide *when* to compress and *where* to cut;
the provider's own count remains the authority on whether a request fits.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

from backend.compress.model import Entry
from backend.providers.base import DEFAULT_IMAGE_TOKENS, ChatRequest, ToolSpec, WireMessage

CHARS_PER_TOKEN = 4  # the uncalibrated default (the same as turn.preflight's)
MESSAGE_OVERHEAD_TOKENS = 4  # role and framing around each message

MIN_RATIO = 1.5  # dense code or CJK text
MAX_RATIO = 8.0  # long runs of whitespace or repeated characters
SMOOTHING = 0.3  # weight of each new observation in the moving average
MIN_OBSERVED_TOKENS = 256  # below this the provider's fixed framing dominates: not a useful sample

THRESHOLD_FLOOR = 0.75  # raise-only floor on the trigger for windows under SMALL_WINDOW
SMALL_WINDOW = 512_000
TAIL_FRACTION = 0.025
TAIL_MIN_TOKENS = 10_000
TAIL_MAX_TOKENS = 25_000
TAIL_CEILING_DIVISOR = 5  # the tail never takes more than a fifth (20%) of the window


def tools_chars(tools: Sequence[ToolSpec]) -> int:
    """What the tool schemas add to every request that offers them."""
    return sum(len(json.dumps(t.parameters)) + len(t.description) for t in tools)


def request_chars(request: ChatRequest) -> int:
    """The characters a request sends: messages, their calls, and the tool schemas (counted
    when the request was built, if it was)."""
    if request.chars is not None:
        return request.chars
    return sum(message_chars(m) for m in request.messages) + tools_chars(request.tools)


def message_chars(m: WireMessage) -> int:
    """One message's characters: its text, its calls, and its images and documents as the
    provider's own estimate of their tokens (an MCP tool's image: DEFAULT_IMAGE_TOKENS), at
    CHARS_PER_TOKEN.  Files not rendered yet count nothing: the turn renders them for the
    provider it calls and counts what that sends (turn/prepared.py)."""
    pictures = sum(i.tokens for i in m.images) + sum(d.tokens for d in m.documents)
    return (len(m.content) + sum(len(c.arguments) + len(c.name) for c in m.tool_calls)
            + pictures * CHARS_PER_TOKEN)


def _clamp(ratio: float) -> float:
    return min(MAX_RATIO, max(MIN_RATIO, ratio))


class Calibration:
    """A provider's characters-per-token ratio, learnt from the usage it reports.

    Call `observe` after each response with the characters the request held
    (counted the same way the estimate counts them) and the input tokens the
    provider reported; `tokens` then converts characters with the learnt
    ratio.  One instance per provider: tokenizers differ between them.
    """

    def __init__(self, ratio: float = float(CHARS_PER_TOKEN)) -> None:
        self.ratio = _clamp(ratio)
        self.samples = 0

    def observe(self, chars_sent: int, reported_input_tokens: int) -> None:
        """Fold one provider report into the ratio (an exponential moving average, clamped)."""
        if chars_sent <= 0 or reported_input_tokens < MIN_OBSERVED_TOKENS:
            return
        sample = _clamp(chars_sent / reported_input_tokens)
        self.ratio = _clamp(self.ratio + SMOOTHING * (sample - self.ratio))
        self.samples += 1

    def tokens(self, chars: int) -> int:
        """Tokens for `chars` characters, rounded up (an estimate should not flatter the request)."""
        return math.ceil(chars / self.ratio) if chars > 0 else 0

    def __repr__(self) -> str:
        return f"Calibration(ratio={self.ratio:.3f}, samples={self.samples})"


_DEFAULT = Calibration()  # never observed: the plain CHARS_PER_TOKEN estimate


def entry_chars(entry: Entry) -> int:
    """The characters of an entry the model is sent: its content, its calls' names and
    arguments, and its files' estimate (`file_chars`)."""
    return (len(entry.content) + sum(len(c.name) + len(c.arguments) for c in entry.calls)
            + entry.file_chars)


# A prompt's file before it is rendered for a provider, as characters: an image as
# DEFAULT_IMAGE_TOKENS, a PDF as a page's picture and text each, text as itself (bounded
# as turn/attachments.py bounds it).
PDF_PAGE_CHARS = 1_500 * CHARS_PER_TOKEN
MAX_FILE_CHARS = 100_000


def file_chars(kind: str, size: int, pages: int | None) -> int:
    if kind == "image":
        return DEFAULT_IMAGE_TOKENS * CHARS_PER_TOKEN
    if kind == "pdf":
        return PDF_PAGE_CHARS * max(1, pages or 1)
    return min(size, MAX_FILE_CHARS)


def entry_tokens(entry: Entry, cal: Calibration | None = None) -> int:
    """An entry's estimated tokens, the per-message framing included."""
    return (cal or _DEFAULT).tokens(entry_chars(entry)) + MESSAGE_OVERHEAD_TOKENS


def request_tokens(
    system_prompt: str, entries: Sequence[Entry], tools_json_chars: int = 0, cal: Calibration | None = None
) -> int:
    """A whole request's estimated tokens: the system prompt, the tool schemas and every entry."""
    cal = cal or _DEFAULT
    fixed = cal.tokens(len(system_prompt) + tools_json_chars) + MESSAGE_OVERHEAD_TOKENS
    return fixed + sum(entry_tokens(e, cal) for e in entries)


def threshold_tokens(window: int, threshold: float) -> int:
    """The request size that triggers compression.

    Windows under 512K tokens get a raise-only floor of 0.75: compressing a
    small window at half full would summarize too often for too little gain.
    """
    if window <= 0 or not 0 < threshold <= 1:
        raise ValueError(f"window must be positive and threshold in (0, 1]: {window}, {threshold}")
    effective = max(threshold, THRESHOLD_FLOOR) if window < SMALL_WINDOW else threshold
    return round(window * effective)


def tail_budget(window: int, tail_min: int = TAIL_MIN_TOKENS, tail_max: int = TAIL_MAX_TOKENS) -> int:
    """Tokens of recent conversation kept verbatim: 2.5% of the window in [tail_min, tail_max],
    and never more than 20% of the window (a small window still needs room for the rest)."""
    if window <= 0 or tail_min > tail_max:
        raise ValueError(f"need window > 0 and tail_min <= tail_max: {window}, {tail_min}, {tail_max}")
    budget = min(max(round(window * TAIL_FRACTION), tail_min), tail_max)
    return min(budget, window // TAIL_CEILING_DIVISOR)
