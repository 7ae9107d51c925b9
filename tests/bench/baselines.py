"""Raw baselines measured in the same run as the backend: plain sqlite3 and a plain httpx call."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from backend.store.migrations import migrate


def raw_commit_per_insert(
    path: Path, sessions: int = 20, max_rows: int = 3_000, max_seconds: float = 4.0
) -> tuple[float, list[float]]:
    """Plain sqlite3, the backend's schema, WAL + synchronous=FULL: one admission row and its
    admission.queued event row per transaction.  Returns (admissions/s, per-commit seconds)."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        for pragma in ("PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL", "PRAGMA foreign_keys=ON"):
            conn.execute(pragma)
        migrate(conn)
        stamp = datetime.now(UTC).isoformat()
        sids = [f"ses_{uuid.uuid4().hex}" for _ in range(sessions)]
        conn.execute("BEGIN")
        for sid in sids:
            conn.execute(
                "INSERT INTO sessions (session_id, title, cwd, model, created_at, updated_at) "
                "VALUES (?, '', '/tmp', 'fake-model', ?, ?)",
                (sid, stamp, stamp),
            )
        conn.execute("COMMIT")
        lat: list[float] = []
        t_start = time.perf_counter()
        n = 0
        while n < max_rows and time.perf_counter() - t_start < max_seconds:
            sid = sids[n % sessions]
            adm, rid = f"adm_{uuid.uuid4().hex}", f"req-{uuid.uuid4().hex}"
            payload = json.dumps({"text": f"prompt {n}"}, sort_keys=True)
            created = datetime.now(UTC).isoformat()
            receipt = {
                "admission_id": adm,
                "session_id": sid,
                "request_id": rid,
                "status": "queued",
                "duplicate": False,
                "created_at": created,
                "position": n // sessions + 1,
            }
            t0 = time.perf_counter()
            conn.execute("BEGIN")
            conn.execute(
                "INSERT INTO admissions (admission_id, principal, session_id, request_id, "
                "payload_json, payload_digest, status, created_at) "
                "VALUES (?, 'owner', ?, ?, ?, ?, 'queued', ?)",
                (adm, sid, rid, payload, hashlib.sha256(payload.encode()).hexdigest(), created),
            )
            conn.execute(
                "INSERT INTO events (session_id, seq, type, turn_id, admission_id, ts, data) "
                "VALUES (?, ?, 'admission.queued', NULL, ?, ?, ?)",
                (sid, n // sessions + 1, adm, created, json.dumps({"receipt": receipt})),
            )
            conn.execute("COMMIT")
            lat.append(time.perf_counter() - t0)
            n += 1
        elapsed = time.perf_counter() - t_start
    finally:
        conn.close()
    return n / elapsed, lat


async def raw_model_calls(base_url: str, bodies: list[dict[str, Any]]) -> tuple[list[float], list[str]]:
    """Replays each request body against the provider with httpx streaming, parsing the SSE
    the way a client must (line by line, JSON per chunk, until [DONE]).

    Returns the wall time of each call and the text each one streamed.
    """
    url = base_url.rstrip("/") + "/chat/completions"
    times: list[float] = []
    texts: list[str] = []
    async with httpx.AsyncClient(
        headers={"Accept": "text/event-stream"}, timeout=httpx.Timeout(30.0), trust_env=False
    ) as http:
        for body in [bodies[0], *bodies]:  # the first one warms the connection pool, not timed
            t0 = time.perf_counter()
            parts: list[str] = []
            async with http.stream("POST", url, json=body) as response:
                assert response.status_code == 200, response.status_code
                async for line in response.aiter_lines():
                    if not line.startswith("data:"):
                        continue
                    data = line[5:].strip()
                    if data == "[DONE]":
                        break
                    for choice in json.loads(data).get("choices") or []:
                        parts.append((choice.get("delta") or {}).get("content") or "")
            times.append(time.perf_counter() - t0)
            texts.append("".join(parts))
    return times[1:], texts[1:]
