"""
Server build inputs: GPU arch logic, cmake flags, the image tag and the rendered Dockerfile.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass

from .config import HostConfig
from .container import IMAGE
from .cpu import X86_64_V3, CpuBaseline, baseline_or_refuse
from .cudacompat import image_ubuntu
from .hostdata import BaseImages
from .render import render

DEFAULT_CUDA_ARCH = "89"  # RTX 40xx (Ada), the reference card
# Built from one cmake build and installed side by side (image and native mode): the server,
# and llama-bench, the engine baseline that `beekeeper verify --suite engine` runs.
TARGETS = ("llama-server", "llama-bench")


def cuda_arch_from_compute_cap(compute_cap: str) -> str:
    """'8.9' -> '89', '12.0' -> '120' (CMAKE_CUDA_ARCHITECTURES spelling)."""
    m = re.fullmatch(r"\s*(\d+)\.(\d+)\s*", compute_cap)
    if not m:
        raise ValueError(f"not a compute capability: {compute_cap!r}")
    return f"{int(m.group(1))}{int(m.group(2))}"


def card_archs(compute_caps: Iterable[str | None]) -> list[str]:
    """The archs of the cards (their compute capabilities, unknown ones left out), each once,
    in number order: ['90', '100'], not ['100', '90']."""
    return sorted({cuda_arch_from_compute_cap(c) for c in compute_caps if c}, key=int)


def arch_runs_on(arch_list: str, compute_cap: str) -> bool:
    """Whether an image built for `arch_list` has kernels the GPU can run.

    SASS for sm_XY runs on the same major with minor >= Y, and so does an 'f' (family-
    specific) arch; an 'a' (architecture-specific) one runs only on that exact arch. PTX
    (virtual) archs are not used by the kit. Host data refuses any other suffix.
    """
    gpu = cuda_arch_from_compute_cap(compute_cap)
    g_major, g_minor = int(gpu[:-1]), int(gpu[-1])
    for arch in arch_list.split(";"):
        exact = arch.endswith("a")
        digits = arch.rstrip("af")
        a_major, a_minor = int(digits[:-1]), int(digits[-1])
        if a_major == g_major and (a_minor == g_minor if exact else a_minor <= g_minor):
            return True
    return False


def caps_run_on(arch_list: str) -> tuple[str, ...]:
    """Every compute capability ('9.0') a build for `arch_list` runs on: arch_runs_on's
    answer over the majors the list names, minors 0 to 9 (what a pod's start script
    compares its card with)."""
    majors = sorted({int(a.rstrip("af")[:-1]) for a in arch_list.split(";")})
    return tuple(cap for cap in (f"{major}.{minor}" for major in majors for minor in range(10))
                 if arch_runs_on(arch_list, cap))


# Memory per compile job: ~1.7x the peaks measured on an H200 box (nvcc 0.90 GiB, cc1plus
# 0.75 GiB: benchmarks/h200/2026-11-30-build/), for other releases and missed peaks.
GIB_PER_CUDA_JOB = 1.5
GIB_PER_CPU_JOB = 1.0


def build_jobs(mem_total_bytes: int, nproc: int, cuda: bool) -> int:
    """Parallel compile jobs: one per core, bounded by memory so no job is OOM-killed."""
    per_job = GIB_PER_CUDA_JOB if cuda else GIB_PER_CPU_JOB
    by_mem = int(mem_total_bytes / (per_job * 2**30)) if mem_total_bytes else nproc
    return max(1, min(nproc, by_mem))


# Code of llama.cpp's server the kit never runs per token, compiled at a lower -O level in
# the CPU image (docs/gpu-hosts.md, "Build flags and jobs", with the measurements). CMake
# includes the file after the top project() call (CMAKE_PROJECT_INCLUDE) and applies it once
# every target is declared.
COLD_CODE = {  # -O level: (targets, {the directory whose CMakeLists.txt lists them: files})
    "-O0": (("mtmd",), {}),
    "-O1": (("cpp-httplib", "llama-server-impl"),
            {"common": ("arg.cpp", "console.cpp", "download.cpp", "hf-cache.cpp", "preset.cpp",
                        "jinja/caps.cpp", "jinja/lexer.cpp", "jinja/parser.cpp",
                        "jinja/runtime.cpp", "jinja/string.cpp", "jinja/value.cpp"),
             "tools/server": ("server-tools.cpp", "server-mcp.cpp", "server-schema.cpp")}),
}
# Cold targets compiled as unity sources (CMake's UNITY_BUILD; same doc). The files named are
# kept out (mtmd-helper refuses mtmd's internal headers; common's json.cpp specializes
# templates other files instantiate first); CMake keeps out those with options of their own.
# Where the unity build fails, the Dockerfile builds again one file each (UNITY_OFF set).
UNITY = {"mtmd": ("mtmd-helper.cpp", "mtmd-helper-gen.cpp"), "llama-common": ("json.cpp",),
         "server-context": (), "llama-server-impl": ()}
UNITY_OFF = "BEEKEEPER_ONE_FILE_EACH"  # a CMake variable: set, the file builds no unity source
COLD_CODE_CMAKE = "/opt/beekeeper-cold-code.cmake"  # in the image's build stage


def cold_code_cmake() -> list[str]:
    """The lines of the CMake file that lowers COLD_CODE's -O levels and builds UNITY's
    targets as unity sources unless UNITY_OFF is set (CMAKE_PROJECT_INCLUDE)."""
    top = "${CMAKE_SOURCE_DIR}"
    lines = ["include_guard(GLOBAL)", "function(beekeeper_cold_code)"]
    for level, (targets, files) in COLD_CODE.items():
        lines += [f"  foreach(t {' '.join(targets)})", "    if(TARGET ${t})",
                  f"      set_property(TARGET ${{t}} APPEND PROPERTY COMPILE_OPTIONS {level})",
                  "    endif()", "  endforeach()"]
        for d, names in files.items():
            lines += [f"  foreach(f {' '.join(names)})", f'    if(EXISTS "{top}/{d}/${{f}}")',
                      f'      set_source_files_properties("{top}/{d}/${{f}}" DIRECTORY '
                      f'"{top}/{d}" PROPERTIES COMPILE_OPTIONS {level})',
                      "    endif()", "  endforeach()"]
    lines += [f"  if(NOT {UNITY_OFF})"]
    for target, kept_out in UNITY.items():
        lines += [f"  if(TARGET {target})",
                  f"    set_property(TARGET {target} PROPERTY UNITY_BUILD ON)"]
        if kept_out:
            lines += [f"    get_target_property(dir {target} SOURCE_DIR)",
                      f"    foreach(f {' '.join(kept_out)})",
                      '      set_source_files_properties("${dir}/${f}" DIRECTORY "${dir}" '
                      "PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)",
                      "    endforeach()"]
        lines += ["  endif()"]
    lines += ["  endif()", "endfunction()",
              f'cmake_language(DEFER DIRECTORY "{top}" CALL beekeeper_cold_code)']
    return lines


@dataclass(frozen=True)
class BuildSpec:
    """Everything that decides what binary the server image contains."""

    ref: str  # host data source.ref: the source tree built (what it is, not where from)
    backend: str  # "cuda" | "cpu"
    cuda_version: str
    cuda_arch: str | None
    fa_all_quants: bool
    build_base: str
    runtime_base: str
    jobs: int  # parallel compile jobs: how fast it builds, not what (not in the tag)
    image_repo: str
    webui: bool = False
    cpu: CpuBaseline = X86_64_V3  # what the CPU code may assume of the host (core/cpu.py)

    @property
    def cmake_flags(self) -> list[str]:
        flags = [
            "-DCMAKE_BUILD_TYPE=Release",
            "-DBUILD_SHARED_LIBS=OFF",
            "-DGGML_OPENMP=OFF",
            "-DLLAMA_BUILD_TESTS=OFF",
            "-DLLAMA_BUILD_EXAMPLES=OFF",
            "-DLLAMA_BUILD_SERVER=ON",
            "-DLLAMA_OPENSSL=OFF",
            "-DLLAMA_USE_PREBUILT_UI=OFF",
            # the kit serves the API; beellama's embedded web UI only when asked for
            f"-DLLAMA_BUILD_WEBUI={'ON' if self.webui else 'OFF'}",
        ]
        flags += self.cpu.cmake_flags
        if self.backend == "cuda":
            flags += [
                "-DGGML_CUDA=ON",
                f"-DCMAKE_CUDA_ARCHITECTURES={self.cuda_arch}",
                "-DGGML_CUDA_FA=ON",
            ]
            if self.fa_all_quants:
                flags.append("-DGGML_CUDA_FA_ALL_QUANTS=ON")
        return flags

    @property
    def cold_code(self) -> list[str]:
        """The CMake file of COLD_CODE and UNITY, for the CPU image's build only; empty: none."""
        return cold_code_cmake() if self.backend == "cpu" else []

    @property
    def variant(self) -> str:
        if self.backend == "cuda":
            major_minor = ".".join(self.cuda_version.split(".")[:2])
            return f"cuda{major_minor}-sm{(self.cuda_arch or '').replace(';', '-')}"
        return f"cpu-{self.cpu.name}"

    def dockerfile(self) -> str:
        return render("Dockerfile.j2", spec=self, targets=TARGETS,
                      image=IMAGE, cold_code_cmake=COLD_CODE_CMAKE, unity_off=UNITY_OFF)

    def name(self) -> str:
        """<ref>-<cuda|cpu>-<arch>-<the rendered Dockerfile's hash>: any changed input of the
        binary is a new name (the compile jobs are a build argument, not an input); the image
        is tagged with it, a native build's folder and the build logs are named after it."""
        digest = hashlib.sha256(self.dockerfile().encode()).hexdigest()[:8]
        return f"{build_prefix(self.ref)}{self.variant}-{digest}"

    def tag(self) -> str:
        return f"{self.image_repo}:{self.name()}"


def build_prefix(ref: str) -> str:
    """How every build name from source `ref` starts (BuildSpec.name): what tells a build's
    source tree and the builds of another host's ref when a cleanup keeps them."""
    return f"{ref[:12]}-"


def build_spec(cfg: HostConfig, compute_cap: str | None, cpus: int = 1,
               mem_total_bytes: int = 0, machine: str = "x86_64", *, cuda_version: str,
               cuda_arch: str | None) -> BuildSpec:
    """The build for this host: `cpus` and `mem_total_bytes` size the jobs, `machine` picks
    the CPU baseline, `compute_cap` the arch where none is given."""
    cpu = baseline_or_refuse(machine)
    profile = cfg.service.profile
    backend = profile.backend
    arch = None
    if backend == "cuda":
        arch = cuda_arch or (
            cuda_arch_from_compute_cap(compute_cap) if compute_cap else DEFAULT_CUDA_ARCH
        )
    ubuntu = image_ubuntu(cuda_version)
    default_build = (f"nvidia/cuda:{cuda_version}-devel-{ubuntu}" if backend == "cuda"
                     else "debian:bookworm")
    default_runtime = (f"nvidia/cuda:{cuda_version}-runtime-{ubuntu}" if backend == "cuda"
                       else "debian:bookworm-slim")
    base = cfg.data.base_images or BaseImages()
    return BuildSpec(
        ref=cfg.source.ref,
        backend=backend,
        cuda_version=cuda_version,
        cuda_arch=arch,
        # only where some K/V pair differs: then an f16 and a turbo4 profile share one image
        fa_all_quants=any(s.profile.server.needs_fa_all_quants for s in cfg.services),
        build_base=base.build or default_build,
        runtime_base=base.runtime or default_runtime,
        jobs=cfg.data.build_jobs or build_jobs(mem_total_bytes, cpus, backend == "cuda"),
        image_repo=cfg.image_repo,
        webui=cfg.data.server_webui,
        cpu=cpu,
    )
