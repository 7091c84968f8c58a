"""
No dead ends (issue 33, points 3 and 4): the cards CUDA 13 cannot serve told up front, the
forward-compatibility rule as NVIDIA's guide draws it, hosts of two kinds of card, cuda_arch
suffixes CUDA knows, and an error that is not the kit's own failing one host alone.
deploy.py runs on canned facts (tests/unit/harness.py); the cards' values are typed from
nvidia-smi's fields (names, compute capability as the CUDA docs list them).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from beekeeper.core import cudacompat
from beekeeper.core.config import load_host_config
from beekeeper.core.errors import BeekeeperError, ConfigError, PreflightError
from beekeeper.facts.gpu import GpuCard, NvidiaSmiInfo

from .harness import DEFAULTS, NATIVE, PCI_GTX1080, facts, names, run_deploy, run_deploy_hosts


def smi(driver: str, cuda: str, brand: str, *cards: tuple[str, str, int]) -> NvidiaSmiInfo:
    return NvidiaSmiInfo(path="/usr/bin/nvidia-smi", cuda_version=cuda, driver_version=driver,
                         driver_branch=int(driver.split(".")[0]), brand=brand,
                         gpus=tuple(GpuCard(name=n, driver_version=driver, compute_cap=c,
                                            memory_total_mib=m) for n, c, m in cards))


GTX1080_580 = smi("580.95.05", "13.0", "GeForce", ("NVIDIA GeForce GTX 1080", "6.1", 8192))
V100_570 = smi("570.172.08", "12.8", "Tesla", ("Tesla V100-PCIE-16GB", "7.0", 16384))
NO_DRIVER = {"Wsl": NATIVE, "GpuInfo": None, "PciListing": PCI_GTX1080}


# ------------------------------------------------------------------ Pascal and Volta

def test_a_pascal_card_is_refused_naming_it_the_580_branch_and_cuda_12():
    with pytest.raises(PreflightError) as e:
        run_deploy(DEFAULTS, facts(Wsl=NATIVE, GpuInfo=GTX1080_580))
    msg = str(e.value)
    assert "GTX 1080 is compute capability 6.1" in msg and "CUDA 13 dropped" in msg
    assert "driver_branch = 580" in msg and "cuda_version = '12.9.1'" in msg, msg


def test_upgrade_driver_never_replaces_a_working_driver_with_one_that_drops_the_card():
    with pytest.raises(PreflightError, match="CUDA 13 dropped"):
        run_deploy({**DEFAULTS, "upgrade_driver": True},
                   facts(Wsl=NATIVE, GpuInfo=V100_570,
                         LinuxDriverPackages=["nvidia-driver-570", "libnvidia-compute-570"]))
    # CUDA 12 asked for, but a branch after 580: refused too, before any purge
    with pytest.raises(PreflightError, match=r"branch 595 drops Maxwell, Pascal and Volta"):
        run_deploy({**DEFAULTS, "upgrade_driver": True, "cuda_version": "12.9.1",
                    "driver_branch": 595},
                   facts(Wsl=NATIVE, GpuInfo=V100_570, LinuxDriverPackages=["nvidia-driver-570"]))


def test_with_no_driver_a_pre_turing_card_gets_the_cuda_12_way_which_installs_580():
    with pytest.raises(PreflightError, match=r"older than Turing.*CUDA 13 dropped.*"
                                             r"driver_branch = 580"):
        run_deploy({**DEFAULTS, "driver_flavour": "proprietary"}, facts(**NO_DRIVER))
    ops = run_deploy({**DEFAULTS, "driver_flavour": "proprietary", "cuda_version": "12.9.1",
                      "driver_branch": 580}, facts(**NO_DRIVER))
    assert "Install the NVIDIA driver, branch 580 (cuda-drivers)" in names(ops)


def test_the_way_offered_runs_on_a_working_580_driver():
    ops = run_deploy({**DEFAULTS, "cuda_version": "12.9.1"},
                     facts(Wsl=NATIVE, GpuInfo=GTX1080_580))
    assert any(n.startswith("Build server image") and "cuda12.9-sm61-" in n for n in names(ops))


# ------------------------------------------------------------------ forward compatibility

def test_forward_compatibility_is_for_data_center_brands_only():
    rule = cudacompat.require_cuda("13.2.1")
    for brand, runs in [("NVIDIA", True), ("Tesla", True), ("Quadro", False),
                        ("Quadro RTX", False), ("NVIDIA RTX", False), ("GeForce", False),
                        (None, False)]:
        token = cudacompat.forward_compat_brand(brand)
        assert cudacompat.require_accepts(rule, "13.0", "580.95.05", token) is runs, brand


def test_a_workstation_card_on_580_is_refused_before_the_build():
    a6000 = smi("580.95.05", "13.0", "NVIDIA RTX", ("NVIDIA RTX A6000", "8.6", 49140))
    with pytest.raises(PreflightError, match="older than the image's CUDA 13.2.1"):
        run_deploy(DEFAULTS, facts(Wsl=NATIVE, GpuInfo=a6000))
    h200 = smi("580.95.05", "13.0", "NVIDIA", ("NVIDIA H200", "9.0", 143771))
    assert any(n.startswith("Build server image") for n in
               names(run_deploy(DEFAULTS, facts(Wsl=NATIVE, GpuInfo=h200))))


# ------------------------------------------------------------------ two kinds of card

MIXED = smi("595.58.03", "13.2", "GeForce", ("NVIDIA GeForce RTX 4090", "8.9", 24564),
            ("NVIDIA GeForce RTX 3090", "8.6", 24576))


def test_a_host_of_a_4090_and_a_3090_builds_for_both_archs():
    ops = run_deploy(DEFAULTS, facts(Wsl=NATIVE, GpuInfo=MIXED))
    build = next(n for n in names(ops) if n.startswith("Build server image"))
    assert "-sm86-89-" in build, build


def test_an_arch_override_must_run_on_every_card():
    with pytest.raises(PreflightError, match="no kernels for the NVIDIA GeForce RTX 3090"):
        run_deploy({**DEFAULTS, "cuda_arch": "89"}, facts(Wsl=NATIVE, GpuInfo=MIXED))


def test_the_vram_plan_must_fit_the_smallest_card():
    small = smi("595.58.03", "13.2", "GeForce", ("NVIDIA GeForce RTX 4090", "8.9", 24564),
                ("NVIDIA GeForce RTX 3060 Ti", "8.6", 8192))
    with pytest.raises(PreflightError, match="RTX 3060 Ti's 8192 MiB"):
        run_deploy(DEFAULTS, facts(Wsl=NATIVE, GpuInfo=small))


# ------------------------------------------------------------------ cuda_arch suffixes

CPU = {"profile": "cpu-tiny", "source": {"git": "https://x/y", "ref": "a" * 40}}


@pytest.mark.parametrize("arch", ["120f", "100f;89", "90a", "89;120"])
def test_cudas_own_arch_spellings_pass_host_data(arch):
    assert load_host_config({**CPU, "cuda_arch": arch}).data.cuda_arch == arch


@pytest.mark.parametrize("arch,words", [("89x", "no CUDA arch suffix"),
                                        ("86a", "sm_86 has no 'a' variant"),
                                        ("75f;89", "sm_75 has no 'f' variant")])
def test_a_suffix_cuda_does_not_know_is_one_line_at_load(arch, words):
    with pytest.raises(ConfigError, match=f"host data `cuda_arch`: .*{words}"):
        load_host_config({**CPU, "cuda_arch": arch})


def test_a_family_arch_runs_on_its_family_and_deploys():
    from beekeeper.core.build import arch_runs_on

    assert arch_runs_on("120f", "12.1") and arch_runs_on("100f", "10.3")
    assert not arch_runs_on("120f", "10.0") and not arch_runs_on("120a", "12.1")
    rtx5090 = smi("595.58.03", "13.2", "GeForce", ("NVIDIA GeForce RTX 5090", "12.0", 32607))
    ops = run_deploy({**DEFAULTS, "cuda_arch": "120f"}, facts(Wsl=NATIVE, GpuInfo=rtx5090))
    assert any("-sm120f-" in n for n in names(ops))


# ------------------------------------------------------------------ not the kit's own error

def test_an_error_that_is_not_the_kits_fails_that_host_alone_as_a_bug(capsys):
    good = facts()
    odd = facts(GpuInfo=replace(good["GpuInfo"], gpus=(replace(
        good["GpuInfo"].gpus[0], compute_cap="8.9.1"),)))  # a value no parser expects
    failed, ops = run_deploy_hosts({"bad": (DEFAULTS, odd), "good": (DEFAULTS, good)})
    assert failed == {"bad"}
    assert any(n.startswith("Build server image") for n in ops["good"])
    err = capsys.readouterr().err
    line = next(x for x in err.splitlines() if x.startswith("host bad:"))
    assert "ValueError" in line and "this is a bug in beekeeper" in line, line


def test_the_last_host_left_raises_the_bugs_one_line():
    odd = facts(GpuInfo=replace(facts()["GpuInfo"], gpus=(replace(
        facts()["GpuInfo"].gpus[0], compute_cap="x"),)))
    with pytest.raises(BeekeeperError, match="this is a bug in beekeeper"):
        run_deploy(DEFAULTS, odd)
