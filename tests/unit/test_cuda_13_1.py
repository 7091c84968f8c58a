"""
CUDA 13.1 (issue 43, "Docs that upstream contradicts"): a GeForce on driver branch 590 reports
CUDA 13.1, older than the default 13.2.1 image asks for. The kit knew branch 590's CUDA but no
nvidia/cuda 13.1 release, so the only way out it offered was a purge of the driver and a
reboot. Upstream facts (docs/gpu-hosts.md, "Which driver runs which CUDA"):

- CUDA Toolkit release notes, Table 3: 13.1 GA >= 590.44.01, 13.1 Update 1 >= 590.48.01
  (Linux x86_64); a 590 driver's nvidia-smi says "CUDA Version: 13.1".
- NVIDIA's container-images repository, dist/13.1.2/ubuntu2404/base/Dockerfile: CUDA_VERSION
  13.1.2 and its NVIDIA_REQUIRE_CUDA, kept in data/require-cuda-13.1.2-base-dockerfile.txt
  (written out with a script spelling the 73 clauses, compared with the Dockerfile's line).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from beekeeper.core import cudacompat
from beekeeper.core.config import load_host_config
from beekeeper.core.errors import PreflightError
from beekeeper.facts.gpu import GpuCard, NvidiaSmiInfo
from beekeeper.tasks import driver_preflight as dp
from beekeeper.tasks.driver_preflight import DriverPlan

from .harness import DEFAULTS, NATIVE, WSL, facts, names, run_deploy

DATA = Path(__file__).parent / "data"


def geforce(branch: int, cuda: str | None, version: str | None = None,
            path: str = "/usr/bin/nvidia-smi", brand: str = "GeForce") -> NvidiaSmiInfo:
    """An RTX 4090 on a driver of `branch` reporting `cuda` (values typed by hand; 590.48.01
    is the driver Table 3 gives for CUDA 13.1 Update 1)."""
    version = version or {590: "590.48.01", 595: "595.58.03", 580: "580.95.05",
                          575: "575.57.08", 570: "570.172.08"}[branch]
    return NvidiaSmiInfo(path=path, cuda_version=cuda, driver_version=version,
                         driver_branch=branch, brand=brand,
                         gpus=(GpuCard(name="NVIDIA GeForce RTX 4090", driver_version=version,
                                       compute_cap="8.9", memory_total_mib=24564),))


def cfg(**over):
    return load_host_config({**DEFAULTS, **over})


def build_step(ops) -> str:
    return next(n for n in names(ops) if n.startswith("Build server image"))


def dockerfile(ops) -> str:
    return next(c for n, cs in ops if n == "Render the Dockerfile" for c in cs
                if c.startswith("upload "))


def test_the_kit_spells_the_13_1_2_images_rule_as_nvidia_does():
    assert cudacompat.newest_release((13, 1)) == "13.1.2"
    assert cudacompat.require_cuda("13.1.2") == (
        DATA / "require-cuda-13.1.2-base-dockerfile.txt").read_text().strip()
    # the other minors' rules are what they were
    assert cudacompat.require_cuda("13.2.1") == (
        DATA / "require-cuda-13.2.1-base-dockerfile.txt").read_text().strip()
    assert cudacompat.require_cuda("13.0.2") == (
        DATA / "require-cuda-13.0.2-h200-env.txt").read_text().strip()
    # branch 590 ships with 13.1 and is the newest CUDA it reports
    assert cudacompat.branch_for_cuda("13.1.2") == 590
    assert cudacompat.cuda_of_branch(590) == (13, 1)


def test_a_geforce_on_590_is_offered_the_13_1_image_beside_the_purge():
    with pytest.raises(PreflightError) as e:
        run_deploy(DEFAULTS, facts(Wsl=NATIVE, GpuInfo=geforce(590, "13.1"),
                                   LinuxDriverPackages=["nvidia-driver-590-open"]))
    assert str(e.value) == (
        "host canned: driver 590.48.01 reports CUDA 13.1, brand GeForce, older than the image's "
        "CUDA 13.2.1 (NVIDIA_REQUIRE_CUDA cuda>=13.2): set upgrade_driver = True (the kit "
        "purges the installed NVIDIA driver packages and installs branch 595, pinned to it; a "
        "reboot follows), cuda_follows_driver = True (the image is built for CUDA 13.1.2, which "
        "this driver runs), or update the NVIDIA driver on the host to branch 595 or newer, or "
        "set cuda_version = '13.1.2'")


def test_a_geforce_on_590_following_its_driver_gets_the_13_1_2_image_and_no_purge():
    ops = run_deploy({**DEFAULTS, "cuda_follows_driver": True},
                     facts(Wsl=NATIVE, GpuInfo=geforce(590, "13.1")))
    assert "cuda13.1-sm89-" in build_step(ops)
    assert "ARG BUILD_BASE=nvidia/cuda:13.1.2-devel-ubuntu24.04" in dockerfile(ops)
    assert not any("NVIDIA driver" in n and ("Install" in n or "Purge" in n or "Remove" in n)
                   for n in names(ops))
    assert not any("reboot" in n.lower() for n in names(ops))
    # without a CUDA line, the branch's own CUDA: the same image
    assert dp.old_driver(cfg(cuda_follows_driver=True), NATIVE, geforce(590, None), "WHY") == \
        DriverPlan(cuda_version="13.1.2")


def test_the_13_1_2_image_runs_on_590_as_its_rule_says():
    follow = cfg(cuda_version="13.1.2")
    assert dp.driver_too_old(follow, NATIVE, geforce(590, "13.1")) is None
    assert dp.driver_too_old(follow, NATIVE, geforce(595, "13.2")) is None
    assert dp.driver_too_old(follow, NATIVE, geforce(580, "13.0")) == (
        "driver 580.95.05 reports CUDA 13.0, brand GeForce, older than the image's CUDA 13.1.2 "
        "(NVIDIA_REQUIRE_CUDA cuda>=13.1)")
    # a data-center card: the brand clauses of 13.1.2 (535, 550, 560, 565, 570, 580)
    h200 = replace(geforce(580, "13.0"), brand="NVIDIA")
    assert dp.driver_too_old(follow, NATIVE, h200) is None
    h200_575 = replace(geforce(575, "12.9"), brand="NVIDIA")
    assert "older than 580" in (dp.driver_too_old(follow, NATIVE, h200_575) or "")
    # the installed branch for 13.1 is 590
    assert dp.driver_branch_to_install(follow) == 590


def test_hosts_on_595_and_newer_still_get_13_2():
    ops = run_deploy(DEFAULTS, facts(Wsl=NATIVE, GpuInfo=geforce(595, "13.2")))
    assert "cuda13.2-sm89-" in build_step(ops)
    # following the driver changes nothing where the driver runs cuda_version
    ops = run_deploy({**DEFAULTS, "cuda_follows_driver": True},
                     facts(Wsl=NATIVE, GpuInfo=geforce(595, "13.2")))
    assert "ARG BUILD_BASE=nvidia/cuda:13.2.1-devel-ubuntu24.04" in dockerfile(ops)


@pytest.mark.parametrize(("branch", "cuda", "release"), [
    (580, "13.0", "13.0.2"), (575, "12.9", "12.9.1"), (570, "12.8", "12.8.1")])
def test_older_branches_follow_to_the_releases_they_did(branch, cuda, release):
    assert dp.old_driver(cfg(cuda_follows_driver=True), NATIVE, geforce(branch, cuda), "WHY") \
        == DriverPlan(cuda_version=release)


def test_wsl2_with_a_windows_driver_reporting_13_1_follows_to_13_1_2():
    # a Windows driver's number typed by hand (WSL2 goes by the CUDA version it reports; no
    # Windows driver reporting 13.1 is recorded here)
    windows = geforce(591, "13.1", version="591.44", path="/usr/lib/wsl/lib/nvidia-smi")
    ops = run_deploy({**DEFAULTS, "cuda_follows_driver": True}, facts(Wsl=WSL, GpuInfo=windows))
    assert "ARG BUILD_BASE=nvidia/cuda:13.1.2-devel-ubuntu24.04" in dockerfile(ops)
    with pytest.raises(PreflightError) as e:
        run_deploy(DEFAULTS, facts(Wsl=WSL, GpuInfo=windows))
    assert str(e.value).endswith(
        "update the NVIDIA driver on Windows to one whose nvidia-smi reports CUDA 13.2 or newer "
        "(for CUDA 13.2.1: go by that CUDA version, not the driver's number), then `wsl "
        "--shutdown`, or set cuda_version = '13.1.2' (or cuda_follows_driver = True)")
