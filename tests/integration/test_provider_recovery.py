"""Provider failures handled like a careful engineer would: retry, fall back, or fail clearly."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.openai_server import FakeOpenAI, Reply

from .backend_proc import Backend, BackendFactory
from .wire import Json, Rpc, create_session, is_event, submit, terminal, transcript, wait_complete

RETRY_NOW = {"Retry-After": "0"}


def provider_table(name: str, base_url: str, **extra: object) -> str:
    lines = [f"[providers.{name}]", 'kind = "openai"', f'base_url = "{base_url}"',
             f'model = "{name}-model"', 'max_tokens_field = "max_tokens"']
    lines += [f"{k} = {v!r}" if isinstance(v, str) else f"{k} = {v}" for k, v in extra.items()]
    return "\n".join(lines).replace("'", '"') + "\n"


def start_with(backend_factory: BackendFactory, config: str) -> Backend:
    backend = backend_factory("http://unused", start=False)
    backend.write_config(config)
    backend.start()
    return backend


@pytest.fixture
def backup_provider() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI()
    yield fake
    fake.close()
    assert fake.errors == []


async def turn(backend: Backend, text: str, cwd: Path | None = None) -> tuple[Rpc, str, Json]:
    rpc = await Rpc.open(backend.port, backend.token)
    sid = await create_session(rpc, **({"cwd": str(cwd)} if cwd else {}))
    receipt = await submit(rpc, sid, text)
    done = await wait_complete(rpc, receipt["admission_id"])
    return rpc, sid, done


def events_of(rpc: Rpc, sid: str, type_: str) -> list[Json]:
    return [e for e in rpc.session_events(sid) if e["type"] == type_]


async def test_429_with_retry_after_then_success(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI
) -> None:
    fake_provider.script(Reply.http_error(429, "slow down", **{"Retry-After": "1"}),
                         Reply(deltas=["made it"]))
    backend = start_with(backend_factory, 'default_provider = "main"\n'
                         + provider_table("main", fake_provider.base_url))
    rpc, sid, done = await turn(backend, "hello")
    try:
        assert done["data"]["status"] == "completed"
        assert done["data"]["text"] == "made it"
        [retry] = events_of(rpc, sid, "provider.retry")
        assert retry["data"]["attempt"] == 2
        assert retry["data"]["delay_s"] == 1.0, "Retry-After is honoured"
        assert retry["data"]["reason"].startswith("The provider is limiting how many requests")
        assert retry["data"]["detail"] == "main: HTTP 429: slow down"
        requests = fake_provider.snapshot()
        assert len(requests) == 2
        assert requests[1].started - requests[0].ended >= 0.9  # type: ignore[operator]
    finally:
        await rpc.close()


async def test_500_three_times_then_the_fallback_answers_re_preflighted_for_its_window(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, backup_provider: FakeOpenAI
) -> None:
    fake_provider.default = Reply.http_error(500, "kaput", **RETRY_NOW)
    backup_provider.default = Reply(deltas=["from the backup"])
    backend = start_with(backend_factory, (
        'default_provider = "main"\nfallback_providers = ["backup"]\n'
        + provider_table("main", fake_provider.base_url, context_window=128000)
        + provider_table("backup", backup_provider.base_url, context_window=4000)
    ))
    rpc, sid, done = await turn(backend, "hello")
    try:
        assert done["data"]["status"] == "completed", done
        assert done["data"]["text"] == "from the backup"
        assert len(fake_provider.snapshot()) == 3, "three attempts on the primary"
        assert [e["data"]["attempt"] for e in events_of(rpc, sid, "provider.retry")] == [2, 3]
        [fallback] = events_of(rpc, sid, "provider.fallback")
        assert (fallback["data"]["from"], fallback["data"]["to"]) == ("main", "backup")
        assert fallback["data"]["reason"].startswith(
            "The provider's server failed (HTTP 500: Internal Server Error).")
        assert fallback["data"]["detail"] == "main: HTTP 500: kaput"
        primary_body = fake_provider.snapshot()[0].body
        [backup] = backup_provider.snapshot()
        assert primary_body["max_tokens"] == 4096, "the primary's window leaves the full budget"
        assert backup.body["max_tokens"] < 4000 - 256, "re-preflighted for the smaller window"
        assert backup.body["model"] == "backup-model"
        assert backup.body["messages"] == primary_body["messages"]

        fake_provider.default = Reply(deltas=["primary again"])
        receipt = await submit(rpc, sid, "and now?")
        again = await wait_complete(rpc, receipt["admission_id"])
        assert again["data"]["text"] == "primary again", "the next turn starts on the primary"
        assert len(backup_provider.snapshot()) == 1
    finally:
        await rpc.close()


async def test_401_fails_at_once_without_retry_said_once_in_a_persons_words(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI
) -> None:
    fake_provider.default = Reply.http_error(401, "invalid api key")
    backend = start_with(backend_factory, 'default_provider = "main"\n'
                         + provider_table("main", fake_provider.base_url))
    rpc, sid, done = await turn(backend, "hello")
    try:
        words = "The server rejected the API key. Paste a new key in Settings → Providers."
        assert done["data"]["status"] == "failed"
        assert done["data"]["failure_reason"] == words
        assert done["data"]["failure_detail"] == "main: HTTP 401: invalid api key"
        assert len(fake_provider.snapshot()) == 1
        assert events_of(rpc, sid, "provider.retry") == []
        [note] = [m for m in await transcript(rpc, sid) if m["role"] == "system_note"]
        assert (note["note_kind"], note["content"]) == ("failed", words), "no 'The turn failed:'"
        assert note["meta"] == {"kind": "auth", "detail": "main: HTTP 401: invalid api key"}
        receipt = (await rpc.call("admission.get", {"admission_id": done["admission_id"]}))
        assert receipt["receipt"]["failure_reason"] == words
    finally:
        await rpc.close()


async def test_an_error_page_fails_the_turn_naming_the_status_and_the_setting(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI
) -> None:
    page = b"<html><head><title>501 Not Implemented</title></head><body>nginx</body></html>"
    fake_provider.default = Reply(status=501, raw=page, content_type="text/html", headers=RETRY_NOW)
    backend = start_with(backend_factory, 'default_provider = "main"\n'
                         + provider_table("main", fake_provider.base_url))
    rpc, sid, done = await turn(backend, "hello")
    try:
        assert done["data"]["status"] == "failed"
        assert done["data"]["failure_reason"] == (
            "The provider's server answered with an error page (HTTP 501: Not Implemented). "
            "Check the base URL in Settings → Providers.")
        assert done["data"]["failure_detail"] == "main: HTTP 501: the provider returned an HTML page"
        retries = events_of(rpc, sid, "provider.retry")
        assert [r["data"]["reason"] for r in retries] == [done["data"]["failure_reason"]] * 2
    finally:
        await rpc.close()


async def test_an_interrupted_turn_says_who_stopped_it_once(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI
) -> None:
    fake_provider.default = Reply(deltas=["a", "b"], hang_after=1)
    backend = start_with(backend_factory, 'default_provider = "main"\n'
                         + provider_table("main", fake_provider.base_url))
    rpc = await Rpc.open(backend.port, backend.token)
    try:
        sid = await create_session(rpc)
        receipt = await submit(rpc, sid, "hello")
        await rpc.wait_event(is_event("message.delta", receipt["admission_id"]))
        await rpc.call("turn.interrupt", {"session_id": sid})
        done = await wait_complete(rpc, receipt["admission_id"])
        assert done["data"]["status"] == "interrupted"
        assert done["data"]["failure_reason"] == "Stopped by you."
        notes = [m for m in await transcript(rpc, sid) if m["role"] == "system_note"]
        assert [(n["note_kind"], n["content"]) for n in notes] == [("interrupted", "Stopped by you.")]
    finally:
        await rpc.close()


async def test_a_stream_cut_after_text_is_not_retried_and_keeps_what_was_shown(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI
) -> None:
    fake_provider.script(Reply(deltas=["half ", "an answer"], truncate=True),
                         Reply(deltas=["must not be asked for"]))
    backend = start_with(backend_factory, 'default_provider = "main"\n'
                         + provider_table("main", fake_provider.base_url))
    rpc, sid, done = await turn(backend, "hello")
    try:
        assert done["data"]["status"] == "failed"
        assert done["data"]["text"] == "half an answer"
        assert "broke off" in done["data"]["failure_reason"]
        assert len(fake_provider.snapshot()) == 1
        rows = await transcript(rpc, sid)
        assert [(m["role"], m["content"]) for m in rows[:2]] == [
            ("user", "hello"), ("assistant", "half an answer")]
    finally:
        await rpc.close()


async def test_a_stream_cut_before_any_text_is_retried(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI
) -> None:
    fake_provider.script(Reply(deltas=[], truncate=True), Reply(deltas=["second try"]))
    backend = start_with(backend_factory, 'default_provider = "main"\n'
                         + provider_table("main", fake_provider.base_url))
    rpc, sid, done = await turn(backend, "hello")
    try:
        assert done["data"]["text"] == "second try"
        assert len(fake_provider.snapshot()) == 2
        assert len(events_of(rpc, sid, "provider.retry")) == 1
    finally:
        await rpc.close()


async def test_an_interrupt_during_a_backoff_wait_ends_it_within_a_second(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI
) -> None:
    fake_provider.default = Reply.http_error(429, "later", **{"Retry-After": "30"})
    backend = start_with(backend_factory, 'default_provider = "main"\n'
                         + provider_table("main", fake_provider.base_url))
    rpc = await Rpc.open(backend.port, backend.token)
    try:
        sid = await create_session(rpc)
        receipt = await submit(rpc, sid, "hello")
        retry = await rpc.wait_event(is_event("provider.retry", receipt["admission_id"]))
        assert retry["data"]["delay_s"] == 30.0
        t0 = time.monotonic()
        await rpc.call("turn.interrupt", {"session_id": sid})
        done = await wait_complete(rpc, receipt["admission_id"])
        assert time.monotonic() - t0 < 1.0
        assert done["data"]["status"] == "interrupted"
        assert len(fake_provider.snapshot()) == 1
    finally:
        await rpc.close()


async def test_cost_ledger_totals_match_usage_times_prices(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    usage = {"prompt_tokens": 1000, "completion_tokens": 500, "total_tokens": 1500,
             "prompt_tokens_details": {"cached_tokens": 200}}
    fake_provider.script(Reply.calls(terminal("echo hi"), usage=usage),
                         Reply(deltas=["done"], usage=usage))
    backend = start_with(backend_factory, 'default_provider = "main"\n' + provider_table(
        "main", fake_provider.base_url, input_usd_per_mtok=2.0, output_usd_per_mtok=8.0,
        cached_input_usd_per_mtok=0.5))
    rpc, sid, done = await turn(backend, "run echo", cwd=tmp_path)
    try:
        assert done["data"]["status"] == "completed"
        per_call = (800 * 2.0 + 200 * 0.5 + 500 * 8.0) / 1_000_000
        assert done["data"]["usage"]["input_tokens"] == 2000
        assert done["data"]["usage"]["cost_usd"] == pytest.approx(2 * per_call)
        ledger = await rpc.call("session.usage", {"session_id": sid})
        [row] = ledger["rows"]
        assert (row["provider"], row["model"], row["task"], row["calls"]) == (
            "main", "main-model", "turn", 2)
        assert (row["input_tokens"], row["output_tokens"], row["cached_tokens"]) == (
            2000, 1000, 400)
        assert row["cost_usd"] == pytest.approx(2 * per_call)
        assert ledger["usage"]["cost_usd"] == pytest.approx(2 * per_call)
        last_update = events_of(rpc, sid, "usage.update")[-1]
        assert last_update["data"]["usage"]["cost_usd"] == pytest.approx(2 * per_call)
    finally:
        await rpc.close()
