"""
What the server's CPU code assumes of a host (beekeeper/core/cpu.py), how the image tag names
the binary and only the binary, and preflight's refusal of a CPU the build cannot run on.
"""

from __future__ import annotations

import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from beekeeper.core.build import BuildSpec
from beekeeper.core.config import load_host_config
from beekeeper.core.cpu import ARMV8_A, X86_64_V3, baseline_or_refuse
from beekeeper.core.errors import PreflightError
from beekeeper.facts.host import BuildResources, Resources, parse_resources

from .harness import DEFAULTS, facts, requested_build, run_deploy

DATA = Path(__file__).parent / "data"
CPU = {"profile": "cpu-tiny", "source": {"path": "/srv/s.tar.gz", "ref": "lcp0.3.36"}}
GPU = DEFAULTS  # group_data/all.py: the reference box


def _fact_output(cpuinfo: str, machine: str = "x86_64") -> list[str]:
    """What BuildResources' command prints on a host with this /proc/cpuinfo."""
    r = subprocess.run(["sh", "-c", BuildResources().command().replace("/proc/cpuinfo", "$1")
                        .replace("uname -m", f"echo {machine}"), "sh", cpuinfo],
                       capture_output=True, text=True, check=True)
    return r.stdout.splitlines()


def test_an_amx_xeon_and_this_machine_both_run_the_baseline():
    # /proc/cpuinfo of the H200 box's 16-core Xeon (AMX), recorded by tests/gpu/cpu_amx.sh
    xeon = parse_resources(_fact_output(str(DATA / "cpuinfo-xeon-amx.txt")))
    assert {"amx_tile", "amx_int8", "avx512f"} <= xeon.cpu_flags
    assert xeon.machine == "x86_64" and "Xeon" in xeon.cpu_model
    assert X86_64_V3.missing(xeon.cpu_flags) == []
    here = BuildResources().process(
        subprocess.run(["sh", "-c", BuildResources().command()], capture_output=True,
                       text=True).stdout.splitlines())
    assert here.cpus >= 1 and here.mem_total_bytes > 2**30 and here.machine
    if here.machine == "x86_64":  # the tests build and run the x86-64-v3 image here
        assert X86_64_V3.missing(here.cpu_flags) == []


def test_the_baseline_compiles_no_avx512_and_no_amx_for_cpu_and_cuda_images():
    for data, cap in ((CPU, None), (GPU, "8.9")):
        flags = requested_build(load_host_config(data), cap).cmake_flags
        assert "-DGGML_NATIVE=OFF" in flags and "-DGGML_NATIVE=ON" not in flags
        assert "-DGGML_AVX2=ON" in flags and "-DGGML_FMA=ON" in flags
        on = [f for f in flags if f.endswith("=ON")]
        assert not [f for f in on if "AVX512" in f or "AMX" in f or "VNNI" in f], on
        assert flags.count("-DGGML_NATIVE=OFF") == 1
    spec = requested_build(load_host_config(CPU), None)
    assert spec.variant == "cpu-x86-64-v3" and "-cpu-x86-64-v3-" in spec.tag()
    text = spec.dockerfile()
    assert "io.beekeeper.cpu-baseline=x86-64-v3" in text and "GGML_NATIVE=ON" not in text


def test_arm_hosts_get_their_own_baseline_and_other_archs_are_refused():
    assert baseline_or_refuse("aarch64") is ARMV8_A and baseline_or_refuse("arm64") is ARMV8_A
    assert baseline_or_refuse("amd64") is X86_64_V3
    arm = requested_build(load_host_config(CPU), None, machine="aarch64")
    assert arm.variant == "cpu-armv8-a" and "-DGGML_CPU_ARM_ARCH=armv8-a" in arm.cmake_flags
    assert not any("AVX" in f for f in arm.cmake_flags)
    with pytest.raises(PreflightError, match="riscv64"):
        requested_build(load_host_config(CPU), None, machine="riscv64")


def test_an_architecture_without_a_build_is_refused_alike_by_preflight_and_the_build():
    """One refusal, one line naming the architecture, before any change: preflight's (from
    BuildResources) and build_spec's (its other callers) say the same."""
    said = ("the host's CPU architecture is riscv64: the kit builds the server for x86_64 "
            "and aarch64 only; fix: deploy to an x86_64 or aarch64 host")
    with pytest.raises(PreflightError) as built:
        requested_build(load_host_config(CPU), None, machine="riscv64")
    riscv = Resources(cpus=4, mem_total_bytes=16 * 2**30, machine="riscv64",
                      cpu_flags=frozenset(), cpu_model="")
    with pytest.raises(PreflightError) as checked:
        run_deploy(DEFAULTS, facts(BuildResources=riscv))
    assert str(built.value) == said and built.value.subject == "the host's CPU architecture"
    assert str(checked.value).endswith(f": {said}")  # preflight's names the host before it
    assert checked.value.subject == built.value.subject
    # no `uname -m` answer: named "unknown", not left blank
    with pytest.raises(PreflightError, match=r"architecture is unknown: the kit builds"):
        run_deploy(DEFAULTS, facts(BuildResources=replace(riscv, machine="")))


def test_a_cpu_without_avx2_is_refused_before_any_change_naming_what_it_lacks():
    # an Ivy Bridge Xeon's flags (AVX, no AVX2/FMA/BMI2), as a VM without `-cpu host` shows
    old = Resources(cpus=4, mem_total_bytes=16 * 2**30, machine="x86_64",
                    cpu_flags=frozenset("fpu sse4_2 avx f16c popcnt".split()),
                    cpu_model="Intel(R) Xeon(R) CPU E5-2670 v2 @ 2.50GHz")
    with pytest.raises(PreflightError) as e:
        run_deploy(DEFAULTS, facts(BuildResources=old))
    msg = str(e.value)
    assert "E5-2670 v2" in msg and "avx2, fma, bmi2" in msg and "x86-64-v3" in msg
    assert "\n" not in msg


def test_the_build_jobs_are_a_build_argument_not_part_of_the_tag():
    small = requested_build(load_host_config(CPU), None, 2, 4 * 2**30)
    big = requested_build(load_host_config(CPU), None, 16, 64 * 2**30)
    assert (small.jobs, big.jobs) == (2, 16)
    assert small.dockerfile() == big.dockerfile() and small.tag() == big.tag()
    assert "BUILD_JOBS=1" in small.dockerfile()  # the default: a build without the argument
    ops = run_deploy(DEFAULTS, facts())
    builds = [c for n, cmds in ops if n.startswith("Build server image") for c in cmds]
    assert len(builds) == 1 and "--build-arg BUILD_JOBS=16 " in builds[0], builds


def _changed(spec: BuildSpec) -> list[BuildSpec]:
    """Each input of the binary changed alone."""
    return [replace(spec, cuda_arch="120"), replace(spec, cuda_version="13.1.0"),
            replace(spec, fa_all_quants=True), replace(spec, webui=True),
            replace(spec, build_base="nvidia/cuda:13.2.1-devel-ubuntu22.04"),
            replace(spec, runtime_base="nvidia/cuda:13.2.1-runtime-ubuntu22.04"),
            replace(spec, ref="b" * 40), replace(spec, cpu=ARMV8_A)]


def test_every_input_of_the_binary_changes_the_tag_and_only_those(monkeypatch):
    spec = requested_build(load_host_config(GPU), "8.9", 16, 64 * 2**30)
    tags = [s.tag() for s in _changed(spec)]
    assert spec.tag() not in tags and len(set(tags)) == len(tags)
    assert replace(spec, jobs=3).tag() == spec.tag()
    # the Dockerfile's body alone: a change in the template that no field shows
    before = spec.tag()
    body = BuildSpec.dockerfile
    monkeypatch.setattr(BuildSpec, "dockerfile", lambda self: body(self) + "RUN true\n")
    assert spec.tag() != before
