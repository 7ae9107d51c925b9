"""The CPU variant of llama.cpp chosen for a machine: the best its processor and its kernel
both allow, never AMX, plain x86-64 when nothing else is."""

from __future__ import annotations

import signal
from pathlib import Path

from backend.providers import llama_build
from backend.providers.llama_build import BASELINE, X86_VARIANTS, Build, Machine, ranked
from backend.providers.local_failures import crashed

ALL = list(X86_VARIANTS)
HASWELL = {"sse4_2", "avx", "f16c", "fma", "avx2", "bmi2"}
AVX512 = HASWELL | {"avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw"}
SAPPHIRE = AVX512 | {"avx512vbmi", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_int8",
                     "amx_bf16"}
YMM, ZMM, TILES = 1 << 2, (1 << 5) | (1 << 6) | (1 << 7), (1 << 17) | (1 << 18)
LEGACY = 0b11  # x87 and SSE


def machine(flags: set[str], states: int | None) -> Machine:
    return Machine(frozenset(flags), states)


def test_a_machine_advertising_amx_gets_its_best_avx512_variant_never_amx() -> None:
    best = ranked(ALL, machine(SAPPHIRE, LEGACY | YMM | ZMM | TILES))
    assert "sapphirerapids" not in best
    assert best[0] == "zen4", "the best of the AVX-512 variants (ggml's own order)"
    assert best[-1] == BASELINE


def test_avx512_the_kernel_does_not_save_is_not_used() -> None:
    # A VM whose CPUID advertises AVX-512 while XCR0 leaves out the ZMM states.
    assert ranked(ALL, machine(SAPPHIRE, LEGACY | YMM))[0] == "haswell"


def test_avx_the_kernel_does_not_save_leaves_sse() -> None:
    assert ranked(ALL, machine(SAPPHIRE, LEGACY))[0] == "sse42"


def test_without_the_kernels_word_the_flags_decide() -> None:
    assert ranked(ALL, machine(AVX512, None))[0] == "skylakex"


def test_a_bare_x86_64_gets_the_baseline() -> None:
    assert ranked(ALL, machine(set(), LEGACY)) == [BASELINE]


def test_only_installed_variants_are_ranked() -> None:
    assert ranked(["x64", "haswell", "icelake"], machine(AVX512, LEGACY | YMM | ZMM)) == [
        "haswell", "x64"]


def test_this_machine_allows_the_baseline() -> None:
    assert BASELINE in ranked(ALL, llama_build.read_machine())


def test_a_build_without_variants_is_not_portable(tmp_path: Path) -> None:
    (tmp_path / "libggml-cpu.so").write_bytes(b"native")
    assert not Build(tmp_path, {}).portable
    variant = tmp_path / "libggml-cpu-x64.so"
    variant.write_bytes(b"portable")
    build = Build(tmp_path, {"x64": variant})
    assert build.portable
    before = build.fingerprint()
    variant.write_bytes(b"installed again")
    assert build.fingerprint() != before, "a new install runs the start check again"
    arm = Build(tmp_path, {"armv8.0_1": variant, "armv8.2_1": variant})
    assert arm.portable, "ARM's variants: portable, ggml chooses among them"
    assert not arm.x86


def test_words_for_each_way_of_dying() -> None:
    sigill = crashed("local", -signal.SIGILL, "answer", "tail", portable=False)
    assert "scripts/bootstrap local" in (sigill.words or ""), "a native build: rebuild it"
    assert "any processor" in (sigill.words or "")
    portable = crashed("local", -signal.SIGILL, "answer", "tail", portable=True)
    assert "send your message again" in (portable.words or ""), "the next start uses x86-64"
    on_baseline = crashed("local", -signal.SIGILL, "answer", "tail", portable=True,
                          baseline=True)
    assert "Report this" in (on_baseline.words or "")
    killed = crashed("local", -signal.SIGKILL, "start", "tail", portable=True)
    assert "running out of memory" in (killed.words or "")
    segv = crashed("local", -signal.SIGSEGV, "answer", "tail", portable=True)
    assert "memory fault (SIGSEGV)" in (segv.words or "")
    odd = crashed("local", -63, "answer", "tail", portable=True)
    assert "signal 63" in (odd.words or "") or "SIGRTMAX" in (odd.words or "")
    assert all(e.kind == "crashed" and e.message.endswith("tail") for e in (sigill, killed, segv))
