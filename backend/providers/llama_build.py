"""Which of llama.cpp's CPU builds the offline model's server loads: the fastest one that
both this machine's processor and its operating system allow.

`scripts/bootstrap` compiles llama.cpp portably (`GGML_NATIVE=OFF`, `GGML_BACKEND_DL=ON`,
`GGML_CPU_ALL_VARIANTS=ON`): one `libggml-cpu-VARIANT.so` per instruction-set level,
from plain x86-64 up, instead of one library for whatever the build machine advertised.
ggml would pick among them itself, but its choice reads only CPUID, which says what the
processor has, not what the kernel lets a process use; a VM may advertise AVX-512 or AMX
that the guest kernel never enabled, and the first such instruction is SIGILL.  So the
choice is made here, from two things the kernel says:

- the `flags` line of /proc/cpuinfo, which lists what the processor has minus what the
  kernel turned off (an AVX flag is dropped when the kernel does not save AVX state);
- `arch_prctl(ARCH_GET_XCOMP_SUPP)`, the register states the kernel saves for a process
  (XCR0 as the kernel set it): AVX needs the YMM state, AVX-512 the three ZMM states.

AMX is never chosen: it also needs a per-process grant that a VM may advertise and then
fail (issue 31's machine trapped on `tileloadd`), and it speeds nothing up for a model of
this size.  The server is then told which library to load (`GGML_BACKEND_PATH`) and runs
in a folder holding none, so ggml's own search finds nothing else.

Pure functions over the flags and the mask, plus two small readers of the machine.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import importlib.util
import platform
from dataclasses import dataclass
from pathlib import Path

# ggml's x86 feature names (ggml/src/CMakeLists.txt) -> the /proc/cpuinfo flags each needs.
_FLAGS: dict[str, tuple[str, ...]] = {
    "SSE42": ("sse4_2",),
    "AVX": ("avx",),
    "F16C": ("f16c",),
    "FMA": ("fma",),
    "AVX2": ("avx2",),
    "BMI2": ("bmi2",),
    "AVX_VNNI": ("avx_vnni",),
    "AVX512": ("avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw"),
    "AVX512_VBMI": ("avx512vbmi",),
    "AVX512_VNNI": ("avx512_vnni",),
    "AVX512_BF16": ("avx512_bf16",),
    "AMX_TILE": ("amx_tile",),
    "AMX_INT8": ("amx_int8",),
}
# ggml's score for each feature (ggml-cpu/arch/x86/cpu-feats.cpp): the variant ggml would
# prefer among those allowed is the one with the highest sum.
_SCORE: dict[str, int] = {
    "FMA": 1, "F16C": 1 << 1, "SSE42": 1 << 2, "BMI2": 1 << 3, "AVX": 1 << 4, "AVX2": 1 << 5,
    "AVX_VNNI": 1 << 6, "AVX512": 1 << 7, "AVX512_VBMI": 1 << 8, "AVX512_BF16": 1 << 9,
    "AVX512_VNNI": 1 << 10, "AMX_TILE": 0, "AMX_INT8": 1 << 11,
}
# Register states (XCR0 bits) the kernel must save for a feature's instructions to run.
_YMM = 1 << 2
_ZMM = (1 << 5) | (1 << 6) | (1 << 7)  # opmask, ZMM_Hi256, Hi16_ZMM
_TILE = (1 << 17) | (1 << 18)  # XTILECFG, XTILEDATA
_STATES: dict[str, int] = {
    "AVX": _YMM, "F16C": _YMM, "FMA": _YMM, "AVX2": _YMM, "AVX_VNNI": _YMM,
    "AVX512": _YMM | _ZMM, "AVX512_VBMI": _YMM | _ZMM, "AVX512_VNNI": _YMM | _ZMM,
    "AVX512_BF16": _YMM | _ZMM, "AMX_TILE": _TILE, "AMX_INT8": _TILE,
}
NEVER = frozenset({"AMX_TILE", "AMX_INT8"})  # see the module docstring

# The x86 variants GGML_CPU_ALL_VARIANTS builds, with the features each is compiled for.
X86_VARIANTS: dict[str, tuple[str, ...]] = {
    "x64": (),
    "sse42": ("SSE42",),
    "sandybridge": ("SSE42", "AVX"),
    "ivybridge": ("SSE42", "AVX", "F16C"),
    "piledriver": ("SSE42", "AVX", "F16C", "FMA"),
    "haswell": ("SSE42", "AVX", "F16C", "FMA", "AVX2", "BMI2"),
    "skylakex": ("SSE42", "AVX", "F16C", "FMA", "AVX2", "BMI2", "AVX512"),
    "cannonlake": ("SSE42", "AVX", "F16C", "FMA", "AVX2", "BMI2", "AVX512", "AVX512_VBMI"),
    "cascadelake": ("SSE42", "AVX", "F16C", "FMA", "AVX2", "BMI2", "AVX512", "AVX512_VNNI"),
    "icelake": ("SSE42", "AVX", "F16C", "FMA", "AVX2", "BMI2", "AVX512", "AVX512_VBMI",
                "AVX512_VNNI"),
    "cooperlake": ("SSE42", "AVX", "F16C", "FMA", "AVX2", "BMI2", "AVX512", "AVX512_VNNI",
                   "AVX512_BF16"),
    "zen4": ("SSE42", "AVX", "F16C", "FMA", "AVX2", "BMI2", "AVX512", "AVX512_VBMI",
             "AVX512_VNNI", "AVX512_BF16"),
    "alderlake": ("SSE42", "AVX", "F16C", "FMA", "AVX2", "BMI2", "AVX_VNNI"),
    "sapphirerapids": ("SSE42", "AVX", "F16C", "FMA", "AVX2", "BMI2", "AVX512", "AVX512_VBMI",
                       "AVX512_VNNI", "AVX512_BF16", "AMX_TILE", "AMX_INT8"),
}
BASELINE = "x64"  # plain x86-64 (SSE2): runs on every x86-64 processor


@dataclass(frozen=True)
class Machine:
    """What the kernel says this machine allows: the cpuinfo flags, and the register states
    it saves (None where the kernel cannot say: older than 5.16, or not Linux)."""

    flags: frozenset[str]
    states: int | None


def allowed(features: tuple[str, ...], machine: Machine) -> bool:
    """Whether code compiled for `features` may run here."""
    for feature in features:
        if feature in NEVER or feature not in _FLAGS:
            return False
        if not all(flag in machine.flags for flag in _FLAGS[feature]):
            return False
        need = _STATES.get(feature, 0)
        if machine.states is not None and machine.states & need != need:
            return False
    return True


def score(features: tuple[str, ...]) -> int:
    return 1 + sum(_SCORE.get(feature, 0) for feature in features)


def ranked(available: list[str], machine: Machine) -> list[str]:
    """The available x86 variants this machine allows, best first (ggml's order)."""
    usable = [name for name in available
              if name in X86_VARIANTS and allowed(X86_VARIANTS[name], machine)]
    return sorted(usable, key=lambda name: score(X86_VARIANTS[name]), reverse=True)


def read_machine() -> Machine:
    return Machine(_cpuinfo_flags(), _saved_states())


def _cpuinfo_flags() -> frozenset[str]:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as cpuinfo:
            for line in cpuinfo:
                key, _, value = line.partition(":")
                if key.strip() == "flags":
                    return frozenset(value.split())
    except OSError:
        pass
    return frozenset()


_SYS_ARCH_PRCTL = 158  # x86-64
_ARCH_GET_XCOMP_SUPP = 0x1021


def _saved_states() -> int | None:
    """The kernel's answer to ARCH_GET_XCOMP_SUPP: the XSAVE features it supports for a
    process (what it enabled in XCR0)."""
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "AMD64"):
        return None
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        mask = ctypes.c_uint64(0)
        if libc.syscall(_SYS_ARCH_PRCTL, _ARCH_GET_XCOMP_SUPP, ctypes.byref(mask)) == 0:
            return int(mask.value)
    return None


@dataclass(frozen=True)
class Build:
    """The installed llama.cpp: its library folder, and the CPU variants in it (empty for
    a build that predates the portable one: a single library compiled for the machine
    that built it, with no say over what it uses)."""

    lib_dir: Path
    variants: dict[str, Path]

    @property
    def portable(self) -> bool:
        """One CPU library per instruction-set level (GGML_CPU_ALL_VARIANTS), any architecture."""
        return bool(self.variants)

    @property
    def x86(self) -> bool:
        """The x86 variants, which this module chooses among (elsewhere ggml chooses)."""
        return BASELINE in self.variants

    def fingerprint(self) -> str:
        """Changes whenever llama.cpp is installed again (the start check runs anew)."""
        parts = []
        for path in sorted(self.lib_dir.glob("lib*.so*")):
            with contextlib.suppress(OSError):
                stat = path.stat()
                parts.append(f"{path.name}:{stat.st_size}:{stat.st_mtime_ns}")
        return hashlib.sha256("|".join(parts).encode()).hexdigest()[:32]


_PREFIX, _SUFFIX = "libggml-cpu-", ".so"


def installed_build() -> Build | None:
    """The llama.cpp build of the installed `llama_cpp` package, or None without one."""
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        lib_dir = Path(folder) / "lib"
        if lib_dir.is_dir():
            variants = {
                path.name[len(_PREFIX):-len(_SUFFIX)]: path
                for path in lib_dir.glob(f"{_PREFIX}*{_SUFFIX}") if path.is_file()
            }
            return Build(lib_dir, variants)
    return None
