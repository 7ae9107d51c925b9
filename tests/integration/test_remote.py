"""A backend served over wss to another computer: pinned certificate, scoped token, the CLI.

Where the backend listens: the machine's first non-loopback IPv4 address when it has one
that can be bound (then the backend makes its own self-signed certificate, the path a
person takes with `--listen HOST:PORT`); with none (a CI box without a network), 127.0.0.1
with `--tls-cert`/`--tls-key` of a certificate made here, which forces TLS on loopback.
Either way the client speaks wss with a pinned fingerprint and a scoped token.
`test_loopback_with_a_given_certificate` always runs the second path.
"""

from __future__ import annotations

import asyncio
import json
import os
import ssl
import stat
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidMessage

from shared import protocol as p
from shared.client import BackendNotFound, CertificateMismatch, Client, Incoming, RpcError
from shared.errors import ErrorCode
from shared.methods import EventsSince, PromptSubmit, SessionCreate, SessionList, TokenCreate, TokenRevoke
from shared.remote import RemoteTarget, parse
from tests.fakes.openai_server import FakeOpenAI, Reply

from .backend_proc import Stores
from .tls_backend import (
    TlsBackend,
    der_fingerprint,
    free_port,
    outside_address,
    start_tls_backend,
    write_cert,
)


@pytest.fixture
def tls_backend(tmp_path: Path, fake_provider: FakeOpenAI, store: Stores) -> Iterator[TlsBackend]:
    backend = start_tls_backend(tmp_path / "data", fake_provider.base_url, outside_address(),
                                store=store.new())
    yield backend
    backend.close()
    print(backend.stderr_tail())
    errors = backend.logged_errors()
    assert not errors, "the backend logged errors:\n" + "\n".join(errors[:20])


@pytest.fixture
async def owner(tls_backend: TlsBackend) -> AsyncIterator[Client]:
    """The owner's client, found through backend.json (wss, pinned from there)."""
    client = Client(tls_backend.data_dir, name="owner", reconnect=False)
    await client.connect()
    yield client
    await client.close()


async def remote_client(target: RemoteTarget, tmp_path: Path) -> Client:
    client = Client(tmp_path / "elsewhere", name="laptop", reconnect=False, remote=target)
    await client.connect()
    return client


async def mint(owner: Client, backend: TlsBackend, scopes: list[p.Scope]) -> RemoteTarget:
    made = await owner.call(TokenCreate(scopes=scopes, label="laptop"))
    return RemoteTarget(backend.target_host, backend.port, made.token,
                        backend.info["tls_fingerprint"])


async def until(pred: Any, timeout: float = 30.0) -> None:
    async with asyncio.timeout(timeout):
        while not pred():
            await asyncio.sleep(0.02)


async def test_a_pinned_client_with_a_scoped_token_completes_a_turn(
    tls_backend: TlsBackend, owner: Client, fake_provider: FakeOpenAI, tmp_path: Path,
) -> None:
    target = await mint(owner, tls_backend, ["read", "submit"])
    assert target.url.startswith("wss://")
    fake_provider.script(Reply(deltas=["over ", "the wire"]))
    laptop = await remote_client(target, tmp_path)
    seen: list[Incoming] = []
    laptop.handlers.append(seen.append)
    try:
        sid = (await laptop.call(SessionCreate())).session.session_id
        laptop.follow(sid)
        receipt = (await laptop.call(PromptSubmit(session_id=sid, request_id="r1",
                                                  text="hello from afar"))).receipt
        await until(lambda: any(isinstance(e.data, p.MessageComplete)
                                and e.admission_id == receipt.admission_id for e in seen))
    finally:
        await laptop.close()
    text = "".join(e.data.text for e in seen if isinstance(e.data, p.TextDelta))
    assert text == "over the wire"
    assert fake_provider.wait_requests(1)[0].last_user_text == "hello from afar"
    assert not (tmp_path / "elsewhere").exists(), "a remote client leaves no local folder"


async def test_a_read_only_token_cannot_submit(
    tls_backend: TlsBackend, owner: Client, tmp_path: Path, fake_provider: FakeOpenAI,
) -> None:
    sid = (await owner.call(SessionCreate())).session.session_id
    laptop = await remote_client(await mint(owner, tls_backend, ["read"]), tmp_path)
    try:
        listed = await laptop.call(SessionList())
        assert [s.session_id for s in listed.sessions] == [sid], "read works"
        with pytest.raises(RpcError) as caught:
            await laptop.call(PromptSubmit(session_id=sid, request_id="r1", text="run this"))
    finally:
        await laptop.close()
    assert caught.value.code == ErrorCode.FORBIDDEN
    assert int(ErrorCode.FORBIDDEN) == -32003
    assert "submit" in caught.value.message
    assert fake_provider.requests == [], "nothing reached the model"


async def test_a_wrong_fingerprint_is_refused(tls_backend: TlsBackend, tmp_path: Path) -> None:
    real = tls_backend.info["tls_fingerprint"]
    wrong = ("0" if real[0] != "0" else "1") + real[1:]
    with pytest.raises(CertificateMismatch) as caught:
        await remote_client(tls_backend.owner_target(wrong), tmp_path)
    message = str(caught.value)
    assert real in message, "the certificate shown is named"
    assert wrong in message, "and the pin it does not match"
    assert "pair again" in message


async def test_an_impostor_never_sees_the_token(tmp_path: Path) -> None:
    """A server in between with its own certificate: the client hangs up after TLS, before
    a byte of HTTP (the bearer token) is written."""
    cert, key = write_cert(tmp_path / "impostor", "127.0.0.1")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    received: list[bytes] = []
    done = asyncio.Event()

    async def record(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # TLS is started here, not by the server, so a handshake the client cuts short
        # still ends this handler (and sets `done`).
        try:
            await writer.start_tls(context)
            received.append(await reader.read())
        except (ConnectionError, ssl.SSLError):
            pass
        finally:
            writer.close()
            done.set()

    server = await asyncio.start_server(record, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    pinned = "ab" * 32  # the real backend's, which the impostor does not have
    try:
        with pytest.raises(CertificateMismatch):
            await remote_client(RemoteTarget("127.0.0.1", port, "secret-token", pinned), tmp_path)
        await asyncio.wait_for(done.wait(), 10)
    finally:
        server.close()
        await server.wait_closed()
    assert b"".join(received) == b"", "nothing was sent, least of all the token"


async def test_plain_ws_to_the_tls_port_fails(tls_backend: TlsBackend) -> None:
    url = f"ws://{tls_backend.target_host}:{tls_backend.port}/rpc"
    with pytest.raises((InvalidMessage, OSError, EOFError)):
        await connect(url, proxy=None, open_timeout=10,
                      additional_headers={"Authorization": f"Bearer {tls_backend.token}"})


async def test_the_certificate_is_made_once_and_published(
    tmp_path: Path, fake_provider: FakeOpenAI, store: Stores,
) -> None:
    # Off loopback the backend makes its own certificate; 0.0.0.0 is off loopback and can be
    # bound on a box without a network too.
    host = outside_address() or "0.0.0.0"
    backend = start_tls_backend(tmp_path / "data", fake_provider.base_url, host, store=store.new())
    try:
        cert, key = backend.data_dir / "tls" / "cert.pem", backend.data_dir / "tls" / "key.pem"
        first = backend.info["tls_fingerprint"]
        assert first == der_fingerprint(cert)
        assert stat.S_IMODE(key.stat().st_mode) == 0o600
        assert backend.info["host"] == host
        backend.restart()
        assert backend.info["tls_fingerprint"] == first, "a restart keeps the pin"
        assert "SHA-256 fingerprint " + first in backend.stderr_path.read_text()
    finally:
        backend.close()


async def test_loopback_with_a_given_certificate(
    tmp_path: Path, fake_provider: FakeOpenAI, store: Stores,
) -> None:
    backend = start_tls_backend(tmp_path / "data", fake_provider.base_url, None, store=store.new())
    try:
        given = tmp_path / "given" / "given-cert.pem"
        assert backend.info["tls_fingerprint"] == der_fingerprint(given)
        assert not (backend.data_dir / "tls").exists(), "a given certificate is used as is"
        client = await remote_client(backend.owner_target(), tmp_path)
        assert client.server is not None
        await client.close()
    finally:
        backend.close()


def test_serve_refuses_half_a_certificate(tmp_path: Path) -> None:
    cert, _ = write_cert(tmp_path, "127.0.0.1")
    done = subprocess.run(
        [sys.executable, "-m", "backend", "serve", "--data-dir", str(tmp_path / "d"),
         "--tls-cert", str(cert)], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert "give both --tls-cert and --tls-key" in done.stderr


def test_the_cli_pairs_and_chats_remotely(
    tls_backend: TlsBackend, fake_provider: FakeOpenAI, tmp_path: Path,
) -> None:
    """`turnkey token create` on the backend's computer, `turnkey --remote STRING chat` on
    the other (its own, empty data folder: nothing is started there)."""
    env = tls_backend.env()
    here = [sys.executable, "-m", "desktop.cli", "--data-dir", str(tls_backend.data_dir)]
    made = subprocess.run([*here, "token", "create", "--scopes", "read,submit",
                           "--label", "laptop"], env=env, capture_output=True, text=True,
                          timeout=60, check=False)
    assert made.returncode == 0, made.stderr
    string = made.stdout.strip()
    target = parse(string)
    assert (target.host, target.port) == (tls_backend.target_host, tls_backend.port)
    assert target.fingerprint == tls_backend.info["tls_fingerprint"]
    assert target.token not in made.stderr
    assert "shown only now" in made.stderr

    elsewhere = tmp_path / "laptop"
    there = [sys.executable, "-m", "desktop.cli", "--data-dir", str(elsewhere)]
    env_there = {**env, "TURNKEY_HOME": str(elsewhere)}
    fake_provider.script(Reply(deltas=["remote ", "answer"]))
    chat = subprocess.run([*there, "--remote", string, "chat", "what is up"], env=env_there,
                          capture_output=True, text=True, timeout=90, check=False)
    assert chat.returncode == 0, chat.stderr
    assert "remote answer" in chat.stdout
    listed = subprocess.run([*there, "sessions"], env={**env_there, "TURNKEY_REMOTE": string},
                            capture_output=True, text=True, timeout=60, check=False)
    assert listed.returncode == 0, listed.stderr
    assert len(listed.stdout.splitlines()) == 1
    assert not (elsewhere / "backend.json").exists(), "no backend was started on the laptop"

    tampered = string.replace(f"fp={target.fingerprint}", "fp=" + "0" * 64)
    refused = subprocess.run([*there, "--remote", tampered, "sessions"], env=env_there,
                             capture_output=True, text=True, timeout=60, check=False)
    assert refused.returncode == 2
    assert "not the one this connection string pins" in refused.stderr
    token_list = subprocess.run([*here, "token", "list"], env=env, capture_output=True,
                                text=True, timeout=60, check=False)
    assert "laptop" in token_list.stdout
    assert target.token not in token_list.stdout
    assert json.loads((tls_backend.data_dir / "backend.json").read_text())["port"] == target.port


def test_the_cli_lists_a_remote_backends_store_with_an_admin_token_only(
    tls_backend: TlsBackend, tmp_path: Path,
) -> None:
    """`turnkey --remote STRING backends` from another computer: the remote backend answers
    for its store; a pairing without `admin` is told which scope it lacks."""
    env = tls_backend.env()
    here = [sys.executable, "-m", "desktop.cli", "--data-dir", str(tls_backend.data_dir)]
    elsewhere = tmp_path / "laptop"
    there = [sys.executable, "-m", "desktop.cli", "--data-dir", str(elsewhere)]
    env_there = {**env, "TURNKEY_HOME": str(elsewhere), "TURNKEY_REMOTE": ""}
    strings = {}
    for scopes in ("read,submit,approve", "read,admin"):
        made = subprocess.run([*here, "token", "create", "--scopes", scopes, "--label", scopes],
                              env=env, capture_output=True, text=True, timeout=60, check=False)
        assert made.returncode == 0, made.stderr
        strings[scopes] = made.stdout.strip()

    listed = subprocess.run([*there, "--remote", strings["read,admin"], "backends", "--json"],
                            env=env_there, capture_output=True, text=True, timeout=60, check=False)
    assert listed.returncode == 0, listed.stderr
    [answered] = json.loads(listed.stdout)["backends"]
    assert (answered["pid"], answered["this"]) == (tls_backend.pid, True)
    refused = subprocess.run([*there, "--remote", strings["read,submit,approve"], "backends"],
                             env=env_there, capture_output=True, text=True, timeout=60, check=False)
    assert refused.returncode == 1
    assert refused.stderr.strip() == "turnkey: forbidden: this token lacks the 'admin' scope"
    assert not (elsewhere / "backend.json").exists(), "no backend was started on the laptop"


def test_every_address_serves_tls_and_this_computer_still_connects(
    tmp_path: Path, fake_provider: FakeOpenAI, store: Stores,
) -> None:
    """--listen 0.0.0.0: TLS (not loopback), this computer's commands reach it through
    backend.json at 127.0.0.1, pinned; pairing asks which address the other computer uses."""
    backend = TlsBackend(tmp_path / "data", fake_provider.base_url, ["--listen", "0.0.0.0:0"],
                         store=store.new())
    backend.start()
    try:
        assert backend.info["host"] == "0.0.0.0"
        assert backend.info["tls_fingerprint"] == der_fingerprint(backend.data_dir / "tls" / "cert.pem")
        here = [sys.executable, "-m", "desktop.cli", "--data-dir", str(backend.data_dir)]
        listed = subprocess.run([*here, "sessions"], env=backend.env(), capture_output=True,
                                text=True, timeout=60, check=False)
        assert listed.returncode == 0, listed.stderr
        status = subprocess.run([*here, "backend", "status"], env=backend.env(),
                                capture_output=True, text=True, timeout=60, check=False)
        assert (f"listening on 0.0.0.0:{backend.port} (wss), TLS certificate SHA-256 "
                f"{backend.info['tls_fingerprint']}") in status.stdout
        asked = subprocess.run([*here, "token", "create", "--scopes", "read", "--label", "x"],
                               env=backend.env(), capture_output=True, text=True, timeout=60,
                               check=False)
        assert asked.returncode == 2
        assert "say which one the other computer reaches with --host HOST" in asked.stderr
        made = subprocess.run([*here, "token", "create", "--scopes", "read", "--label", "x",
                               "--host", "127.0.0.1"], env=backend.env(), capture_output=True,
                              text=True, timeout=60, check=False)
        assert made.returncode == 0, made.stderr
        target = parse(made.stdout.strip())
        assert target.host == "127.0.0.1"
        assert target.fingerprint == backend.info["tls_fingerprint"]
    finally:
        backend.close()
    assert not backend.logged_errors()


async def test_a_revoked_pairing_is_told_why(
    tls_backend: TlsBackend, owner: Client, tmp_path: Path,
) -> None:
    made = await owner.call(TokenCreate(scopes=["read"], label="lost laptop"))
    target = RemoteTarget(tls_backend.target_host, tls_backend.port, made.token,
                          tls_backend.info["tls_fingerprint"])
    laptop = await remote_client(target, tmp_path)
    await laptop.close()
    await owner.call(TokenRevoke(token_id=made.token_id))
    with pytest.raises(BackendNotFound) as caught:
        await remote_client(target, tmp_path)
    assert "refused the connection: HTTP 401: missing or wrong bearer token" in str(caught.value)
    assert made.token not in str(caught.value)


async def test_a_remote_client_rides_out_a_backend_crash_and_replays_exactly_once(
    tmp_path: Path, fake_provider: FakeOpenAI, store: Stores,
) -> None:
    """kill -9 mid-stream; the backend comes back on the same address with the same
    certificate, and the remote client (same pin, same scoped token) reconnects, re-subscribes
    from its watermark and sees every stored event once."""
    host = outside_address()
    port = free_port(host or "127.0.0.1")  # fixed: the port a paired computer dials
    backend = start_tls_backend(tmp_path / "data", fake_provider.base_url, host, port,
                                store=store.new())
    owner = Client(backend.data_dir, name="owner", reconnect=False)
    await owner.connect()
    made = await owner.call(TokenCreate(scopes=["read", "submit"], label="laptop"))
    await owner.close()
    target = RemoteTarget(backend.target_host, port, made.token, backend.info["tls_fingerprint"])
    laptop = Client(tmp_path / "elsewhere", name="laptop", remote=target)
    seen: list[Incoming] = []
    laptop.handlers.append(seen.append)
    await laptop.connect()
    release = threading.Event()
    try:
        fake_provider.script(Reply(deltas=[f"a{i} " for i in range(10)], hang_after=5,
                                   release=release))
        sid = (await laptop.call(SessionCreate())).session.session_id
        laptop.follow(sid)
        await laptop.call(PromptSubmit(session_id=sid, request_id="r1", text="stream"))
        await until(lambda: any(isinstance(e.data, p.TextDelta) for e in seen))
        backend.kill9()
        release.set()
        backend.start()
        assert backend.port == port
        await until(lambda: laptop.state == "connected" and laptop.server is not None
                    and laptop.server.epoch >= 2)
        fake_provider.script(Reply(deltas=["after ", "the crash"]))
        second = (await laptop.call(PromptSubmit(session_id=sid, request_id="r2",
                                                 text="again"))).receipt
        await until(lambda: any(isinstance(e.data, p.MessageComplete)
                                and e.admission_id == second.admission_id for e in seen))
        stored = await laptop.call(EventsSince(session_id=sid, since_seq=0))
        mine = [e.seq for e in seen if e.seq is not None and e.session_id == sid]
        assert mine == [e.seq for e in stored.events], "every stored event once, in order"
    finally:
        release.set()
        await laptop.close()
        backend.close()
    assert not backend.logged_errors()


def test_the_cli_says_what_is_wrong_with_a_remote_before_connecting(tmp_path: Path) -> None:
    here = [sys.executable, "-m", "desktop.cli", "--data-dir", str(tmp_path / "laptop")]
    fp = "ab" * 32

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*here, *args], capture_output=True, text=True, timeout=60,
                              check=False, env={**os.environ, "TURNKEY_REMOTE": ""})

    other = run("--remote", f"turnkey://192.0.2.9:1?token=t&fp={fp}", "memory", "show")
    assert other.returncode == 2
    assert "--remote works with the app, chat, sessions and backends, not memory" in other.stderr
    clear = run("--remote", "turnkey://192.0.2.9:1?token=t", "sessions")
    assert clear.returncode == 2
    assert "must use TLS" in clear.stderr
    assert not (tmp_path / "laptop").exists(), "nothing was started or written"
