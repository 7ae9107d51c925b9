"""secret.set and provider.test end to end, and the leak test: a stored key reaches the
provider's Authorization header and secrets.json, and nothing else the backend writes or sends.

Every backend here runs with TURNKEY_NO_KEYRING=1, so keys go to DIR/secrets.json even on a
machine with a working keyring (a test must never write to the user's real one).  Here the
keyring is keyring's `fail` backend anyway, so the file is the real path on this box.
"""

from __future__ import annotations

import json
import socket
import stat
import subprocess
import sys
from pathlib import Path

from tests.fakes.openai_server import FakeOpenAI, Reply

from .backend_proc import Backend, BackendFactory
from .wire import Json, Rpc, RpcError, create_session, run_turn, terminal, transcript

KEY = "sk-test-LEAKCHECK-1234567890abcdef"
PROBE_TEXT = "Reply with the word OK."


def _start(factory: BackendFactory, base_url: str, extra: str = "", tables: str = "") -> Backend:
    """A backend whose provider `main` (at `base_url`) takes its key from the secret `main`;
    `tables` are appended as further config tables."""
    backend = factory(base_url, extra, start=False)
    backend.extra_env["TURNKEY_NO_KEYRING"] = "1"
    config = backend.data_dir / "config.toml"
    config.write_text(config.read_text() + 'api_key_secret = "main"\n' + tables)
    backend.start()
    return backend


async def _open(backend: Backend) -> Rpc:
    return await Rpc.open(backend.port, backend.token, name="secrets")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port  # closed again: nothing listens there


async def _error(rpc: Rpc, method: str, params: Json) -> RpcError:
    try:
        await rpc.call(method, params)
    except RpcError as exc:
        return exc
    raise AssertionError(f"{method} succeeded")


def _files_holding(root: Path, needle: bytes, skip: Path) -> list[str]:
    """Every file under `root` (WAL and SHM files, logs, spill, stderr, hidden temp files)
    whose bytes contain `needle`, except `skip`."""
    found = []
    for path in sorted(root.rglob("*")):
        if path.is_file() and path != skip and needle in path.read_bytes():
            found.append(str(path.relative_to(root)))
    return found


# --- secret.set ------------------------------------------------------------------------------


async def test_secret_set_stores_a_trimmed_key_in_a_0600_file_and_says_so(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI
) -> None:
    backend = _start(backend_factory, fake_provider.base_url)
    rpc = await _open(backend)
    try:
        result = await rpc.call("secret.set", {"name": "main", "value": f"  {KEY}\r\n"})
        assert result["stored"] == "file"
        path = backend.data_dir / "secrets.json"
        assert str(path) in result["warning"]
        assert "plain text" in result["warning"]
        assert KEY not in json.dumps(result), "the value is never echoed"
        assert json.loads(path.read_text()) == {"main": KEY}, "stored trimmed"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        again = await rpc.call("secret.set", {"name": "other.key_2", "value": "v"})
        assert again["stored"] == "file"
        assert json.loads(path.read_text()) == {"main": KEY, "other.key_2": "v"}
    finally:
        await rpc.close()


async def test_bad_secret_params_are_refused_without_quoting_the_value(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI
) -> None:
    backend = _start(backend_factory, fake_provider.base_url)
    rpc = await _open(backend)
    try:
        cases: list[tuple[Json, str]] = [
            ({"name": "bad name!", "value": KEY}, "name"),
            ({"name": "", "value": KEY}, "name"),
            ({"name": "n" * 65, "value": KEY}, "name"),
            ({"name": "main", "value": " \n\t "}, "value"),
            ({"name": "main", "value": KEY * 300}, "value"),  # over 8 KiB
            ({"name": "main", "value": KEY + "\ud800"}, "value"),
            ({"name": "main", "value": 12345}, "value"),
            ({"name": "main"}, "value"),
            ({"name": "main", "value": KEY, KEY: KEY}, ""),  # the key as an unknown param's name
        ]
        for params, field in cases:
            err = await _error(rpc, "secret.set", params)
            assert err.code == -32602, (field, err)
            assert err.data.get("field") == field, (field, err)
            assert KEY not in err.message + json.dumps(err.data), err
        assert not (backend.data_dir / "secrets.json").exists(), "nothing was stored"
    finally:
        await rpc.close()
    backend.terminate()
    assert _files_holding(backend.data_dir, KEY.encode(), skip=backend.data_dir / "secrets.json") == []
    assert KEY.encode() not in backend.store_dump()


# --- provider.test ---------------------------------------------------------------------------


async def test_provider_test_ok_reports_model_and_latency(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI
) -> None:
    backend = _start(backend_factory, fake_provider.base_url)
    rpc = await _open(backend)
    try:
        for params in ({}, {"provider": "main"}):
            result = await rpc.call("provider.test", params)
            assert result["ok"] is True, result
            assert result["provider"] == "main"
            assert result["model"] == "fake-model"
            assert result["latency_ms"] > 0
            assert "error" not in result
        body = fake_provider.snapshot()[-1].body
        assert [m["content"] for m in body["messages"]] == [PROBE_TEXT]
        assert "tools" not in body
    finally:
        await rpc.close()


async def test_provider_test_classifies_failures_as_results(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI
) -> None:
    tables = (
        f'[providers.down]\nbase_url = "http://127.0.0.1:{_free_port()}/v1"\nmodel = "m-down"\n'
        f'[providers.slow]\nbase_url = "{fake_provider.base_url}"\nmodel = "m-slow"\n'
        "request_timeout_s = 0.5\n"
    )
    backend = _start(backend_factory, fake_provider.base_url, tables=tables)
    rpc = await _open(backend)
    try:
        fake_provider.script(Reply.http_error(401, "Incorrect API key provided"))
        auth = await rpc.call("provider.test", {})
        assert (auth["ok"], auth["provider"], auth["error"]["kind"]) == (False, "main", "auth"), auth
        assert auth["error"]["message"] == ("The server rejected the API key. Paste a new key in "
                                            "Settings → Providers.")
        assert auth["error"]["detail"] == "main: HTTP 401: Incorrect API key provided"

        down = await rpc.call("provider.test", {"provider": "down"})
        assert (down["ok"], down["model"], down["error"]["kind"]) == (False, "m-down", "connection")
        assert down["error"]["message"].startswith("Turnkey could not reach http://127.0.0.1:")
        assert "could not connect" in down["error"]["detail"]

        fake_provider.routes[PROBE_TEXT] = Reply(hang_after=0)  # hangs until the client leaves
        slow = await rpc.call("provider.test", {"provider": "slow"})
        assert (slow["ok"], slow["error"]["kind"]) == (False, "timeout"), slow
        assert 400 <= slow["latency_ms"] < 10_000

        err = await _error(rpc, "provider.test", {"provider": "nosuch"})
        assert (err.code, err.data) == (-32602, {"field": "provider"})
        assert "main" in err.message, "the message lists the configured names"
    finally:
        await rpc.close()


# --- the leak test ---------------------------------------------------------------------------


async def test_a_stored_key_reaches_only_the_provider_and_secrets_json(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    extra = '[approvals]\nmode = "off"\n[limits]\nspill_chars = 200\n'  # `env` output spills
    backend = _start(backend_factory, fake_provider.base_url, extra)
    rpc = await _open(backend)
    try:
        await rpc.call("provider.test", {})
        assert fake_provider.snapshot()[-1].authorization is None, "no key stored yet"
        assert (await rpc.call("config.get"))["providers"]["main"]["api_key"] == "unset"

        stored = await rpc.call("secret.set", {"name": "main", "value": KEY + "\n"})
        assert stored["stored"] == "file"
        # Refused attempts quote nothing either.
        await _error(rpc, "secret.set", {"name": "no way", "value": KEY})
        await _error(rpc, "secret.set", {"name": "main", "value": KEY * 300})

        config = await rpc.call("config.get")
        assert config["providers"]["main"]["api_key"] == "set"
        assert config["providers"]["main"]["api_key_secret"] == "main"
        probe = await rpc.call("provider.test", {})
        assert probe["ok"] is True, probe
        assert fake_provider.snapshot()[-1].authorization == f"Bearer {KEY}", (
            "the provider picked up the new key at once"
        )

        sid = await create_session(rpc, cwd=str(tmp_path))
        fake_provider.script(Reply(deltas=["fine"]))
        _, done = await run_turn(rpc, sid, "hello")
        assert done["data"]["status"] == "completed", done

        fake_provider.script(Reply.http_error(401, f"Incorrect API key provided: {KEY}."))
        _, failed = await run_turn(rpc, sid, "again")
        assert failed["data"]["status"] == "failed", failed

        command = "env; echo key=$OPENAI_API_KEY; echo home=$TURNKEY_HOME"
        fake_provider.script(Reply.calls(terminal(command)), Reply(deltas=["ran it"]))
        _, tool = await run_turn(rpc, sid, "show the environment")
        assert tool["data"]["status"] == "completed", tool
        rows = await transcript(rpc, sid)
        [tool_row] = [m for m in rows if m["role"] == "tool"]
        assert tool_row["status"] == "ok", tool_row
        assert (tool_row.get("meta") or {}).get("spilled_path"), "the env output was spilled"

        fake_provider.script(Reply.http_error(401, f"Incorrect API key provided: {KEY}."))
        bad = await rpc.call("provider.test", {"provider": "main"})
        assert bad["error"]["kind"] == "auth", bad
        await rpc.call("session.resume", {"session_id": sid, "since_seq": 0})
        await rpc.call("session.events.since", {"session_id": sid, "since_seq": 0})
        await rpc.call("config.get")
    finally:
        await rpc.close()

    needle = KEY.encode()
    secrets_json = backend.data_dir / "secrets.json"
    requests = fake_provider.snapshot()
    assert sum(r.authorization == f"Bearer {KEY}" for r in requests) >= 6, "the key was used"
    assert not [r.body for r in requests if KEY in json.dumps(r.body)], "never in a request body"
    wire = json.dumps(rpc.events) + json.dumps(rpc.responses)
    assert len(rpc.events) > 10
    assert KEY not in wire, "no event or RPC result carries the key"
    running = _files_holding(backend.data_dir, needle, skip=secrets_json)
    assert running == [], f"the key leaked into {running}"
    if backend.on_postgres:
        assert needle not in backend.store_dump(), "the key leaked into the database"
    else:
        assert (backend.data_dir / "state.db-wal").exists(), "the WAL file was checked too"

    backend.terminate()  # stderr flushed, WAL checkpointed into state.db
    assert backend.stderr_path.is_relative_to(backend.data_dir)
    stopped = _files_holding(backend.data_dir, needle, skip=secrets_json)
    assert stopped == [], f"the key leaked into {stopped}"
    assert needle not in backend.store_dump(), "the key leaked into the store"
    assert json.loads(secrets_json.read_text()) == {"main": KEY}
    assert stat.S_IMODE(secrets_json.stat().st_mode) == 0o600


# --- the CLI ---------------------------------------------------------------------------------


def test_cli_secret_set_and_provider_test(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI
) -> None:
    backend = _start(backend_factory, fake_provider.base_url)
    cli = [sys.executable, "-m", "desktop.cli", "--data-dir", str(backend.data_dir)]

    def run(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        return subprocess.run([*cli, *args], env=backend.env(), input=stdin, capture_output=True,
                              text=True, timeout=60, check=False)

    stored = run("secret", "set", "main", stdin=KEY + "\n")
    assert stored.returncode == 0, stored.stderr
    assert stored.stdout.strip() == "stored 'main' in a file"
    assert "plain text" in stored.stderr
    assert KEY not in stored.stdout + stored.stderr
    assert json.loads((backend.data_dir / "secrets.json").read_text()) == {"main": KEY}

    empty = run("secret", "set", "main", stdin="\n")
    assert empty.returncode == 2
    assert "no value" in empty.stderr

    ok = run("provider", "test")
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith("ok: main (fake-model) answered in "), ok.stdout
    assert fake_provider.snapshot()[-1].authorization == f"Bearer {KEY}"

    fake_provider.script(Reply.http_error(401, "nope"))
    failed = run("provider", "test", "main")
    assert failed.returncode == 1
    assert failed.stdout.startswith("failed: main (fake-model) after "), failed.stdout
    assert "ms: The server rejected the API key. Paste a new key in Settings → Providers.\n" \
        in failed.stdout, "the words the app uses"
    assert "  details (auth): main: HTTP 401: nope" in failed.stdout

    unknown = run("provider", "test", "nosuch")
    assert unknown.returncode == 1
    assert "no provider named 'nosuch'" in unknown.stderr
