"""Compression's deterministic pass on a ~1M-token transcript, against touching every entry once.

In-process, no I/O: the pure steps `Compressor._compress` runs before and after the summary
call, on a synthetic but realistic transcript (user requests, some with pasted logs;
assistants writing markdown; tool calls with JSON arguments, whole files in `write_file`,
multi-edit patches, an occasional malformed argument text, non-ASCII text; tool results
from a line to 40 KB, most under 1 KB; a few calls interrupted before their result was stored).  Steps:

- plan: head / middle / tail boundaries (tail budget of a 1M window, 25K tokens);
- prune: old tool outputs and long argument strings cut, outside the tail (as the
  compressor does it: locate the tail, prune, collect the changed rows, rebuild the head);
- fallback_summary: the model-free summary of the middle (what a failed summary call uses);
- assemble: head + summary + tail with tool pairs repaired (what the model sees next);
- repair (whole transcript): the pair repair over all entries, the worst case of the same.

The raw baselines, in the same run: `entry_tokens` summed over every entry (the cheapest
pass that reads each entry once; the compressor does it at least twice for its before/after
estimates), and `json.loads` of every call's arguments (the floor under pruning arguments).
Each step is the median of RUNS runs.  Only correctness is asserted.
"""

from __future__ import annotations

import gc
import json
import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from statistics import median
from typing import Any, TypeVar

import pytest

from backend.compress.model import Call, Entry
from backend.compress.plan import STUB_RESULT, Plan, assemble, plan, repair
from backend.compress.prune import ARG_LIMIT, PRUNED_OUTPUT, TRUNCATED, prune
from backend.compress.summary import SECTIONS, fallback_summary, wrap
from backend.compress.tokens import entry_tokens, request_tokens, tail_budget

from .client import ms

T = TypeVar("T")

WINDOW = 1_000_000
TARGET_TOKENS = 1_000_000
PROTECT_FIRST_N = 3
RUNS = 5
SEED = 20_240_611

SYSTEM_PROMPT = "You are Turnkey, a coding assistant working in the user's repository. " * 40

PREVIOUS_SUMMARY = """## Goal
- The user asked: “Port the ingest pipeline to the new storage layer and keep the CLI working.”

## Constraints
- Python 3.12, no new runtime dependencies; tests must pass with `pytest -q`.

## Progress
- Done: `src/ingest/reader.py` reads the new manifest format.
- In progress: the writer (`src/ingest/writer.py`) still uses the old table names.
- Blocked: none.

## Key decisions
- Keep the manifest version field; reject unknown versions with a clear error.

## Relevant files
- src/ingest/reader.py (read, patched)
- src/ingest/writer.py (read)

## Next steps
- Port the writer, then run the full test suite."""

_CODE_LINES = [
    "def load_manifest(path: Path) -> Manifest:",
    "    \"\"\"Reads the manifest, rejecting versions this build does not know.\"\"\"",
    "    data = json.loads(path.read_text(encoding=\"utf-8\"))",
    "    if data.get(\"version\") not in SUPPORTED_VERSIONS:",
    "        raise ManifestError(f\"unsupported manifest version: {data.get('version')!r}\")",
    "    return Manifest(**{k: v for k, v in data.items() if k in FIELDS})",
    "",
    "class Writer:",
    "    def __init__(self, conn: sqlite3.Connection, batch: int = 500) -> None:",
    "        self.conn, self.batch, self.pending = conn, batch, []",
    "    def flush(self) -> int:",
    "        rows, self.pending = self.pending, []",
    "        self.conn.executemany(\"INSERT INTO records VALUES (?, ?, ?)\", rows)",
    "        return len(rows)",
    "    # Étape 2 : normaliser les noms (données utilisateur, 数据 in UTF-8)",
    "for i, item in enumerate(items):",
    "    if item.kind == \"skip\":",
    "        continue",
    "    total += item.size  # bytes, not records",
    "log.info(\"ingested %d records from %s\", total, source)",
]
_LOG_LINES = [
    "tests/test_ingest.py::test_reader_reads_v2 PASSED",
    "tests/test_ingest.py::test_writer_batches FAILED",
    "tests/test_cli.py::test_help PASSED",
    "E       AssertionError: assert 499 == 500",
    "E        +  where 499 = <Writer object at 0x7f3a2c1e4d90>.flush()",
    "src/ingest/writer.py:88: in flush",
    "    self.conn.executemany(\"INSERT INTO records VALUES (?, ?, ?)\", rows)",
    "warning: unused variable `offset` --> src/lib.rs:41:9",
    "  Compiling ingest v0.3.1 (/home/dev/ingest)",
    "npm WARN deprecated glob@7.2.3: Glob versions prior to v9 are no longer supported",
    "==================== 1 failed, 212 passed in 14.31s ====================",
    "drwxr-xr-x  5 dev dev  4096 Jun 11 10:02 src",
]
_PATHS = [f"src/ingest/{n}.py" for n in ("reader", "writer", "manifest", "cli", "schema", "util")] + [
    f"tests/test_{n}.py" for n in ("ingest", "cli", "schema")] + ["README.md", "pyproject.toml"]
_ASKS = [
    "Why does the writer drop the last record of each batch?",
    "Run the tests again and fix whatever fails.",
    "Can you make the CLI print a progress bar while it ingests?",
    "Rename `records` to `entries` everywhere, including the migrations.",
    "Merci ! Et maintenant, ajoute un test pour les noms non ASCII (例えば 日本語).",
    "Looks good. Please also update the README with the new flags.",
]


def _corpus(lines: Sequence[str], rng: random.Random, chars: int) -> str:
    out: list[str] = []
    size = 0
    while size < chars:
        line = rng.choice(lines)
        out.append(line)
        size += len(line) + 1
    return "\n".join(out)


class Transcript:
    """A deterministic synthetic session, built until it reaches TARGET_TOKENS."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.code = _corpus(_CODE_LINES, self.rng, 400_000)
        self.logs = _corpus(_LOG_LINES, self.rng, 400_000)
        self.entries: list[Entry] = [Entry(1, "summary", PREVIOUS_SUMMARY)]
        self.calls = 0
        self.interrupted = 0

    def _slice(self, corpus: str, low: int, high: int) -> str:
        """A piece of `corpus` of log-uniform length in [low, high]: mostly short, some long."""
        n = round(math.exp(self.rng.uniform(math.log(low), math.log(high))))
        start = self.rng.randrange(0, len(corpus) - n)
        return corpus[start:start + n]

    def _add(self, role: str, content: str, **kw: Any) -> None:
        self.entries.append(Entry(len(self.entries) + 1, role, content, **kw))

    def _markdown(self) -> str:
        r = self.rng
        parts = [f"### {r.choice(['What changed', 'Cause', 'Plan', 'Résumé'])}\n"]
        parts += [f"- `{r.choice(_PATHS)}`: {r.choice(_ASKS).lower()}" for _ in range(r.randint(1, 5))]
        if r.random() < 0.6:
            parts.append(f"\n```python\n{self._slice(self.code, 80, 1_500)}\n```")
        parts.append("\n**Next:** " + r.choice(["run the suite", "check the CLI", "wait for you"]) + ".")
        return "\n".join(parts)

    def _call(self) -> tuple[Call, str | None]:
        """One call and its result (None: interrupted before the result was stored)."""
        r = self.rng
        self.calls += 1
        cid = f"call_{self.calls:06d}"
        path = r.choice(_PATHS)
        kind = r.random()
        if kind < 0.30:
            name, args = "terminal", {"command": r.choice(["pytest -q", "ruff check .", "git status",
                                                          "npm run build", "ls -la"]), "timeout": 120}
            long = r.random() < 0.15
            out = self._slice(self.logs, 2_000, 40_000) if long else self._slice(self.logs, 20, 800)
        elif kind < 0.50:
            name, args = "read_file", {"path": path, "offset": r.randint(0, 400), "limit": 200}
            out = self._slice(self.code, 200, 12_000)
        elif kind < 0.62:
            content = self._slice(self.code, 200, 8_000)
            name, args = "write_file", {"path": path, "content": content}
            out = f"Wrote {len(content.encode())} bytes to {path}"
        elif kind < 0.74:
            edits = [{"old": self._slice(self.code, 20, 1_200), "new": self._slice(self.code, 20, 1_200)}
                     for _ in range(r.randint(1, 3))]
            name, args = "patch", {"path": path, "edits": edits, "dry_run": False}
            out = f"Patched {path}: {len(edits)} hunk(s) applied"
        elif kind < 0.88:
            name, args = "search", {"pattern": r.choice(["flush\\(", "records", "TODO", "version"]),
                                    "path": ".", "glob": "*.py", "max_results": 50}
            out = self._slice(self.logs, 50, 4_000)
        else:
            name, args = "list_dir", {"path": path.rsplit("/", 1)[0]}
            out = self._slice(self.logs, 200, 1_500)
        raw = json.dumps(args, ensure_ascii=False)
        if name == "write_file" and r.random() < 0.05:
            raw = raw[: len(raw) // 2]  # the model's arguments cut off mid-string: not valid JSON
        interrupted = r.random() < 0.004
        self.interrupted += interrupted
        return Call(cid, name, raw), None if interrupted else out

    def _round(self) -> None:
        r = self.rng
        calls = [self._call() for _ in range(1 if r.random() < 0.7 else r.randint(2, 3))]
        say = "" if r.random() < 0.5 else f"Let me look at `{r.choice(_PATHS)}` first."
        self._add("assistant", say, calls=tuple(c for c, _ in calls))
        for call, out in calls:
            if out is not None:
                self._add("tool", out, call_id=call.call_id, name=call.name)

    def turn(self) -> None:
        r = self.rng
        ask = r.choice(_ASKS)
        if r.random() < 0.15:
            ask += "\n\nHere is the output:\n```\n" + self._slice(self.logs, 500, 6_000) + "\n```"
        self._add("user", ask)
        for _ in range(r.randint(0, 10)):
            self._round()
        self._add("assistant", self._markdown())

    def build(self) -> list[Entry]:
        tokens = request_tokens(SYSTEM_PROMPT, self.entries)
        while tokens < TARGET_TOKENS:
            before = len(self.entries)
            self.turn()
            tokens += sum(entry_tokens(e) for e in self.entries[before:])
        # The session ends as a crash leaves one: a call whose result never got stored,
        # then the user carrying on.  It is in the tail, so assembling has to repair it.
        self.calls += 1
        self.interrupted += 1
        self._add("assistant", "Running both checks.", calls=(
            Call(f"call_{self.calls:06d}a", "terminal", '{"command": "pytest -q"}'),
            Call(f"call_{self.calls:06d}b", "terminal", '{"command": "ruff check ."}'),
        ))
        self._add("tool", self._slice(self.logs, 200, 2_000), call_id=f"call_{self.calls:06d}a",
                  name="terminal")
        self._add("user", "The app crashed. Carry on from where you were.")
        self._add("assistant", self._markdown())
        return self.entries


def pairs_valid(entries: Sequence[Entry]) -> bool:
    """What providers require: each assistant's calls are answered, exactly once each, by the
    tool entries right after it, and there is no other tool entry anywhere."""
    i = 0
    while i < len(entries):
        e = entries[i]
        if e.role == "tool":
            return False  # a result not directly after its call
        if e.role == "assistant" and e.calls:
            want = sorted(c.call_id for c in e.calls)
            results = entries[i + 1:i + 1 + len(want)]
            if sorted(str(t.call_id) for t in results if t.role == "tool") != want:
                return False
            i += len(want)
        i += 1
    return True


def deterministic_pass(entries: list[Entry], timings: dict[str, list[float]]) -> dict[str, Any]:
    """The compressor's steps around the summary call, each step timed into `timings`."""
    def step(label: str, fn: Callable[[], T]) -> T:
        t0 = time.perf_counter()
        value = fn()
        timings.setdefault(label, []).append(time.perf_counter() - t0)
        return value

    budget = tail_budget(WINDOW)
    p = step("plan", lambda: plan(entries, PROTECT_FIRST_N, budget))
    assert p is not None

    def pruning() -> tuple[list[Entry], list[tuple[Entry, Entry]], list[Entry]]:
        keep_from = entries.index(p.tail[0]) if p.tail else len(entries)
        pruned = prune(entries, keep_from)
        changed = [(old, new) for old, new in zip(entries, pruned, strict=True) if old != new]
        by_id = {e.id: e for e in pruned}
        return pruned, changed, [by_id[e.id] for e in p.head]

    pruned, changed, head = step("prune", pruning)
    previous = p.previous_summary.content if p.previous_summary is not None else None
    text = step("fallback_summary", lambda: fallback_summary(previous, p.middle))
    summary = Entry(0, "summary", wrap(text))
    out = step("assemble", lambda: assemble(replace(p, head=tuple(head)), summary))
    whole = step("repair (whole transcript)", lambda: repair(pruned))
    return {"plan": p, "pruned": pruned, "changed": changed, "text": text, "out": out, "whole": whole,
            "summary": summary}


def entry_tokens_pass(entries: Sequence[Entry]) -> int:
    return sum(entry_tokens(e) for e in entries)


def json_loads_pass(entries: Sequence[Entry]) -> int:
    parsed = 0
    for e in entries:
        for c in e.calls:
            try:
                json.loads(c.arguments)
                parsed += 1
            except ValueError:
                pass
    return parsed


@pytest.mark.bench
def test_compression_deterministic_pass() -> None:
    t0 = time.perf_counter()
    source = Transcript(SEED)
    entries = source.build()
    built_s = time.perf_counter() - t0
    tokens = request_tokens(SYSTEM_PROMPT, entries)
    chars = sum(len(e.content) + sum(len(c.arguments) for c in e.calls) for e in entries)
    roles = {r: sum(1 for e in entries if e.role == r) for r in ("user", "assistant", "tool")}

    timings: dict[str, list[float]] = {}
    base_tokens: list[float] = []
    base_json: list[float] = []
    result: dict[str, Any] = {}
    for _ in range(RUNS):
        gc.collect()
        t = time.perf_counter()
        entry_tokens_pass(entries)
        base_tokens.append(time.perf_counter() - t)
        t = time.perf_counter()
        valid_args = json_loads_pass(entries)
        base_json.append(time.perf_counter() - t)
        gc.collect()
        result = deterministic_pass(entries, timings)

    p: Plan = result["plan"]
    pruned: list[Entry] = result["pruned"]
    out: list[Entry] = result["out"]
    whole: list[Entry] = result["whole"]
    keep_from = len(entries) - len(p.tail)

    # --- correctness --------------------------------------------------------------------------
    assert TARGET_TOKENS <= tokens <= 1.1 * TARGET_TOKENS
    assert p.previous_summary is entries[0]
    assert entries[keep_from] is p.tail[0]
    assert any(e.role == "user" for e in p.tail)
    # Pruning: the tail untouched, the rest cut, and a second pass changes nothing at all.
    assert pruned[keep_from:] == entries[keep_from:]
    assert all(a is b for a, b in zip(pruned[keep_from:], entries[keep_from:], strict=True))
    again = prune(pruned, keep_from)
    assert again == pruned, "prune is idempotent"
    assert all(a is b for a, b in zip(again, pruned, strict=True)), "a second pass returns the same objects"
    for old, new in result["changed"]:
        assert old.id == new.id
        assert new.role in ("tool", "assistant")
        if new.role == "tool":
            assert new.content == PRUNED_OUTPUT
        for before, after in zip(old.calls, new.calls, strict=True):
            try:
                json.loads(before.arguments)
            except ValueError:
                raw = before.arguments  # not JSON: cut as text, at ARG_LIMIT
                assert after.arguments == (raw[:ARG_LIMIT] + TRUNCATED if len(raw) > ARG_LIMIT else raw)
            else:
                json.loads(after.arguments)  # JSON stays JSON
    # What the model sees next: head, summary, tail, every call answered right after it.
    assert out[len(p.head)] is result["summary"]
    assert pairs_valid(out), "assembled pairs are valid"
    assert repair(out) == out, "repairing the assembled list changes nothing"
    stubs = [e for e in out if e.content == STUB_RESULT]
    assert [s.id for s in stubs] == [-1]  # the interrupted call at the end
    assert pairs_valid(whole)
    assert repair(whole) == whole
    whole_stubs = sum(1 for e in whole if e.meta and e.meta.get("synthetic"))
    assert whole_stubs >= source.interrupted
    text: str = result["text"]
    assert len(text) <= 8000
    assert [line[3:] for line in text.splitlines() if line.startswith("## ")] == list(SECTIONS)
    assert "Port the ingest pipeline" in text, "the previous summary is kept"
    assert fallback_summary(p.previous_summary.content if p.previous_summary else None, p.middle) == text

    pruned_tokens = request_tokens(SYSTEM_PROMPT, pruned)
    after_tokens = request_tokens(SYSTEM_PROMPT, out)
    assert after_tokens < 0.05 * tokens

    # --- numbers -----------------------------------------------------------------------------
    med = {label: median(v) for label, v in timings.items()}
    core = med["plan"] + med["prune"] + med["fallback_summary"] + med["assemble"]
    raw_tok, raw_json = median(base_tokens), median(base_json)
    n_calls = sum(len(e.calls) for e in entries)
    print()
    print(f"BENCH compression transcript: ~{tokens:,} tokens, {len(entries):,} entries "
          f"({roles['user']:,} user, {roles['assistant']:,} assistant, {roles['tool']:,} tool), "
          f"{chars / 1e6:.1f}M chars, {n_calls:,} calls ({n_calls - valid_args} with non-JSON arguments, "
          f"{source.interrupted} interrupted); built in {built_s * 1000:.0f} ms; median of {RUNS} runs")
    print(f"BENCH compression plan: {ms(med['plan'])} (head {len(p.head)}, middle {len(p.middle):,}, "
          f"tail {len(p.tail)} entries / ~{entry_tokens_pass(p.tail):,} tokens)")
    print(f"BENCH compression prune: {ms(med['prune'])} ({len(result['changed']):,} entries changed; "
          f"~{tokens:,} -> ~{pruned_tokens:,} tokens)")
    print(f"BENCH compression fallback_summary: {ms(med['fallback_summary'])} "
          f"({len(p.middle):,} entries -> {len(text):,} chars)")
    print(f"BENCH compression assemble (head+summary+tail, repaired): {ms(med['assemble'])} "
          f"({len(out)} entries, ~{after_tokens:,} tokens, {len(stubs)} stub)")
    print(f"BENCH compression repair (whole transcript): {ms(med['repair (whole transcript)'])} "
          f"({len(whole):,} entries, {whole_stubs} stubs)")
    print(f"BENCH compression deterministic pass (plan+prune+fallback+assemble): {ms(core)} "
          f"(raw entry_tokens over every entry: {ms(raw_tok)}, ratio {core / raw_tok:.1f}x; "
          f"raw json.loads of every call's arguments: {ms(raw_json)}, "
          f"prune/json.loads ratio {med['prune'] / raw_json:.1f}x)")
