"""
The NVIDIA driver preflight's rules where a mutant of them survived the rules' own tests
(issue 45: tasks/driver_preflight.py through scripts/mutation.py, after its refusals were
rewritten at 76ec01d; docs/testing.md, "Mutation testing"). Each test holds the decision and
the refusal's parts (subject, problem, fix) on both sides of the rule.
"""

from __future__ import annotations

import pytest

from beekeeper.core.config import load_host_config
from beekeeper.core.errors import PreflightError
from beekeeper.facts.gpu import GpuCard, NvidiaSmiInfo
from beekeeper.tasks import driver_preflight as dp

from .harness import DEFAULTS, NATIVE


def cfg(**over):
    return load_host_config({**DEFAULTS, **over})


def test_the_branch_a_card_must_keep_is_that_of_the_cuda_preflight_judges():
    """check_branch_keeps_card judges the branch of the CUDA release it is given (the
    driver tasks pass HostFacts.cuda_version: the host's own toolkit, or the driver's CUDA an
    image follows), not host data's cuda_version (`x_check_branch_keeps_card__mutmut_8`)."""
    pascal = [("the GTX 1080 is compute capability 6.1", "6.1")]
    on_12 = cfg(cuda_version="12.9.1")
    dp.check_branch_keeps_card(on_12, pascal)  # CUDA 12.9 ships with branch 575
    with pytest.raises(PreflightError) as e:
        dp.check_branch_keeps_card(on_12, pascal, "13.2")
    assert (e.value.subject, e.value.problem, e.value.fix) == (
        "host data `driver_branch`", "branch 595 drops Maxwell, Pascal and Volta, and the GTX "
        "1080 is compute capability 6.1: NVIDIA's 580 is its last",
        "set driver_branch = 580 (with cuda_version = '12.9.1')")
    dp.check_branch_keeps_card(cfg(), pascal, "12.9.1")  # host data's 13.2 is not judged


def test_the_older_branch_offered_is_one_that_runs_the_cuda_preflight_judges():
    """older_branch_advice (Debian 12's dkms stop) offers a branch for the CUDA release it is
    given, and judges the branches by that release too (`x_older_branch_advice__mutmut_3`:
    host data's release judged instead; `_25`: the branches judged by host data's while the
    line names the one given)."""
    assert dp.older_branch_advice(cfg(), 595, "13.1.1") == (
        "set driver_branch = 590 (an older branch that still runs CUDA 13.1.1 in container "
        "mode)")
    assert dp.older_branch_advice(cfg(cuda_version="13.0.2"), 590, "13.1.1") == (
        "no older branch runs CUDA 13.1.1 in container mode: set cuda_version = '13.0.2' and "
        "driver_branch = 580 (its branch)")
    assert dp.older_branch_advice(cfg(), 595) == (
        "no older branch runs CUDA 13.2.1 in container mode: set cuda_version = '13.0.2' and "
        "driver_branch = 580 (its branch)")


def test_a_driver_too_old_is_offered_the_branch_of_the_cuda_preflight_judges():
    """old_driver's way out installs the branch of the release judged (the host's toolkit,
    13.1 here: branch 590), not that of host data's 13.2 (595) (`x_old_driver__mutmut_83`,
    `_85`)."""
    gpu = NvidiaSmiInfo(path="/usr/bin/nvidia-smi", cuda_version="13.0",
                        driver_version="580.95.05", driver_branch=580, brand="GeForce",
                        gpus=(GpuCard(name="NVIDIA GeForce RTX 4090", driver_version="x",
                                      compute_cap="8.9", memory_total_mib=24564),))
    fix = ("set upgrade_driver = True (the kit purges the installed NVIDIA driver packages and "
           "installs branch {b}, pinned to it; a reboot follows), cuda_follows_driver = True "
           "(the image is built for CUDA 13.0.2, which this driver runs), or update the NVIDIA "
           "driver on the host to branch {b} or newer, or set cuda_version = '13.0.2'")
    for cuda, branch in (("13.1.1", 590), (None, 595)):
        with pytest.raises(PreflightError) as e:
            dp.old_driver(cfg(), NATIVE, gpu, "is too old", cuda)
        assert (e.value.subject, e.value.problem, e.value.fix) == (
            "driver 580.95.05", "is too old", fix.format(b=branch)), cuda


def gpu_of(branch: int, cuda: str, cap: str = "8.9",
           name: str = "NVIDIA GeForce RTX 4090") -> NvidiaSmiInfo:
    return NvidiaSmiInfo(path="/usr/bin/nvidia-smi", cuda_version=cuda,
                         driver_version=f"{branch}.95.05", driver_branch=branch, brand="GeForce",
                         gpus=(GpuCard(name=name, driver_version="x", compute_cap=cap,
                                       memory_total_mib=24564),))


def test_a_driver_is_judged_against_the_cuda_preflight_judges():
    """driver_too_old and check_gpu judge the driver against the release they are given
    (HostFacts.cuda_version): a 590 driver reporting CUDA 13.1 runs a 13.1 build and is too
    old for host data's 13.2 (`x_driver_too_old__mutmut_3`, `x_check_gpu__mutmut_1`, `_3`)."""
    on_590 = gpu_of(590, "13.1")
    assert dp.driver_too_old(cfg(), NATIVE, on_590, "13.1.1") is None
    assert dp.driver_too_old(cfg(), NATIVE, on_590) == (
        "driver 590.95.05 reports CUDA 13.1, brand GeForce, older than the image's CUDA 13.2.1 "
        "(NVIDIA_REQUIRE_CUDA cuda>=13.2)")
    assert dp.check_gpu(cfg(), NATIVE, on_590, 1, [], "13.1.1") == dp.DriverPlan()
    with pytest.raises(PreflightError) as e:
        dp.check_gpu(cfg(), NATIVE, on_590, 1, [], None)
    assert e.value.subject == "driver 590.95.05"
    assert e.value.problem.startswith("reports CUDA 13.1, brand GeForce, older than the "
                                      "image's CUDA 13.2.1")


def test_a_cards_generation_is_judged_against_the_cuda_preflight_judges():
    """check_generation: a Pascal card on CUDA 12.9 (the release given: branch 575, which
    still drives it) passes where host data says 13.2, and is refused on 13.2 given where
    host data says 12.9 (`x_check_generation__mutmut_31`; `_51`, `_54`: the branch it must
    keep judged by host data's release)."""
    pascal = [("the GTX 1080 is compute capability 6.1", "6.1")]
    dp.check_generation(cfg(), pascal, "12.9.1")
    with pytest.raises(PreflightError) as e:
        dp.check_generation(cfg(cuda_version="12.9.1", driver_flavour="proprietary"), pascal,
                            "13.2.1")
    assert "13.2.1" in e.value.problem


def test_a_driver_to_install_is_judged_against_the_cuda_preflight_judges():
    """A native host with a GPU and no driver: the branch host data names must run the
    release preflight judges, 13.2 given where host data says 13.1 (`x_check_gpu__mutmut_38`,
    `_40`: host data's release judged)."""
    on_590 = cfg(cuda_version="13.1.1", driver_branch=590)
    assert dp.check_gpu(on_590, NATIVE, None, 1, []) == dp.DriverPlan(action="install")
    with pytest.raises(PreflightError) as e:
        dp.check_gpu(on_590, NATIVE, None, 1, [], "13.2.1")
    assert (e.value.subject, e.value.problem, e.value.fix) == (
        "host data `driver_branch`", "590 runs CUDA 13.1, but cuda_version is 13.2.1 (the "
        "image asks cuda>=13.2)", "set driver_branch = 595 or remove it")


def test_check_gpu_passes_the_cuda_it_judges_to_each_rule():
    """check_gpu hands the release it is given to the generation rule and to the way out of a
    driver too old (`x_check_gpu__mutmut_153`, `_156`: a Pascal card on CUDA 12.9 judged on
    host data's 13.2; `_205`, `_210`: the branch offered for 13.2, not 13.1)."""
    pascal = gpu_of(575, "12.9", cap="6.1", name="NVIDIA GeForce GTX 1080")
    assert dp.check_gpu(cfg(), NATIVE, pascal, 1, [], "12.9.1") == dp.DriverPlan()
    with pytest.raises(PreflightError) as e:
        dp.check_gpu(cfg(), NATIVE, pascal, 1, [], None)
    assert e.value.subject == "the NVIDIA GeForce GTX 1080 is compute capability 6.1"
    with pytest.raises(PreflightError) as e:
        dp.check_gpu(cfg(), NATIVE, gpu_of(580, "13.0"), 1, [], "13.1.1")
    assert e.value.subject == "driver 580.95.05"
    assert "installs branch 590, pinned to it" in e.value.fix
    assert "to branch 590 or newer" in e.value.fix


def test_check_cuda_judges_the_release_it_is_given():
    """check_cuda (preflight's entry to these rules) judges the CUDA release it is given,
    the host toolkit's where one builds, not host data's (`x_check_cuda__mutmut_42`)."""
    from unittest import mock

    from pyinfra.api import Config, Inventory, State
    from pyinfra.context import ctx_host, ctx_state

    from .harness import PCI_RTX4090, _canned

    inventory = Inventory(([("canned", {})], {}))
    h = inventory.get_host("canned")
    on_590 = gpu_of(590, "13.1")
    with ctx_state.use(State(inventory, Config())), ctx_host.use(h), \
            mock.patch.object(h, "get_fact", side_effect=_canned({"PciListing": PCI_RTX4090,
                                                         "LinuxDriverPackages": ["nvidia-open"]})):
        assert dp.check_cuda(cfg(), NATIVE, on_590, "ubuntu", "13.1.1",
                             gpu_container=False) == dp.DriverPlan(pci=1)
        with pytest.raises(PreflightError) as e:
            dp.check_cuda(cfg(), NATIVE, on_590, "ubuntu", "13.2.1", gpu_container=False)
        assert e.value.subject == "driver 590.95.05"


def test_the_older_branch_offered_is_the_newest_that_runs_not_the_one_cuda_ships_with():
    """Each older branch is judged as itself (driver_branch_to_install's `branch`), not as
    host data's driver_branch (none here: the branch CUDA 13.0 ships with, 580, would then be
    the only one that "runs"): 590 runs CUDA 13.0.2 too and is the newest below 595."""
    assert dp.older_branch_advice(cfg(cuda_version="13.0.2"), 595) == (
        "set driver_branch = 590 (an older branch that still runs CUDA 13.0.2 in container "
        "mode)")
