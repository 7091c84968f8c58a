"""
What the server's CPU code may assume of the host's processor: one named baseline per
machine architecture, never `-march=native` (why: docs/gpu-hosts.md, "What the CPU code
assumes").
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import PreflightError

# Instruction-set options of ggml's CMake (ggml/CMakeLists.txt) that the baselines set.
_X86_EXTENSIONS = ("SSE42", "AVX", "AVX2", "FMA", "F16C", "BMI2")
_X86_OFF = ("AVX_VNNI", "AVX512", "AVX512_VBMI", "AVX512_VNNI", "AVX512_BF16",
            "AMX_TILE", "AMX_INT8", "AMX_BF16")


@dataclass(frozen=True)
class CpuBaseline:
    """A named instruction-set level the server's CPU code is compiled for."""

    name: str
    machine: str  # `uname -m`
    needs_flags: tuple[str, ...]  # /proc/cpuinfo flags the compiled code executes
    cmake_flags: tuple[str, ...]

    def missing(self, cpu_flags: frozenset[str]) -> list[str]:
        """The baseline's flags the host's CPU does not have (empty: it runs here)."""
        return [f for f in self.needs_flags if f not in cpu_flags]


X86_64_V3 = CpuBaseline(
    name="x86-64-v3", machine="x86_64",
    needs_flags=("sse4_2", "avx", "avx2", "fma", "f16c", "bmi2"),
    cmake_flags=("-DGGML_NATIVE=OFF", *(f"-DGGML_{x}=ON" for x in _X86_EXTENSIONS),
                 *(f"-DGGML_{x}=OFF" for x in _X86_OFF)),
)
# 64-bit Arm: Armv8.0-A with Advanced SIMD, what every aarch64 Linux CPU has.
ARMV8_A = CpuBaseline(
    name="armv8-a", machine="aarch64", needs_flags=("asimd",),
    cmake_flags=("-DGGML_NATIVE=OFF", "-DGGML_CPU_ARM_ARCH=armv8-a"),
)
BASELINES = {b.machine: b for b in (X86_64_V3, ARMV8_A)}
# `uname -m` spellings of the same architectures
_ALIASES = {"amd64": "x86_64", "arm64": "aarch64"}


def baseline_or_refuse(machine: str) -> CpuBaseline:
    """The baseline for a `uname -m`, or the refusal of an architecture the kit cannot build
    for (preflight's and the build's)."""
    cpu = BASELINES.get(_ALIASES.get(machine, machine))
    if cpu is None:
        raise PreflightError("the host's CPU architecture", f"is {machine or 'unknown'}: the "
                             "kit builds the server for x86_64 and aarch64 only",
                             "deploy to an x86_64 or aarch64 host", lead=" ")
    return cpu
