"""A throwaway Matrix homeserver for the test run: Synapse on SQLite in a temp folder, on a free port.

Synapse pins many dependencies of its own, so it lives in its own venv, ``.venv-synapse``, that
``scripts/bootstrap dev`` makes; it never shares the product's venv.  The server is one process
listening on 127.0.0.1 with the client API only (no federation: nothing here talks to another
server), every rate limit raised so a test never meets a 429, and registration closed except
through the shared-secret admin API, which is how the tests make their users.

The same folder and port survive ``stop()`` + ``start()``: that is a homeserver outage, after
which the users, their access tokens, the rooms and the transaction ids the server remembers are
all still there.  ``pause()``/``resume()`` (SIGSTOP/SIGCONT) is the other kind of outage: the
server still accepts connections but answers nothing.
"""

from __future__ import annotations

import base64
import ctypes
import hashlib
import hmac
import json
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.matrix_client import MatrixClient, MatrixRequestError
from tests.pg_server import free_port
from tests.procs import running

ROOT = Path(__file__).resolve().parent.parent
SYNAPSE_VENV = ROOT / ".venv-synapse"
SERVER_NAME = "tk.test"
START_TIMEOUT_S = 90.0  # the first start creates the whole schema in SQLite
STOP_TIMEOUT_S = 30.0
BIND_ATTEMPTS = 5  # a free port can be taken by someone else between our probe and Synapse's bind
HIGH_LIMIT = {"per_second": 100000, "burst_count": 1000000}
MISSING = (
    "The Matrix test server (Synapse) is not installed: {python} does not exist. The tests "
    "run a real homeserver from their own venv, .venv-synapse; run `scripts/bootstrap dev` "
    "to create it."
)
PR_SET_PDEATHSIG = 1


class MatrixServerError(AssertionError):
    """The test homeserver could not be set up; the message says why and carries its log."""


@dataclass(frozen=True)
class MatrixAccount:
    """A user on the test server with one logged-in device (one access token)."""

    user_id: str
    access_token: str
    device_id: str
    password: str

    def __repr__(self) -> str:
        """Without the token and password: an assertion that prints an account shows no secret."""
        return f"MatrixAccount(user_id={self.user_id!r}, device_id={self.device_id!r})"

    @property
    def localpart(self) -> str:
        return self.user_id[1:].split(":", 1)[0]


def _parent_death_signal() -> Callable[[], None] | None:
    """A function for the child to run before exec: if the test process dies (even by SIGKILL),
    Synapse gets SIGKILL too, so no homeserver outlives its test run.  SIGKILL rather than
    SIGTERM because a paused (SIGSTOPped) server would hold SIGTERM until someone sent SIGCONT,
    which nobody would.  Linux ties the signal to the *thread* that forks, so it is only set
    from the main thread (a worker thread's end would kill the server mid-run)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl

    def set_it() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)

    return set_it


def signing_key_line() -> str:
    """A new ed25519 signing key in Synapse's file format ("ed25519 VERSION SEED"): the key is
    just its 32-byte seed, so writing one saves a whole Synapse start (``--generate-keys``)."""
    seed = base64.b64encode(os.urandom(32)).decode().rstrip("=")
    return f"ed25519 a_tk {seed}\n"


class MatrixServer:
    """One Synapse homeserver in its own temp folder, started and stopped by the test run."""

    def __init__(self, venv: Path = SYNAPSE_VENV, server_name: str = SERVER_NAME) -> None:
        self.python = venv / "bin" / "python"
        if not self.python.is_file():
            raise MatrixServerError(MISSING.format(python=self.python))
        self.server_name = server_name
        self.root = Path(tempfile.mkdtemp(prefix="turnkey-synapse-"))
        self.config_path = self.root / "homeserver.yaml"
        self.log_path = self.root / "homeserver.log"
        self.output_path = self.root / "output.log"  # stdout/stderr: errors before logging is set up
        self.shared_secret = secrets.token_hex(32)
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self._paused = False
        self._registered = 0
        self._clients: list[MatrixClient] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # --- starting and stopping ----------------------------------------------------------------

    def start(self) -> None:
        """Start Synapse and return once it answers the client API.  The first start picks a
        free port and writes the config; later starts reuse both, and the data (an outage)."""
        if self.running():
            return
        if self.port:
            self._spawn()
            if not self._wait_ready():
                self._give_up("Synapse did not start again on the same port and data")
            return
        for _attempt in range(BIND_ATTEMPTS):
            self.port = free_port()
            self._write_config()
            self._spawn()
            if self._wait_ready():
                return
            if "Address already in use" not in self.log_tail():
                break
        self._give_up("Synapse did not start")

    def _give_up(self, why: str) -> None:
        """Raise with the log's tail after making sure the half-started process is gone."""
        tail = self.log_tail()
        self.kill()
        raise MatrixServerError(f"{why} (port {self.port})\n{tail}")

    def _write_config(self) -> None:
        """homeserver.yaml (as JSON, which is YAML too), its log config and its signing key."""
        key_path = self.root / "signing.key"
        key_path.write_text(signing_key_line())
        log_config = self.root / "log.config"
        log_config.write_text(json.dumps(self._log_config()))
        self.config_path.write_text(json.dumps(self._config(key_path, log_config), indent=1))

    def _log_config(self) -> dict[str, Any]:
        """WARNING and up, to a file: Synapse logs every request at INFO, which costs time."""
        return {
            "version": 1,
            "formatters": {"precise": {
                "format": "%(asctime)s - %(name)s - %(lineno)d - %(levelname)s - %(message)s"}},
            "handlers": {"file": {"class": "logging.FileHandler", "formatter": "precise",
                                  "filename": str(self.log_path), "encoding": "utf8"}},
            "root": {"level": "WARNING", "handlers": ["file"]},
            "disable_existing_loggers": False,
        }

    def _config(self, key_path: Path, log_config: Path) -> dict[str, Any]:
        config: dict[str, Any] = {
            "server_name": self.server_name,
            "public_baseurl": f"{self.url}/",
            "pid_file": str(self.root / "homeserver.pid"),
            "listeners": [{
                "port": self.port, "bind_addresses": ["127.0.0.1"], "type": "http",
                "tls": False, "x_forwarded": False,
                "resources": [{"names": ["client"], "compress": False}],  # admin API included
            }],
            "database": {"name": "sqlite3", "args": {"database": str(self.root / "homeserver.db")}},
            "log_config": str(log_config),
            "media_store_path": str(self.root / "media"),
            "enable_media_repo": True,  # files and images sent to the door (issue 36)
            "max_upload_size": "64M",
            "url_preview_enabled": False,
            "presence": {"enabled": False},
            "signing_key_path": str(key_path),
            "trusted_key_servers": [],
            "suppress_key_server_warning": True,
            "registration_shared_secret": self.shared_secret,
            "enable_registration": False,
            "report_stats": False,
            "enable_metrics": False,
            "macaroon_secret_key": secrets.token_hex(32),
            "form_secret": secrets.token_hex(32),
            "bcrypt_rounds": 4,  # the default (12) costs a quarter second per registration and login
        }
        return config | rate_limits_raised()

    def _spawn(self) -> None:
        argv = [str(self.python), "-m", "synapse.app.homeserver", "-c", str(self.config_path)]
        with self.output_path.open("ab") as output:
            self.proc = subprocess.Popen(
                argv, cwd=self.root, stdin=subprocess.DEVNULL, stdout=output, stderr=output,
                preexec_fn=_parent_death_signal(), start_new_session=True,
            )
        self._paused = False

    def _wait_ready(self) -> bool:
        """Poll /versions until it answers (True) or the process exits or time is up (False)."""
        assert self.proc is not None
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                if httpx.get(f"{self.url}/_matrix/client/versions", timeout=2).status_code == 200:
                    return True
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        return False

    def stop(self) -> None:
        """A clean shutdown (SIGTERM), waiting for the process to exit; the data stays for the
        next ``start()``.  A paused server is resumed first, or it would never see the signal."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        if self._paused:
            proc.send_signal(signal.SIGCONT)
            self._paused = False
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)

    def kill(self) -> None:
        """SIGKILL: the homeserver dies mid-whatever, as in a power cut."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        self._paused = False

    def pause(self) -> None:
        """SIGSTOP: connections are accepted by the kernel but nothing is answered."""
        if self.proc is None or not self.running():
            raise MatrixServerError("pause(): the Matrix test server is not running")
        self.proc.send_signal(signal.SIGSTOP)
        self._paused = True

    def resume(self) -> None:
        if self.proc is not None and self._paused:
            self.proc.send_signal(signal.SIGCONT)
        self._paused = False

    def ensure_up(self) -> None:
        """Running and answering, whatever the last test left it as (paused, stopped, killed)."""
        self.resume()
        self.start()

    def close(self) -> None:
        """Stop the server and remove its folder.  Idempotent, so safe from several clean-ups."""
        self.close_clients()
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def pids(self) -> list[int]:
        """Every process whose command line names this server's folder (for leak checks)."""
        return running(str(self.root))

    def log_tail(self, chars: int = 4000) -> str:
        parts = []
        for path in (self.output_path, self.log_path):
            try:
                text = path.read_text(errors="replace")
            except FileNotFoundError:
                text = "(none)"
            parts.append(f"--- Synapse {path.name} ({path}) ---\n{text[-chars:]}")
        return "\n".join(parts)

    def __enter__(self) -> MatrixServer:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # --- users --------------------------------------------------------------------------------

    def register(self, name: str, admin: bool = False) -> MatrixAccount:
        """A new user through the shared-secret admin API.  The localpart is ``name`` plus a
        counter (``alice-3``): the server lives for the whole run, so every call is a new user."""
        self._registered += 1
        localpart = f"{name.lower()}-{self._registered}"
        password = secrets.token_urlsafe(16)
        endpoint = f"{self.url}/_synapse/admin/v1/register"
        nonce = self._checked(httpx.get(endpoint, timeout=10), "GET the registration nonce")["nonce"]
        body = {"nonce": nonce, "username": localpart, "password": password, "admin": admin,
                "mac": registration_mac(self.shared_secret, nonce, localpart, password, admin)}
        done = self._checked(httpx.post(endpoint, json=body, timeout=30), f"register {localpart}")
        return MatrixAccount(done["user_id"], done["access_token"], done["device_id"], password)

    def login(self, account: MatrixAccount) -> MatrixAccount:
        """A new password login of the same user: a new device with its own access token."""
        body = {"type": "m.login.password", "password": account.password,
                "identifier": {"type": "m.id.user", "user": account.user_id}}
        done = self._checked(httpx.post(f"{self.url}/_matrix/client/v3/login", json=body, timeout=30),
                             f"log {account.user_id} in")
        return MatrixAccount(done["user_id"], done["access_token"], done["device_id"],
                             account.password)

    def client(self, account: MatrixAccount) -> MatrixClient:
        """A test-side client acting as ``account``; closed by ``close_clients()``."""
        made = MatrixClient(self.url, account.user_id, account.access_token, self.log_tail)
        self._clients.append(made)
        return made

    def close_clients(self) -> None:
        clients, self._clients = self._clients, []
        for made in clients:
            made.close()

    def _checked(self, response: httpx.Response, what: str) -> dict[str, Any]:
        if response.status_code != 200:
            error = MatrixRequestError.from_response(response, what, self.log_tail())
            raise MatrixServerError(str(error))
        body: dict[str, Any] = response.json()
        return body


def registration_mac(secret: str, nonce: str, localpart: str, password: str, admin: bool) -> str:
    """HMAC-SHA1 over nonce, user, password and admin flag, NUL-separated (Synapse's admin API)."""
    mac = hmac.new(secret.encode(), digestmod=hashlib.sha1)
    mac.update(nonce.encode() + b"\0" + localpart.encode() + b"\0" + password.encode() + b"\0")
    mac.update(b"admin" if admin else b"notadmin")
    return mac.hexdigest()


def rate_limits_raised() -> dict[str, Any]:
    """Every rate limiter Synapse 1.163 reads from its config (synapse/config/ratelimiting.py),
    raised so far that no test ever meets a 429: a test about our door's own pacing must not
    be paced by the homeserver instead."""
    flat = ["rc_message", "rc_registration", "rc_registration_token_validity",
            "rc_admin_redaction", "rc_joins_per_room", "rc_key_requests", "rc_3pid_validation",
            "rc_third_party_invite", "rc_media_create", "rc_delayed_event_mgmt",
            "rc_room_creation", "rc_reports", "rc_user_directory", "rc_profile"]
    nested = {"rc_login": ["address", "account", "failed_attempts"],
              "rc_joins": ["local", "remote"],
              "rc_invites": ["per_room", "per_user", "per_issuer"],
              "rc_presence": ["per_user"]}
    limits: dict[str, Any] = {key: dict(HIGH_LIMIT) for key in flat}
    for key, parts in nested.items():
        limits[key] = {part: dict(HIGH_LIMIT) for part in parts}
    limits["federation_rr_transactions_per_room_per_second"] = HIGH_LIMIT["per_second"]
    return limits
