"""
What the server's CPU code may assume of the host's processor: one named baseline per
machine architecture, built in explicitly, never `-march=native`.

Why not the builder's own CPU (`GGML_NATIVE=ON`, what the kit did before):

- An image built with `-march=native` on one host is copied to others (the tests copy the
  first sandbox host's image to the second; a user moves a box's image to the next box). On
  a CPU without the builder's instructions it dies with SIGILL.
- On an AMX Xeon (`amx_tile amx_int8` in /proc/cpuinfo) a native build compiles ggml's AMX
  matmul, the loader repacks Q4_K/Q8_0 weights into the AMX buffer type, and the first
  compute dies: the kit's demo hit it on a 2-core CI-class Xeon (`llama-server` exit 139
  right after `threadpool init`; `--no-repack`, which skips the extra buffer types, served).
  The cause, found on such a machine (benchmarks/cpu/2026-12-02-amx-tilecfg/): Debian 12's
  GCC 12.2 defines `_tile_loadconfig` as an asm that reads 8 bytes, so it drops the stores
  of the tile rows and columns in ggml's 64-byte configuration as dead, and `ldtilecfg`
  loads stack contents: #GP (SIGSEGV) or an unconfigured tile (SIGILL at `tilezero`).
  GCC 13 and newer (and Ubuntu's 12.4) store it all; ggml-org/llama.cpp issue 20824 and
  stanfordnlp/dspy PR 10079 report the crash on "some machines". The build stage's
  compiler must not decide whether the server runs.

So x86-64 builds target x86-64-v3 (AVX2, FMA, F16C, BMI2: every x86-64 CPU since Intel
Haswell, 2013, and AMD Zen, 2017) with AVX-512 and AMX off. The CPU image and the CPU part
of the CUDA image are then the same binary on every host, the image tag names the baseline
(`cpu-x86-64-v3`), and preflight refuses, before any change, a host whose /proc/cpuinfo
lacks one of the baseline's flags. The CPU-only server loses AVX-512 and AMX matmul speed on
hosts that have them; the GPU profiles run their layers on the GPU, where this costs nothing.
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
    """
    A named instruction-set level the server's CPU code is compiled for:

    .. code:: python

        CpuBaseline(name="x86-64-v3", machine="x86_64",
                    needs_flags=("sse4_2", "avx", "avx2", "fma", "f16c", "bmi2"), ...)
    """

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


def baseline_for(machine: str) -> CpuBaseline | None:
    """The baseline for a `uname -m`; None for an architecture the kit has no build for."""
    return BASELINES.get(_ALIASES.get(machine, machine))


def baseline_or_refuse(machine: str) -> CpuBaseline:
    """The baseline for a `uname -m`, or the one-line refusal of an architecture the kit has
    no build for (preflight's, before any change, and the build's, from the same words)."""
    cpu = baseline_for(machine)
    if cpu is None:
        raise PreflightError("the host's CPU architecture", f"is {machine or 'unknown'}: the "
                             "kit builds the server for x86_64 and aarch64 only",
                             "deploy to an x86_64 or aarch64 host", lead=" ")
    return cpu
