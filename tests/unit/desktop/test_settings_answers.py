"""What the settings dialog says without Qt: who answers now (the weak offline model said
plainly), a provider test's result with its detail apart, and the rules in words."""

from __future__ import annotations

from desktop.state.rules import EMPTY, allows, revoke_question, rows
from desktop.state.settings import answering, probe_words
from shared import protocol as p
from shared.config import ConfigView, ProviderView


def view(summary: p.ProviderSummary | None, *names: str) -> ConfigView:
    providers = {n: ProviderView(model=f"{n}-model") for n in names}
    return ConfigView(providers=providers, active_provider=summary)


def test_the_offline_model_is_named_weak_with_the_next_step() -> None:
    summary = p.ProviderSummary(configured=False, name="local", model="SmolLM2-135M-Instruct",
                                kind="local", offline_default=True)
    words, tone = answering(view(summary))
    assert words.startswith("Answering now: the built-in offline model (SmolLM2-135M-Instruct).")
    assert "small and weak" in words
    assert "add a provider" in words
    assert "No provider is configured yet" not in words
    assert tone == "warning"


def test_a_configured_provider_is_named_with_its_model_and_kind() -> None:
    summary = p.ProviderSummary(configured=True, name="main", model="gpt-x", kind="openai")
    words, tone = answering(view(summary, "main"))
    assert words == "Answering now: “main” (gpt-x, OpenAI-compatible (Chat Completions))."
    assert tone == ""


def test_nothing_to_answer_and_an_older_backend() -> None:
    words, tone = answering(view(p.ProviderSummary(configured=False)))
    assert "nothing can answer yet" in words
    assert tone == "danger"
    assert answering(view(None)) == ("No provider is configured yet: add one.", "warning")
    assert answering(view(None, "main")) == ("Answering now: “main” (main-model).", "")


def test_a_test_result_in_words_with_the_detail_apart() -> None:
    ok = p.ProviderTestResult(ok=True, provider="main", model="m", latency_ms=34)
    assert probe_words(ok) == ("OK: “main” (m) answered in 34 ms.", "")
    failure = p.ProviderFailure(kind="auth", message="The server rejected the API key. Paste a new "
                                "key in Settings → Providers.", detail="main: HTTP 401: bad key")
    failed = p.ProviderTestResult(ok=False, provider="main", model="m", latency_ms=5, error=failure)
    assert probe_words(failed) == (
        "Failed: “main”: The server rejected the API key. Paste a new key in Settings → Providers.",
        "main: HTTP 401: bad key")


def test_rules_in_words_newest_first() -> None:
    rules = [p.Rule(rule_id="r1", tool="terminal", pattern="rm -rf build",
                    created_at="2026-11-30T14:02:00.000Z"),
             p.Rule(rule_id="r2", tool="terminal", pattern="@network",
                    created_at="2026-11-30T15:00:00.000Z"),
             p.Rule(rule_id="r3", tool="write_file", pattern="/home/me/site",
                    created_at="2026-11-30T13:00:00.000Z")]
    listed = rows(rules)
    assert [r.rule_id for r in listed] == ["r2", "r1", "r3"]
    assert listed[1].tool == "Terminal"
    assert listed[1].allows == "commands starting with “rm -rf build”"
    assert listed[0].allows.startswith("commands that need the network")
    assert allows(rules[2]) == "changes inside the folder /home/me/site"
    assert len(listed[1].created) == len("2026-11-30 14:02")
    question, detail = revoke_question(listed[1])
    assert question == "Revoke the rule for terminal: commands starting with “rm -rf build”?"
    assert "ask you again" in detail
    assert "Always" in EMPTY
