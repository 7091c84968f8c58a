"""
The CUDA release a build uses compiles for every arch it targets (driver_preflight.
check_cuda_builds, core/toolkit.cannot_build), refused before any change instead of by nvcc
minutes into the build ("Unsupported gpu architecture 'compute_120'"): the key that chose the
release (cuda_version, cuda_follows_driver) or the arch (cuda_arch) named, and its fix.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from beekeeper.core.errors import PreflightError
from beekeeper.core.toolkit import FIRST_CUDA, cannot_build, host_toolkit
from beekeeper.facts.gpu import GpuCard
from beekeeper.tasks import driver_preflight as dp

from .harness import (
    DEFAULTS,
    H200_CARD,
    NATIVE,
    PCI_RTX4090,
    POD_DATA,
    POD_TOOLS,
    RTX4090,
    card,
    cfg,
    facts,
    pod,
    run_deploy,
    smi,
)

RTX5090 = card(name="NVIDIA GeForce RTX 5090", cap="12.0", mem=32607)
ON_5090 = replace(RTX4090, gpus=(replace(RTX5090, driver_version="596.21"),))


def refusal(data: dict, host: dict) -> PreflightError:
    with pytest.raises(PreflightError) as e:
        run_deploy({**DEFAULTS, **data}, host)
    return e.value


def test_a_cuda_version_older_than_the_cards_arch_is_refused_before_the_build():
    e = refusal({"cuda_version": "12.4.1"}, facts(GpuInfo=ON_5090))
    assert str(e) == (
        "host canned: host data `cuda_version`: '12.4.1' cannot build for the NVIDIA GeForce "
        "RTX 5090 (sm_120 needs CUDA 12.8 or newer); fix: set cuda_version = '13.2.1' or newer "
        "(or remove it: the kit's default)")


def test_an_arch_cuda_13_dropped_given_in_cuda_arch_is_refused_naming_cuda_arch():
    # an RTX 4090 runs the '61;89' build (its own arch is there): nothing else refuses it
    e = refusal({"cuda_arch": "61;89"}, facts())
    assert str(e) == (
        "host canned: host data `cuda_arch`: '61;89' asks for sm_61, which CUDA 13.2.1 "
        "(cuda_version, the kit's default) cannot build (CUDA 13 dropped architectures before "
        "sm_75); fix: remove 61 from cuda_arch, or set cuda_version = '12.9.1' (CUDA 12 is the "
        "last that builds for sm_61)")
    # alone, before the driver is installed (no card to judge it against yet)
    with pytest.raises(PreflightError) as one:
        dp.check_cuda_builds(cfg(cuda_arch="61"), None, None)
    assert one.value.subject == "host data `cuda_arch`"
    assert one.value.fix == \
        "set cuda_version = '12.9.1' (CUDA 12 is the last that builds for sm_61)"
    # CUDA 12 still builds it
    dp.check_cuda_builds(cfg(cuda_arch="61;89", cuda_version="12.9.1"), None, None)
    # a CUDA 13 release the host data chose, or the driver did, is named as such
    with pytest.raises(PreflightError) as e:
        dp.check_cuda_builds(cfg(cuda_arch="70;89", cuda_version="13.0.2"), None, None)
    assert e.value.problem.startswith("'70;89' asks for sm_70, which CUDA 13.0.2 "
                                      "(cuda_version) cannot build")
    with pytest.raises(PreflightError) as e:
        dp.check_cuda_builds(cfg(cuda_arch="70"), None, "13.0.2")
    assert (e.value.subject, e.value.problem.split(" cannot")[0]) == (
        "host data `cuda_arch`", "'70' asks for sm_70, which CUDA 13.0.2 (cuda_follows_driver: "
        "the driver's)")


def test_an_explicit_arch_too_new_for_the_release_names_cuda_version():
    with pytest.raises(PreflightError) as e:
        dp.check_cuda_builds(cfg(cuda_arch="120", cuda_version="12.6.3"), smi(), None)
    assert (e.value.subject, e.value.problem) == (
        "host data `cuda_version`",
        "'12.6.3' cannot build for cuda_arch '120' (sm_120 needs CUDA 12.8 or newer)")
    # a suffixed arch is judged by its digits
    with pytest.raises(PreflightError) as e:
        dp.check_cuda_builds(cfg(cuda_arch="90a;100f", cuda_version="12.6.3"), None, None)
    assert "(sm_100f needs CUDA 12.9 or newer)" in e.value.problem
    # ... and by its suffix: the family-specific targets came with CUDA 12.9
    with pytest.raises(PreflightError) as e:
        dp.check_cuda_builds(cfg(cuda_arch="90a;120f", cuda_version="12.8.1"), None, None)
    assert (e.value.problem, e.value.fix) == (
        "'12.8.1' cannot build for cuda_arch '90a;120f' (sm_120f needs CUDA 12.9 or newer)",
        "remove 120f from cuda_arch, or set cuda_version = '13.2.1' or newer (or remove it: "
        "the kit's default)")
    dp.check_cuda_builds(cfg(cuda_arch="90a;100f", cuda_version="12.9.1"), None, None)


@pytest.mark.parametrize("gpu", [smi(RTX5090), smi(), smi(H200_CARD), smi(RTX5090, card()),
                                 None])
def test_the_default_release_builds_for_the_cards_the_kit_knows(gpu):
    dp.check_cuda_builds(cfg(), gpu, None)  # sm_120, sm_89, sm_90, both, no card yet


def test_the_default_release_deploys_on_an_rtx_5090():
    assert run_deploy(DEFAULTS, facts(GpuInfo=ON_5090))


def test_an_arch_the_kit_does_not_know_is_not_refused():
    # unknown is not wrong: nvcc judges it
    dp.check_cuda_builds(cfg(cuda_arch="89;130"), None, None)
    dp.check_cuda_builds(cfg(cuda_version="12.0.1"), smi(card(cap="15.0")), None)
    assert cannot_build((12, 0), "130") is None


def test_the_release_the_driver_chose_names_cuda_follows_driver():
    """An RTX 5090 on a 570 driver (CUDA 12.8): the image follows the driver to 12.8.1, which
    has no sm_121 for the cuda_arch given (12.9 brought it)."""
    on_570 = replace(ON_5090, path="/usr/bin/nvidia-smi", cuda_version="12.8",
                     driver_version="570.172.08", driver_branch=570)
    e = refusal({"cuda_arch": "120;121", "cuda_follows_driver": True},
                facts(Wsl=NATIVE, GpuInfo=on_570, PciListing=PCI_RTX4090,
                      LinuxDriverPackages=["nvidia-driver-570"]))
    assert (e.subject, e.problem, e.fix) == (
        "host data `cuda_follows_driver`",
        "the driver's CUDA 12.8.1 cannot build for cuda_arch '120;121' (sm_121 needs CUDA 12.9 "
        "or newer)",
        "remove 121 from cuda_arch, or update the NVIDIA driver to one that reports CUDA 12.9 "
        "or newer (the build follows it)")


def test_where_the_default_cannot_build_the_arch_no_default_is_offered(monkeypatch):
    monkeypatch.setitem(FIRST_CUDA, 130, (13, 4))  # an arch newer than the kit's default
    with pytest.raises(PreflightError) as e:
        dp.check_cuda_builds(cfg(cuda_arch="130"), None, None)
    assert (e.value.subject, e.value.problem, e.value.fix) == (
        "host data `cuda_version`", "'13.2.1' (the kit's default) cannot build for cuda_arch "
        "'130' (sm_130 needs CUDA 13.4 or newer)",
        "set cuda_version to a CUDA 13.4 release or newer")
    with pytest.raises(PreflightError) as e:
        dp.check_cuda_builds(cfg(cuda_arch="130", cuda_version="12.9.1"), None, None)
    assert e.value.fix == "set cuda_version to a CUDA 13.4 release or newer"


def test_archs_no_one_release_builds_are_told_apart_not_sent_between_releases():
    """sm_61 (CUDA 12 at the latest) beside sm_110 (CUDA 13.0 at the earliest): no release
    builds both, so no release is offered (each would be refused for the other), only the
    arch to drop; where neither can go, each its own host."""
    for release, drop in (("13.2.1", "61"), ("12.9.1", "110")):
        with pytest.raises(PreflightError) as e:
            dp.check_cuda_builds(cfg(cuda_arch="61;110", cuda_version=release), None, None)
        assert e.value.fix == f"remove {drop} from cuda_arch", e.value
    # every arch refused is named, and a release that is not the default is offered alone
    with pytest.raises(PreflightError) as e:
        dp.check_cuda_builds(cfg(cuda_arch="61;70;89"), None, None)
    assert e.value.fix.startswith("remove 61, 70 from cuda_arch, or "), e.value
    with pytest.raises(PreflightError) as e:
        dp.check_cuda_builds(cfg(cuda_arch="61;120", cuda_version="12.4.1"), None, None)
    assert e.value.fix == "remove 120 from cuda_arch, or set cuda_version = '12.9.1'", e.value
    # where one does, the release offered builds them all: 12.9.1 for sm_61 beside sm_120
    with pytest.raises(PreflightError) as e:
        dp.check_cuda_builds(cfg(cuda_arch="61;120"), None, None)
    assert e.value.fix == "remove 61 from cuda_arch, or set cuda_version = '12.9.1' (CUDA 12 " \
        "is the last that builds for sm_61)"


def test_where_no_release_builds_every_arch_and_none_can_go_each_gets_its_own_host(
        monkeypatch):
    monkeypatch.setitem(FIRST_CUDA, 130, (13, 4))  # an arch newer than the kit's default
    with pytest.raises(PreflightError) as e:
        dp.check_cuda_builds(cfg(cuda_arch="61;130", cuda_version="13.2.1"), None, None)
    assert e.value.fix == "no CUDA release the kit knows builds sm_61 beside the other " \
        "archs: give each its own host (cuda_arch), or remove it from cuda_arch", e.value
    with pytest.raises(PreflightError) as e:  # from sm_75: the first arch refused is named
        dp.check_cuda_builds(cfg(cuda_arch="120;130", cuda_version="12.4.1"), None, None)
    assert e.value.fix.startswith("no CUDA release the kit knows builds sm_120 beside"), e.value


def test_a_build_image_of_base_images_is_not_judged_by_cuda_version():
    """base_images.build compiles with its own CUDA, which the kit does not read: a release
    cuda_version names is not the one that builds."""
    dp.check_cuda_builds(cfg(cuda_arch="61;89", base_images={
        "build": "nvidia/cuda:12.9.1-devel-ubuntu24.04"}), None, None)
    with pytest.raises(PreflightError):
        dp.check_cuda_builds(cfg(cuda_arch="61;89", base_images={
            "runtime": "nvidia/cuda:12.9.1-runtime-ubuntu24.04"}), None, None)


def test_a_pods_own_toolkit_builds_whatever_cuda_version_says():
    """The host's nvcc is used only where it builds for the card (host_toolkit), so it never
    trips the rule; host data's cuda_version, not built then, is not judged. A pod whose nvcc
    cannot build for its card installs cuda_version's toolkit: that one is judged."""
    b200 = GpuCard(name="NVIDIA B200", driver_version="580.159.04", compute_cap="10.0",
                   memory_total_mib=183359)
    on_b200 = pod(GpuInfo=replace(pod()["GpuInfo"], gpus=(b200,)))
    assert run_deploy({**POD_DATA, "cuda_version": "12.4.1"}, on_b200)
    old_nvcc = {**on_b200, "HostTools": replace(POD_TOOLS, nvcc_version="12.4.131")}
    with pytest.raises(PreflightError) as e:
        run_deploy({**POD_DATA, "cuda_version": "12.4.1"}, old_nvcc)
    assert e.value.subject == "host data `cuda_version`"
    assert "cannot build for the NVIDIA B200 (sm_100 needs CUDA 12.8" in e.value.problem


def test_the_host_toolkit_is_never_one_the_rule_refuses():
    for n in [*FIRST_CUDA, 61, 70, 130]:
        for mm in [(12, 0), (12, 8), (12, 9), (13, 0), (13, 2)]:
            if host_toolkit(f"{mm[0]}.{mm[1]}", [str(n)], 595).use:
                assert cannot_build(mm, str(n)) is None, (mm, n)


def test_a_deploy_that_builds_nothing_or_on_the_cpu_is_not_judged():
    dp.check_cuda_builds(cfg(cuda_version="12.4.1", stages=["provision"]), smi(RTX5090), None)
    dp.check_cuda_builds(cfg(cuda_version="12.4.1", profile="cpu-tiny"), smi(RTX5090), None)
