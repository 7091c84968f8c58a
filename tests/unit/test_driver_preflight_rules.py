"""
The NVIDIA driver preflight's rules, each decision and its line held word for word (issue 45:
tasks/driver_preflight.py through scripts/mutation.py; docs/testing.md, "Mutation testing"):
what a host's GPU, driver and arch let the kit do, the branch it installs, a driver too old
for the image and the three ways out, the open modules' generation, and a driver that is
there but does not load, by its cause.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from beekeeper.core.errors import PreflightError
from beekeeper.facts.boot import SecureBootInfo
from beekeeper.facts.gpu import NvidiaModuleInfo, NvidiaSmiInfo
from beekeeper.tasks import driver_preflight as dp
from beekeeper.tasks.driver_preflight import DriverPlan

from .harness import DEFAULTS, H200_CARD as H200, NATIVE, V100, WSL, card, cfg, smi

WSL_SMI = "/usr/lib/wsl/lib/nvidia-smi"


def refused(f, *args) -> str:
    with pytest.raises(PreflightError) as e:
        f(*args)
    return str(e.value)


def refused_old(c, wsl, gpu) -> str:
    """old_driver's refusal of `gpu` after a line of driver_too_old's (which names the driver
    first: the refusal's subject), that line written WHY."""
    why = f"{dp._the_driver(gpu, wsl.is_wsl2)} is too old"
    with pytest.raises(PreflightError) as e:
        dp.old_driver(c, wsl, gpu, why)
    assert e.value.subject in (dp._the_driver(gpu, wsl.is_wsl2),
                               "host data `cuda_follows_driver`")
    return str(e.value).replace(why, "WHY")


# WSL2's fix: the Windows driver, by the CUDA version it must report for CUDA 13.2.1 (the
# image's 13.2 in container mode, any 13.x natively)
WINDOWS_UPDATE = ("update the NVIDIA driver on Windows to one whose nvidia-smi reports CUDA "
                  "{} or newer (for CUDA {}: go by that CUDA version, not the driver's number), "
                  "then `wsl --shutdown`")
WIN, WIN_NATIVE = (WINDOWS_UPDATE.format(n, "13.2.1") for n in ("13.2", "13.0"))


# --- check_gpu: the host's GPU, driver and arch ------------------------------------------

def test_linux_driver_packages_inside_wsl2_are_named_with_their_purge():
    assert refused(dp.check_gpu, cfg(), WSL, smi(path="/usr/lib/wsl/lib/nvidia-smi"), 0,
                   ["nvidia-driver-550", "libnvidia-compute-550"]) == (
        "Linux NVIDIA driver packages are installed inside WSL2 (nvidia-driver-550, "
        "libnvidia-compute-550); they shadow the Windows driver and break NVML: remove them "
        "(apt purge nvidia-driver-550 libnvidia-compute-550) and deploy again")


def test_no_gpu_is_told_where_the_driver_goes():
    # the driver asked for by the CUDA version it reports (docs/quickstart-wsl2.md), the one
    # the image's cuda_version needs, not by a driver number
    assert refused(dp.check_gpu, cfg(), WSL, None, 0, []) == (
        "no NVIDIA GPU visible in WSL2 (no /usr/lib/wsl/lib/nvidia-smi): install or update the "
        "NVIDIA driver on Windows to one whose nvidia-smi reports CUDA 13.2 or newer (for CUDA "
        "13.2.1: go by that CUDA version, not the driver's number), then `wsl --shutdown`")
    assert "reports CUDA 12.9 or newer (for CUDA 12.9.1" in refused(
        dp.check_gpu, cfg(cuda_version="12.9.1"), WSL, None, 0, [])
    # natively, minor version compatibility: any driver of the CUDA major
    assert "reports CUDA 13.0 or newer (for CUDA 13.2.1" in refused(
        dp.check_gpu, cfg(mode="native"), WSL, None, 0, [])
    assert refused(dp.check_gpu, cfg(), NATIVE, None, 0, []) == (
        "no NVIDIA GPU found (nvidia-smi missing): install the driver, or choose a CPU profile "
        "such as cpu-tiny")
    # nvidia-smi there but listing no card: the same
    assert "no NVIDIA GPU found" in refused(dp.check_gpu, cfg(), NATIVE,
                                            NvidiaSmiInfo(path="/usr/bin/nvidia-smi"), 0, [])
    # WSL2 with a card on PCI (never: WSL2 has no PCI view) is still the Windows driver's
    assert "in WSL2" in refused(dp.check_gpu, cfg(), WSL, None, 1, [])


def test_wsl2_nvidia_smi_there_listing_no_gpu_is_told_so_not_that_it_is_missing(tmp_path):
    """/usr/lib/wsl/lib/nvidia-smi there but listing no card: the refusal said "no
    /usr/lib/wsl/lib/nvidia-smi" and gave the missing driver's advice; it names the file, that
    it lists none, and what it printed (the GpuInfo command run against a stand-in)."""
    from beekeeper.facts.gpu import GpuInfo

    from .harness import _run_sh, _stub, _tools

    _tools(tmp_path, "sed", "grep")
    _stub(tmp_path, "nvidia-smi", 'echo "No devices were found"; exit 6')
    got = GpuInfo().process(_run_sh(GpuInfo().command(), tmp_path))
    assert got is not None and not got.gpus and got.said == "No devices were found", got
    with pytest.raises(PreflightError) as e:
        dp.check_gpu(cfg(), WSL, replace(got, path=WSL_SMI), 0, [])
    assert e.value.subject == WSL_SMI, str(e.value)
    assert e.value.problem == "is there but lists no GPU (it printed 'No devices were found')"
    assert "driver on Windows to one" not in e.value.fix and "wsl --shutdown" in e.value.fix
    # a fact that holds no such line: nothing made up
    with pytest.raises(PreflightError) as e:
        dp.check_gpu(cfg(), WSL, NvidiaSmiInfo(path=WSL_SMI), 0, [])
    assert e.value.problem == "is there but lists no GPU"
    # a Linux driver's nvidia-smi inside WSL2, failing as it does there: named as that
    with pytest.raises(PreflightError) as e:
        dp.check_gpu(cfg(), WSL, NvidiaSmiInfo(path="/usr/bin/nvidia-smi", said="NVIDIA-SMI "
                                               "has failed"), 0, [])
    assert e.value.subject == "nvidia-smi" and "installed inside WSL2" in e.value.problem


def test_a_card_on_pci_with_no_driver_is_an_install_of_the_shipped_branch():
    assert dp.check_gpu(cfg(), NATIVE, None, 1, []) == DriverPlan(action="install")
    assert dp.check_gpu(cfg(), NATIVE, NvidiaSmiInfo(path="x"), 2, []) == \
        DriverPlan(action="install")
    # the branch it would install must run the image: refused before any change
    assert "host data `driver_branch`: 580 runs CUDA 13.0" in refused(
        dp.check_gpu, cfg(driver_branch=580), NATIVE, None, 1, [])


def test_a_linux_nvidia_smi_inside_wsl2_is_refused():
    assert refused(dp.check_gpu, cfg(), WSL, smi(), 0, []) == (
        "nvidia-smi resolves to /usr/bin/nvidia-smi, not /usr/lib/wsl/lib/nvidia-smi: a Linux "
        "NVIDIA driver is installed inside WSL2; remove it (apt purge 'nvidia-*' 'libnvidia-*') "
        "and use the Windows driver")
    assert dp.check_gpu(cfg(), WSL, smi(path="/usr/lib/wsl/lib/nvidia-smi"), 0, []) == \
        DriverPlan()


def test_a_card_without_a_compute_capability_needs_cuda_arch():
    grid = smi(card(name="GRID A100-40C", cap=None))
    assert refused(dp.check_gpu, cfg(), NATIVE, grid, 0, []) == (
        "nvidia-smi prints no compute capability for the GRID A100-40C ([N/A]: a vGPU, MIG or "
        "an older driver), so the kit cannot tell which CUDA arch to build for: set host data "
        "`cuda_arch` to the card's (e.g. cuda_arch = '90' for an H100 or H200, '89' for an RTX "
        "40xx; NVIDIA's CUDA GPUs page lists them)")
    assert dp.check_gpu(cfg(cuda_arch="80"), NATIVE, grid, 0, []) == DriverPlan()
    # the first card without one is named, whatever its place
    assert "for the GRID A100-40C (" in refused(
        dp.check_gpu, cfg(), NATIVE, smi(H200, card(name="GRID A100-40C", cap=None)), 0, [])


def test_a_cuda_arch_with_no_kernels_for_a_card_is_refused_naming_the_card():
    assert refused(dp.check_gpu, cfg(cuda_arch="90"), NATIVE, smi(), 0, []) == (
        "cuda_arch 90 has no kernels for the NVIDIA GeForce RTX 4090 (compute capability 8.9, "
        "sm_89): add 89 to cuda_arch or remove the override")
    # every card is judged, the second too
    assert "for the NVIDIA GeForce RTX 3090 (compute capability 8.6" in refused(
        dp.check_gpu, cfg(cuda_arch="89"), NATIVE,
        smi(card(), card(name="NVIDIA GeForce RTX 3090", cap="8.6", mem=24576)), 0, [])
    assert dp.check_gpu(cfg(cuda_arch="86;89"), NATIVE,
                        smi(card(), card(name="NVIDIA GeForce RTX 3090", cap="8.6",
                                         mem=24576)), 0, []) == DriverPlan()
    # a card without a compute capability is taken as the given arch's, not judged
    assert dp.check_gpu(cfg(cuda_arch="89"), NATIVE, smi(card(), card(cap=None)), 0, []) == \
        DriverPlan()


def test_several_cards_are_measured_by_the_smallest():
    small = card(name="NVIDIA GeForce RTX 3060", cap="8.6", mem=8192)
    assert refused(dp.check_gpu, cfg(), NATIVE, smi(card(), small), 0, []) == (
        "the services plan 9749 MiB of VRAM, more than the NVIDIA GeForce RTX 3060's 8192 MiB "
        "less 1024 MiB margin, the smallest of this host's 2 cards: pick smaller profiles or "
        "ctx_size, or drop a service")
    assert "RTX 3060's" in refused(dp.check_gpu, cfg(), NATIVE, smi(small, card()), 0, [])
    # the plan and 1 GiB fit exactly: goes on; a MiB less: refused
    need = 9749 + 1024
    fits = card(name="NVIDIA RTX A4000", cap="8.6", mem=need)
    assert dp.check_gpu(cfg(), NATIVE, smi(card(), fits), 0, []) == DriverPlan()
    assert "RTX A4000's 10772 MiB" in refused(
        dp.check_gpu, cfg(), NATIVE, smi(card(), replace(fits, memory_total_mib=need - 1)), 0,
        [])
    # one card: preflight's own VRAM check, not this one
    dp.check_cards_memory(cfg(), smi(small))
    # cards whose memory nvidia-smi did not print: nothing to judge by
    dp.check_cards_memory(cfg(), smi(card(mem=None), card(mem=None)))
    # a card without memory beside one with it: the one with it is the measure
    assert "RTX 3060's" in refused(dp.check_cards_memory, cfg(), smi(card(mem=None), small))


def test_only_cuda_services_count_on_the_cards():
    cpu = cfg(services=[{"profile": "cpu-tiny", "port": 8083, "service_name": "llm"}])
    dp.check_cards_memory(cpu, smi(card(mem=2048), card(mem=2048)))


def test_the_arch_list_is_every_cards_own_only_when_they_differ():
    three = smi(card(), card(cap="8.6"), card(cap="10.0"))
    assert dp.archs_of_cards(cfg(), three) == "86;89;100"  # by number, not by text
    assert dp.archs_of_cards(cfg(), smi(card(), card())) is None
    assert dp.archs_of_cards(cfg(), smi(card(), card(cap=None))) is None
    assert dp.archs_of_cards(cfg(cuda_arch="90"), three) == "90"
    assert dp.archs_of_cards(cfg(), None) is None
    assert dp.archs_of_cards(cfg(), NvidiaSmiInfo(path="x")) is None


# --- generations and branches ------------------------------------------------------------

def test_a_kepler_card_is_past_support():
    assert refused(dp.check_generation, cfg(), [("the Tesla K80 is compute capability 3.7",
                                                 "3.7")]) == (
        "the Tesla K80 is compute capability 3.7, Kepler or older, past NVIDIA's support: its "
        "last driver branch is 470 (CUDA 11.4), older than any CUDA the kit builds for; fix: "
        "use a Turing or newer card, or a CPU profile")
    # Maxwell (5.0) is not Kepler
    assert "Maxwell, Pascal or Volta" in refused(
        dp.check_generation, cfg(), [("the GTX 750 is compute capability 5.0", "5.0")])


def test_a_pre_turing_card_with_cuda_13_is_told_the_cuda_12_way():
    assert refused(dp.check_generation, cfg(),
                   [("the GTX 1080 is compute capability 6.1", "6.1")]) == (
        "the GTX 1080 is compute capability 6.1: Maxwell, Pascal or Volta, which CUDA 13 dropped "
        "(cuda_version is 13.2.1; CUDA 12 is their last), and NVIDIA's branch 580 is their last "
        "driver; fix: set driver_flavour = 'proprietary', cuda_version = '12.9.1' and "
        "driver_branch = 580, or use a Turing or newer card")
    # 7.5 (Turing) is new enough; the first old card is the one named
    dp.check_generation(cfg(), [("t4", "7.5")])
    assert refused(dp.check_generation, cfg(), [("t4", "7.5"), ("v100", "7.0"),
                                                 ("p100", "6.0")]).startswith("v100: ")


def test_a_branch_after_580_is_refused_for_a_pre_turing_card():
    old = cfg(cuda_version="12.9.1", driver_flavour="proprietary", driver_branch=590)
    assert refused(dp.check_generation, old, [("the GTX 1080 is compute capability 6.1",
                                               "6.1")]) == (
        "host data `driver_branch`: branch 590 drops Maxwell, Pascal and Volta, and the GTX "
        "1080 is compute capability 6.1: NVIDIA's 580 is its last; fix: set driver_branch = 580 "
        "(with cuda_version = '12.9.1')")
    dp.check_generation(cfg(cuda_version="12.9.1", driver_flavour="proprietary", driver_branch=580),
                        [("gtx", "6.1")])
    # no driver_branch: the branch the chosen CUDA ships with is the one judged
    assert "branch 595 drops" in refused(dp.check_branch_keeps_card, cfg(), [("gtx", "6.1")])
    dp.check_branch_keeps_card(cfg(), [("rtx", "8.9")])


def test_the_branch_to_install():
    assert dp.driver_branch_to_install(cfg()) == 595
    assert dp.driver_branch_to_install(cfg(cuda_version="13.0.2")) == 580
    assert dp.driver_branch_to_install(cfg(driver_branch=600)) == 600
    assert dp.driver_branch_to_install(cfg(driver_branch=580, mode="native")) == 580
    assert refused(dp.driver_branch_to_install, cfg(cuda_version="12.9.1")) == (
        "host data `cuda_version`: no known driver branch for CUDA 12.9.1: set driver_branch "
        "to the branch NVIDIA's release notes give for it")
    assert refused(dp.driver_branch_to_install, cfg(driver_branch=580)) == (
        "host data `driver_branch`: 580 runs CUDA 13.0, but cuda_version is 13.2.1 (the image "
        "asks cuda>=13.2): set driver_branch = 595 or remove it")
    assert refused(dp.driver_branch_to_install, cfg(driver_branch=570, mode="native")) == (
        "host data `driver_branch`: 570 runs CUDA older than 13.2, but cuda_version is 13.2.1 "
        "(the image asks cuda>=13.2): set driver_branch = 595 or remove it")
    # a container on a branch the kit knows no CUDA of: refused, as it cannot be told
    assert "570 runs CUDA older than 13.2" in refused(dp.driver_branch_to_install,
                                                      cfg(driver_branch=570))


# --- a driver too old for the image -------------------------------------------------------

GEFORCE_580 = smi(branch=580, cuda="13.0")


def test_a_driver_too_old_says_what_it_reports_and_what_the_image_asks():
    assert dp.driver_too_old(cfg(), NATIVE, GEFORCE_580) == (
        "driver 580.95.05 reports CUDA 13.0, brand GeForce, older than the image's CUDA 13.2.1 "
        "(NVIDIA_REQUIRE_CUDA cuda>=13.2)")
    assert dp.driver_too_old(cfg(), NATIVE, replace(GEFORCE_580, brand=None)) == (
        "driver 580.95.05 reports CUDA 13.0, older than the image's CUDA 13.2.1 "
        "(NVIDIA_REQUIRE_CUDA cuda>=13.2)")
    # no CUDA line: the branch's own CUDA is what it reports
    assert "driver 590.95.05 reports CUDA 13.1," in dp.driver_too_old(
        cfg(), NATIVE, smi(branch=590, cuda=None))
    assert dp.driver_too_old(cfg(), NATIVE, smi(branch=595, cuda=None)) is None
    assert dp.driver_too_old(cfg(), NATIVE, smi(branch=595)) is None
    # a branch below the CUDA major's floor
    assert dp.driver_too_old(cfg(), NATIVE, smi(branch=570, cuda="12.8")) == \
        "driver 570.95.05 is older than 580, which CUDA 13.2.1 needs"
    assert dp.driver_too_old(cfg(mode="native"), NATIVE, smi(branch=570, cuda="12.8")) == \
        "driver 570.95.05 is older than 580, which CUDA 13.2.1 needs"


def test_a_datacenter_card_runs_a_newer_image_on_580_but_not_under_wsl2():
    h200 = smi(H200, branch=580, cuda="13.0", brand="NVIDIA")
    assert dp.driver_too_old(cfg(), NATIVE, h200) is None
    assert dp.driver_too_old(cfg(), NATIVE, replace(h200, driver_version="570.1",
                                                    driver_branch=570, cuda_version="12.8")) \
        is None
    # under WSL2 forward compatibility does not apply: the CUDA it reports is judged
    assert dp.driver_too_old(cfg(), WSL, h200) == (
        "the Windows driver 580.95.05 reports CUDA 13.0, older than CUDA 13.2, which CUDA "
        "13.2.1 needs (NVIDIA_REQUIRE_CUDA cuda>=13.2)")
    # native mode: any 13.x driver of the major's floor runs it
    assert dp.driver_too_old(cfg(mode="native"), NATIVE, GEFORCE_580) is None
    # a CUDA reported that the branch could not report is facts out of step, not a driver
    # that runs the image
    assert dp.driver_too_old(cfg(), NATIVE, smi(branch=570, cuda="13.2")) == \
        "driver 570.95.05 is older than 580, which CUDA 13.2.1 needs"


def test_a_driver_too_old_offers_the_three_ways():
    assert refused_old(cfg(), NATIVE, GEFORCE_580) == (
        "WHY: set upgrade_driver = True (the kit purges the installed NVIDIA driver packages and "
        "installs branch 595, pinned to it; a reboot follows), cuda_follows_driver = True (the "
        "image is built for CUDA 13.0.2, which this driver runs), or update the NVIDIA driver on "
        "the host to branch 595 or newer, or set cuda_version = '13.0.2'")
    # native mode: the image cannot follow; a CUDA the kit knows no release of: no follow
    native = refused_old(cfg(mode="native"), NATIVE, smi(branch=570, cuda="12.8"))
    assert native == (
        "WHY: set upgrade_driver = True (the kit purges the installed NVIDIA driver packages and "
        "installs branch 595, pinned to it; a reboot follows), or update the NVIDIA driver on "
        "the host to branch 595 or newer, or set cuda_version = '12.8.1'")
    assert "cuda_follows_driver" not in refused_old(cfg(), NATIVE,
                                                smi(branch=470, cuda="11.4"))
    # no CUDA line: the branch's CUDA
    assert refused_old(cfg(), NATIVE, smi(branch=580, cuda=None)).endswith(
        "set cuda_version = '13.0.2'")


def test_a_driver_too_old_is_upgraded_or_followed_when_host_data_says_so():
    assert dp.old_driver(cfg(upgrade_driver=True), NATIVE, GEFORCE_580, "WHY") == \
        DriverPlan(action="upgrade")
    assert dp.old_driver(cfg(cuda_follows_driver=True), NATIVE, GEFORCE_580, "WHY") == \
        DriverPlan(cuda_version="13.0.2")
    assert dp.old_driver(cfg(cuda_follows_driver=True), NATIVE, smi(branch=580, cuda=None),
                         "WHY") == DriverPlan(cuda_version="13.0.2")
    assert refused_old(cfg(cuda_follows_driver=True, mode="native"), NATIVE,
                   GEFORCE_580) == (
        "host data `cuda_follows_driver`: WHY; it applies to container mode only: set "
        "cuda_version = '13.0.2', or upgrade_driver = True")
    assert refused_old(cfg(cuda_follows_driver=True), NATIVE,
                   smi(branch=470, cuda="11.4")) == (
        "host data `cuda_follows_driver`: WHY, and the kit knows no nvidia/cuda release for "
        "CUDA 11.4: set cuda_version to a 11.4 release (the kit names none: pick one that "
        f"nvidia/cuda tags as <release>-devel-ubuntu20.04, {dp.CUDA_TAGS}), or update the "
        "NVIDIA driver on the host to branch 595 or newer")
    assert refused_old(cfg(), WSL, GEFORCE_580) == (
        f"WHY: {WIN}, or set cuda_version = '13.0.2' (or "
        "cuda_follows_driver = True)")
    # upgrade_driver under WSL2: the Windows driver is not the kit's
    assert "on Windows" in refused_old(cfg(upgrade_driver=True), WSL, GEFORCE_580)


# nvidia-smi that lists a card but prints neither a driver version nor a CUDA version
NO_VERSION = NvidiaSmiInfo(path="/usr/bin/nvidia-smi", gpus=(card(),), brand="GeForce")
UPGRADE = ("set upgrade_driver = True (the kit purges the installed NVIDIA driver packages and "
           "installs branch 595, pinned to it; a reboot follows), ")


def test_a_driver_that_reports_no_cuda_is_refused_for_what_it_does_not_say():
    # issue 45: this line read "driver None reports CUDA 0.0" and advised "a 0.0 release"
    assert dp.reported_cuda(NO_VERSION) is None
    why = dp.driver_too_old(cfg(), NATIVE, NO_VERSION)
    assert why == (
        'the driver (nvidia-smi prints no driver version) reports no CUDA version (no "CUDA '
        'Version" in nvidia-smi), brand GeForce, so the kit cannot tell that it runs the '
        "image's CUDA 13.2.1 (NVIDIA_REQUIRE_CUDA cuda>=13.2)")
    # the deploy stops on that line, offering no release of a CUDA nobody reported
    assert refused(dp.check_gpu, cfg(), NATIVE, NO_VERSION, 0, []) == (
        f"{why}: {UPGRADE}or update the NVIDIA driver on the host to branch 595 or newer, or "
        "set cuda_version")
    # native mode: any driver the floor lets through builds (a driver of no version included)
    assert dp.driver_too_old(cfg(mode="native"), NATIVE, NO_VERSION) is None
    # a branch the kit's table knows no CUDA of (below 580), the CUDA line missing
    assert dp.reported_cuda(smi(branch=550, cuda=None)) is None
    assert dp.reported_cuda(smi(branch=580, cuda=None)) == "13.0"
    assert dp.reported_cuda(smi(branch=550, cuda="12.4")) == "12.4"
    assert dp.driver_too_old(cfg(cuda_version="12.8.1"), NATIVE,
                             smi(branch=550, cuda=None, brand=None)) == (
        'driver 550.95.05 reports no CUDA version (no "CUDA Version" in nvidia-smi, and the kit '
        "knows no CUDA of branch 550), so the kit cannot tell that it runs the image's CUDA "
        "12.8.1 (NVIDIA_REQUIRE_CUDA cuda>=12.8)")
    assert dp.driver_too_old(cfg(), NATIVE, smi(branch=470, cuda=None)) == \
        "driver 470.95.05 is older than 580, which CUDA 13.2.1 needs"


WSL_12_6 = smi(branch=560, cuda="12.6", path=WSL_SMI)


@pytest.mark.parametrize(("c", "wsl", "gpu", "named"), [
    (cfg(), NATIVE, GEFORCE_580, ["cuda_version = '13.0.2'", "branch 595"]),
    (cfg(mode="native"), NATIVE, smi(branch=570, cuda="12.8"),
     ["cuda_version = '12.8.1'", "branch 595"]),
    (cfg(cuda_follows_driver=True), NATIVE, smi(branch=470, cuda="11.4"), ["branch 595"]),
    (cfg(cuda_follows_driver=True), NATIVE, NO_VERSION, ["branch 595"]),
    (cfg(cuda_follows_driver=True), WSL, WSL_12_6, ["reports CUDA 13.2 or newer"]),
    (cfg(cuda_follows_driver=True, mode="native"), WSL, WSL_12_6,
     ["reports CUDA 13.0 or newer"]),
    (cfg(), WSL, smi(branch=591, cuda="13.1", path=WSL_SMI),
     ["reports CUDA 13.2 or newer", "cuda_version = '13.1.2'"]),
], ids=["container", "native", "follows-11.4", "follows-no-cuda", "follows-wsl2",
        "follows-native-wsl2", "wsl2"])
def test_each_way_out_of_a_driver_too_old_names_its_release(c, wsl, gpu, named):
    """A refusal that says the driver is too old names what would do: it said "set
    cuda_version" alone (cuda_follows_driver with no image to follow to), "a 13.0 release"
    where the kit knows 13.0.2, and "update the NVIDIA driver on Windows" to no release."""
    with pytest.raises(PreflightError) as e:
        dp.check_gpu(c, wsl, gpu, 0, [])
    assert [n for n in named if n not in e.value.fix] == [], str(e.value)


def test_a_driver_that_reports_no_cuda_is_offered_no_release_to_set_or_follow():
    for gpu in (NO_VERSION, smi(branch=470, cuda=None)):
        assert refused_old(cfg(), NATIVE, gpu) == (
            f"WHY: {UPGRADE}or update the NVIDIA driver on the host to branch 595 or newer, or "
            "set cuda_version")
        assert refused_old(cfg(), WSL, gpu) == (
            f"WHY: {WIN}, or set cuda_version")
        assert refused_old(cfg(cuda_follows_driver=True), NATIVE, gpu) == (
            "host data `cuda_follows_driver`: WHY, and the driver reports no CUDA version to "
            "follow: set cuda_version, or update the NVIDIA driver on the host to branch 595 or "
            "newer")
        assert refused_old(cfg(cuda_follows_driver=True, mode="native"), NATIVE,
                       gpu) == (
            "host data `cuda_follows_driver`: WHY; it applies to container mode only: set "
            "cuda_version, or upgrade_driver = True")
        assert dp.old_driver(cfg(upgrade_driver=True), NATIVE, gpu, "WHY") == \
            DriverPlan(action="upgrade")


def test_wsl2_judges_the_windows_driver_by_the_cuda_it_reports_not_its_number():
    """Under WSL2 nvidia-smi shows the Windows driver's number, which is no Linux branch: a
    driver 560.94 reporting CUDA 12.6 was refused as "older than 580" (a Linux branch), and
    told only to "update the NVIDIA driver on Windows", naming no release."""
    old = replace(smi(branch=560, cuda="12.6", path=WSL_SMI), driver_version="560.94")
    assert dp.driver_too_old(cfg(), WSL, old) == (
        "the Windows driver 560.94 reports CUDA 12.6, older than CUDA 13.2, which CUDA 13.2.1 "
        "needs (NVIDIA_REQUIRE_CUDA cuda>=13.2)")
    # natively, minor version compatibility: a driver of any 13.x
    assert dp.driver_too_old(cfg(mode="native"), WSL, old) == (
        "the Windows driver 560.94 reports CUDA 12.6, older than CUDA 13.0, which CUDA 13.2.1 "
        "needs (minor version compatibility)")
    assert dp.driver_too_old(cfg(mode="native"), WSL, replace(old, cuda_version="13.0")) \
        is None
    # a Windows number below the Linux floor that reports the CUDA asked for runs it
    assert dp.driver_too_old(cfg(), WSL, replace(old, cuda_version="13.2")) is None
    a_12_6 = ("to a 12.6 release (the kit names none: pick one that nvidia/cuda tags as "
              f"<release>-devel-ubuntu24.04, {dp.CUDA_TAGS})")
    fix = refused(dp.check_gpu, cfg(), WSL, old, 0, []).split(": ", 1)[1]
    assert fix == f"{WIN}, or set cuda_version {a_12_6}"
    native = refused(dp.check_gpu, cfg(mode="native"), WSL, old, 0, [])
    assert native.endswith(": " + WIN_NATIVE + ", or set "
                           "cuda_version to a 12.6 release"), native
    # cuda_follows_driver: no image of 12.6 to follow to; the Windows driver named
    assert refused(dp.check_gpu, cfg(cuda_follows_driver=True), WSL, old, 0, []) == (
        "host data `cuda_follows_driver`: the Windows driver 560.94 reports CUDA 12.6, older "
        "than CUDA 13.2, which CUDA 13.2.1 needs (NVIDIA_REQUIRE_CUDA cuda>=13.2), and the kit "
        f"knows no nvidia/cuda release for CUDA 12.6: set cuda_version {a_12_6}, or {WIN}")
    # cuda_follows_driver natively under WSL2: never upgrade_driver (a Linux driver)
    assert refused(dp.check_gpu, cfg(mode="native", cuda_follows_driver=True), WSL, old, 0,
                   []).endswith("it applies to container mode only: set cuda_version to a "
                                "12.6 release, or " + WIN_NATIVE)


def test_wsl2_without_a_cuda_line_judges_the_windows_drivers_number_as_a_branch():
    """An nvidia-smi under WSL2 that prints no "CUDA Version": the Windows driver's number
    is judged as a Linux branch (R580 is both): a 560.94 is refused natively too, not built
    for a CUDA 13 it cannot run; a 581.57 builds natively, and is refused for the 13.2
    image its branch does not run, as on Linux."""
    old = replace(smi(branch=560, cuda=None, path=WSL_SMI), driver_version="560.94")
    assert dp.driver_too_old(cfg(mode="native"), WSL, old) == \
        "driver 560.94 is older than 580, which CUDA 13.2.1 needs"
    new = replace(smi(branch=581, cuda=None, path=WSL_SMI), driver_version="581.57")
    assert dp.driver_too_old(cfg(mode="native"), WSL, new) is None
    assert dp.driver_too_old(cfg(), WSL, new) == (
        "driver 581.57 reports CUDA 13.0, brand GeForce, older than the image's CUDA 13.2.1 "
        "(NVIDIA_REQUIRE_CUDA cuda>=13.2)")


def test_wsl2_offers_following_the_driver_only_where_the_kit_has_its_image():
    # CUDA 12.4 (a 550 Windows driver): no nvidia/cuda release the kit builds, so following
    # it would be refused next; the way out offered is the driver or cuda_version, and, the
    # kit naming no 12.4 release, where nvidia/cuda lists them
    assert refused_old(cfg(), WSL, smi(branch=550, cuda="12.4")) == (
        f"WHY: {WIN}, or set cuda_version to a 12.4 release (the "
        "kit names none: pick one that nvidia/cuda tags as <release>-devel-ubuntu22.04, "
        f"{dp.CUDA_TAGS})")
    # native mode installs cuda-toolkit-12-4 for any 12.4 release: no image to look up
    assert refused_old(cfg(mode="native"), WSL, smi(branch=550, cuda="12.4")) == (
        f"WHY: {WIN_NATIVE}, or set cuda_version to a 12.4 release")
    assert refused_old(cfg(mode="native"), WSL, GEFORCE_580) == (
        f"WHY: {WIN_NATIVE}, or set cuda_version = '13.0.2'")
    assert refused_old(cfg(), WSL, GEFORCE_580).endswith(
        "= '13.0.2' (or cuda_follows_driver = True)")


def test_wsl2_driver_reporting_cuda_12_6_is_refused_then_takes_the_release_it_is_told_of():
    """docs/quickstart-wsl2.md's table, row "anything else" (a Windows driver reporting 12.6):
    by default refused before any change; the refusal offers cuda_version to a 12.6 release,
    which the kit has no image of (cuda_follows_driver builds 12.8 to 13.2), so it says where
    nvidia/cuda lists one; given one, the deploy goes on, building for it."""
    from .harness import ROOT, RTX4090, facts, run_deploy, uploaded

    old = replace(RTX4090, cuda_version="12.6", driver_version="560.94", driver_branch=560)
    with pytest.raises(PreflightError) as e:
        run_deploy(DEFAULTS, facts(GpuInfo=old))
    assert e.value.subject == "the Windows driver 560.94", str(e.value)
    assert e.value.fix.startswith(f"{WIN}, or set cuda_version to a 12.6 release"), str(e.value)
    assert dp.CUDA_TAGS in e.value.fix and "cuda_follows_driver" not in e.value.fix
    with pytest.raises(PreflightError) as e:
        run_deploy({**DEFAULTS, "cuda_follows_driver": True}, facts(GpuInfo=old))
    assert e.value.subject == "host data `cuda_follows_driver`", str(e.value)
    ops = run_deploy({**DEFAULTS, "cuda_version": "12.6.3"}, facts(GpuInfo=old))
    assert "ARG BUILD_BASE=nvidia/cuda:12.6.3-devel-ubuntu24.04\n" in uploaded(
        ops, "Render the Dockerfile")
    # the quickstart's row says so: refused by default, cuda_version the way out, found there
    row = next(line for line in (ROOT / "docs" / "quickstart-wsl2.md").read_text().splitlines()
               if line.strip().startswith("| anything else"))
    assert "refused before any change" in row and "cuda_version" in row, row
    assert f"]({dp.CUDA_TAGS})" in row and "`12.6.3`" in row, row


def test_an_upgrade_is_planned_only_for_a_driver_too_old_and_checks_the_new_branch():
    assert dp.check_gpu(cfg(upgrade_driver=True), NATIVE, GEFORCE_580, 0, []) == \
        DriverPlan(action="upgrade")
    assert dp.check_gpu(cfg(upgrade_driver=True), NATIVE, smi(), 0, []) == DriverPlan()
    # the branch it upgrades to must keep the card (the open modules: Turing and newer)
    old = smi(V100, branch=580, cuda="13.0", brand="Tesla")
    with pytest.raises(PreflightError, match="CUDA 13 dropped"):
        dp.check_gpu(cfg(upgrade_driver=True), NATIVE, old, 0, [])
    with pytest.raises(PreflightError, match="driver_flavour`: 'open'"):
        dp.check_gpu(cfg(upgrade_driver=True, cuda_version="12.9.1", driver_branch=580),
                     NATIVE, replace(old, driver_branch=570, cuda_version="12.8"), 0, [])


# --- the open modules ----------------------------------------------------------------------

def test_the_open_modules_need_turing_on_every_card():
    assert refused(dp.check_flavour, cfg(), smi(V100)) == (
        "host data `driver_flavour`: 'open' (the default) needs a Turing or newer GPU, and the "
        "Tesla V100-SXM2-16GB is compute capability 7.0: set driver_flavour = 'proprietary'")
    assert "compute capability 7: set" in refused(dp.check_flavour, cfg(),
                                                  smi(card(name="X", cap="7")))
    dp.check_flavour(cfg(), smi(card(name="T4", cap="7.5")))
    dp.check_flavour(cfg(driver_flavour="proprietary"), smi(V100))
    dp.check_flavour(cfg(), None)
    dp.check_flavour(cfg(), NvidiaSmiInfo(path="x"))
    dp.check_flavour(cfg(), smi(card(cap=None)))
    # an old card beside a new one: the open modules would not drive it (check_flavour_by_pci
    # refuses any old card of the host too)
    assert "the Tesla V100-SXM2-16GB is compute capability 7.0" in refused(
        dp.check_flavour, cfg(), smi(card(), V100))
    # reached by an upgrade of a host of a 4090 and a V100 on CUDA 12 and branch 580 with the
    # default flavour: the open modules were installed and the V100 lost (a product bug found
    # writing these tests for issue 45: only the first card was judged)
    cuda12 = cfg(upgrade_driver=True, cuda_version="12.9.1", driver_branch=580)
    assert "the Tesla V100-SXM2-16GB is compute capability 7.0" in refused(
        dp.check_gpu, cuda12, NATIVE, smi(card(), V100, branch=570, cuda="12.8"), 0, [])
    assert dp.check_gpu(cfg(upgrade_driver=True, cuda_version="12.9.1", driver_branch=580,
                            driver_flavour="proprietary"), NATIVE,
                        smi(card(), V100, branch=570, cuda="12.8"), 0, []) == \
        DriverPlan(action="upgrade")


def test_the_cap_is_read_with_or_without_its_minor():
    assert dp._cap("7.5") == (7, 5) and dp._cap("8") == (8, 0) and dp._cap("10.0") == (10, 0)
    assert dp._cards(smi(card(), card(cap=None))) == [
        ("the NVIDIA GeForce RTX 4090 is compute capability 8.9", "8.9")]


# --- Secure Boot and a driver that does not load ------------------------------------------

MODULE = NvidiaModuleInfo(path="/lib/modules/6.8.0-45-generic/updates/dkms/nvidia.ko.zst")
PACKAGES = ["nvidia-driver-580", "nvidia-dkms-580", "libnvidia-compute-580", "nvidia-utils-580"]
KEY = "/var/lib/shim-signed/mok/MOK.der"
ON = SecureBootInfo(state="enabled", line="SecureBoot enabled")
ON_KEY = replace(ON, dkms_keys=(("/var/lib/dkms/mok.pub", "not-enrolled"), (KEY, "enrolled")))
ON_PENDING = replace(ON, dkms_keys=((KEY, "pending"),))
OFF = SecureBootInfo(state="disabled", line="SecureBoot disabled")
HEAD = ("the NVIDIA driver is installed (/lib/modules/6.8.0-45-generic/updates/dkms/nvidia.ko.zst"
        "{}) but not loaded (nvidia-smi sees no GPU)")
UBUNTU_KEY = ("create and enrol DKMS's module signing key first (`sudo update-secureboot-policy "
              "--new-key && sudo update-secureboot-policy --enroll-key`), reboot and choose "
              "Enroll MOK in the MOK manager, then deploy again; or disable Secure Boot in the "
              "firmware")
DEBIAN_KEY = ("create and enrol DKMS's module signing key first (`sudo mkdir -p /var/lib/dkms && "
              "sudo openssl req -new -x509 -nodes -days 36500 -subj '/CN=DKMS module signing "
              "key/' -newkey rsa:2048 -keyout /var/lib/dkms/mok.key -outform DER -out "
              "/var/lib/dkms/mok.pub && sudo mokutil --import /var/lib/dkms/mok.pub`), reboot "
              "and choose Enroll MOK in the MOK manager, then deploy again; or disable Secure "
              "Boot in the firmware")


def test_the_signing_key_is_made_the_distros_way():
    assert dp.new_mok("ubuntu") == UBUNTU_KEY
    assert dp.new_mok("debian") == DEBIAN_KEY
    assert dp.enrol_mok("ubuntu") == (
        "DKMS-built modules load only when signed with an enrolled Machine Owner Key: `sudo "
        f"mokutil --import {KEY}` (no such file: {UBUNTU_KEY}), reboot and choose Enroll MOK in "
        "the MOK manager, then `sudo dkms autoinstall` and reboot; or disable Secure Boot in the "
        "firmware")
    assert dp.enrol_mok("debian").startswith(
        "DKMS-built modules load only when signed with an enrolled Machine Owner Key: `sudo "
        f"mokutil --import /var/lib/dkms/mok.pub` (no such file: {DEBIAN_KEY}), reboot")


def test_secure_boot_on_without_an_enrolled_key_is_refused(monkeypatch):
    said: list[str] = []
    monkeypatch.setattr(dp, "warn", said.append)
    assert refused(dp.check_secure_boot, ON, "ubuntu") == (
        "Secure Boot is on (SecureBoot enabled) and no DKMS signing key is enrolled, so the "
        f"NVIDIA module the kit would build would be rejected at boot: {UBUNTU_KEY}")
    assert refused(dp.check_secure_boot, ON_PENDING, "debian") == (
        "Secure Boot is on (SecureBoot enabled) and no DKMS signing key is enrolled, so the "
        f"NVIDIA module the kit would build would be rejected at boot; {KEY} waits for "
        f"enrolment: reboot and choose Enroll MOK: {DEBIAN_KEY}")
    assert refused(dp.check_secure_boot, SecureBootInfo(state="enabled"), "ubuntu").startswith(
        "Secure Boot is on (enabled) and no DKMS")
    dp.check_secure_boot(ON_KEY, "ubuntu")
    dp.check_secure_boot(OFF, "ubuntu")
    assert said == []
    dp.check_secure_boot(None, "ubuntu")
    assert said == [
        "Secure Boot state unknown (no mokutil, no readable efivar): if it is on, the NVIDIA "
        "module will not load until its DKMS key is enrolled (apt install mokutil to let "
        "preflight check)"]


def test_a_driver_that_does_not_load_is_refused_by_its_cause(monkeypatch):
    monkeypatch.setattr(dp, "warn", lambda _: None)
    packages = ", nvidia-driver-580, nvidia-dkms-580, libnvidia-compute-580, ..."
    assert refused(dp.check_driver_install, PACKAGES, MODULE, ON_PENDING) == (
        HEAD.format(packages) + f": the key {KEY} waits for enrolment: reboot and choose Enroll "
        "MOK in the MOK manager, then deploy again")
    since = replace(MODULE, since_boot=True)
    assert refused(dp.check_driver_install, PACKAGES[:2], since, OFF) == (
        HEAD.format(", nvidia-driver-580, nvidia-dkms-580") + ": it was installed after the "
        "last boot; reboot the host (or set allow_reboot = True), then deploy again")
    assert refused(dp.check_driver_install, PACKAGES[:3], since, ON_KEY) == (
        HEAD.format(", nvidia-driver-580, nvidia-dkms-580, libnvidia-compute-580") + ": it was "
        f"installed after the last boot (DKMS signs it with the enrolled key {KEY}); reboot the "
        "host (or set allow_reboot = True), then deploy again")
    assert refused(dp.check_driver_install, PACKAGES[:1], MODULE, ON, False, "debian") == (
        HEAD.format(", nvidia-driver-580") + ", and Secure Boot is on, the likely cause (the "
        f"kernel rejects an unsigned DKMS module): {dp.enrol_mok('debian')}")
    tail = ("see `sudo modprobe nvidia` and `sudo dmesg | grep -i nvidia`, or purge the driver "
            "packages to let the kit install its own; the kit does not install a second driver "
            "over it")
    assert refused(dp.check_driver_install, [], replace(MODULE, loaded=True), OFF) == (
        HEAD.format("") + " (the module is loaded: a driver/library mismatch after an upgrade, "
        f"a reboot fixes it); Secure Boot is disabled: {tail}")
    assert refused(dp.check_driver_install, [], MODULE, None) == (
        HEAD.format("") + f"; Secure Boot is unknown: {tail}")


def test_a_driver_installed_since_the_boot_goes_on_where_a_reboot_loads_it(monkeypatch):
    monkeypatch.setattr(dp, "warn", lambda _: None)
    since = replace(MODULE, since_boot=True)
    dp.check_driver_install(PACKAGES, since, OFF, True)
    dp.check_driver_install(PACKAGES, since, ON_KEY, True)
    # Secure Boot on and no key: a reboot would not load it
    assert "and Secure Boot is on, the likely cause" in refused(
        dp.check_driver_install, PACKAGES, since, ON, True)
    # not since the boot: a reboot is no fix, whatever host data allows
    assert "Secure Boot is disabled: see" in refused(dp.check_driver_install, PACKAGES, MODULE,
                                                     OFF, True)
    # no module for the running kernel: DKMS builds it, Secure Boot permitting
    dp.check_driver_install(PACKAGES, None, OFF)
    dp.check_driver_install(PACKAGES, NvidiaModuleInfo(), OFF)
    assert refused(dp.check_driver_install, PACKAGES, None, ON, False, "debian").endswith(
        DEBIAN_KEY)
    assert refused(dp.check_driver_install, PACKAGES, None, ON).endswith(UBUNTU_KEY)


# --- the second survivors' round (the first mutation run of tasks/driver_preflight.py) -----

def test_a_turing_card_keeps_every_branch():
    dp.check_branch_keeps_card(cfg(), [("the Tesla T4 is compute capability 7.5", "7.5")])


def test_cards_exactly_filled_by_the_plan_and_its_margin_go_on():
    cpu = cfg(services=[{"profile": "cpu-tiny", "port": 8083, "service_name": "llm"}])
    dp.check_cards_memory(cpu, smi(card(mem=1024), card(mem=1024)))  # 0 MiB planned + 1024
    assert "the services plan 0 MiB of VRAM, more than the NVIDIA GeForce RTX 4090's 1023 MiB" \
        in refused(dp.check_cards_memory, cpu, smi(card(mem=1024), card(mem=1023)))


def test_a_card_without_a_compute_capability_is_passed_over_not_the_cards_after_it():
    assert "the Tesla V100-SXM2-16GB is compute capability 7.0" in refused(
        dp.check_flavour, cfg(), smi(card(cap=None), V100))
    assert "cuda_arch 90 has no kernels for the NVIDIA GeForce RTX 4090" in refused(
        dp.check_gpu, cfg(cuda_arch="90"), NATIVE, smi(card(cap=None), card()), 0, [])


def test_the_open_modules_by_pci_id_on_cuda_12_and_branch_580():
    """CUDA 13 refuses an old card first; on CUDA 12 and branch 580 the open modules' own
    rule is what refuses it, naming every old id."""
    cuda12 = cfg(cuda_version="12.9.1", driver_branch=580)
    assert refused(dp.check_flavour_by_pci, cuda12, (0x1DB4, 0x2684, 0x1B80)) == (
        "host data `driver_flavour`: 'open' (the default) needs a Turing or newer GPU, and this "
        "host's NVIDIA GPU (PCI id 10de:1db4, 10de:1b80) is older than Turing (ids below "
        "10de:1e00): set driver_flavour = 'proprietary'")
    dp.check_flavour_by_pci(cfg(upgrade_driver=True, cuda_version="12.9.1", driver_branch=580,
                            driver_flavour="proprietary"), (0x1DB4,))


def test_the_backports_refusal_says_the_series_the_meta_package_brings():
    from beekeeper.facts.host import AptPolicyInfo

    def says(have):
        return refused(dp.check_kernel_headers, {"id": "debian", "version_id": "12"},
                       "6.12.48+deb12-amd64", "linux-headers-amd64",
                       AptPolicyInfo(None, "6.12.48-1~bpo12+1"), AptPolicyInfo(None, have))

    tail = (": DKMS would build the NVIDIA module for no later backports kernel, and after the "
            "next kernel update it would not load; fix: `sudo apt install -t bookworm-backports "
            "linux-headers-amd64` (with bookworm-backports in apt's sources), then deploy again")
    head = ("the running kernel 6.12.48+deb12-amd64 is a bookworm-backports kernel, and Debian "
            "12's linux-headers-amd64 follows its own kernels")
    assert says("6.1.158-1") == \
        f"{head} (linux-headers-amd64 6.1.158-1 is the 6.1 series'){tail}"
    assert says(None) == head + tail


# check_cuda, through the deploy's own facts

def _never(**_):
    raise AssertionError("read where no driver is to be installed")


def test_the_install_checks_run_only_on_native_linux_with_a_card_and_no_working_driver():
    from .harness import PCI_RTX4090, RTX4090, facts, run_deploy

    unread = {"SecureBoot": _never, "NvidiaKernelModule": _never}
    native_smi = replace(RTX4090, path="/usr/bin/nvidia-smi")
    # a working driver on native Linux, the card on PCI: nothing to install
    assert run_deploy(DEFAULTS, facts(Wsl=NATIVE, GpuInfo=native_smi, PciListing=PCI_RTX4090,
                                      **unread))
    # no card anywhere: refused as no GPU, the install's facts not read
    with pytest.raises(PreflightError, match="no NVIDIA GPU found"):
        run_deploy(DEFAULTS, facts(Wsl=NATIVE, GpuInfo=None, **unread))
    with pytest.raises(PreflightError, match="no NVIDIA GPU visible in WSL2"):
        run_deploy(DEFAULTS, facts(GpuInfo=None, **unread))


def test_an_upgrade_under_secure_boot_without_a_key_is_refused_the_distros_way():
    from beekeeper.facts.boot import parse_secure_boot

    from .harness import PCI_RTX4090, RTX4090, SB_ENABLED, facts, run_deploy

    old = replace(RTX4090, path="/usr/bin/nvidia-smi", cuda_version="13.0",
                  driver_version="580.95.05", driver_branch=580)
    with pytest.raises(PreflightError) as e:
        run_deploy({**DEFAULTS, "upgrade_driver": True},
                   facts(Wsl=NATIVE, GpuInfo=old, PciListing=PCI_RTX4090,
                         LinuxDriverPackages=["nvidia-driver-580", "libnvidia-compute-580"],
                         SecureBoot=parse_secure_boot(SB_ENABLED)))
    assert str(e.value) == (
        "host canned: Secure Boot is on (SecureBoot enabled) and no DKMS signing key is "
        f"enrolled, so the NVIDIA module the kit would build would be rejected at boot: "
        f"{UBUNTU_KEY}")


def test_a_cuda_release_before_12_6_builds_from_nvidia_cudas_ubuntu_22_04_images():
    """nvidia/cuda has no ubuntu24.04 image before CUDA 12.5 (or 12.5.1): a Windows driver
    reporting CUDA 12.4 (a 550) is refused with the tag pattern that exists, and given the
    12.4.1 release the image is built from `12.4.1-devel-ubuntu22.04` and runs on
    `12.4.1-runtime-ubuntu22.04` (with ubuntu24.04 the build would fail at its first line: no
    such image); 12.6 and newer keep ubuntu24.04, a CUDA before 11.7 is named with
    ubuntu20.04.
    Mutant (as it was): ubuntu24.04 for every release."""
    from beekeeper.core.cudacompat import image_ubuntu

    from .harness import RTX4090, facts, run_deploy, uploaded

    versions = ("11.4", "11.6.2", "11.7.1", "12.4.1", "12.5.1", "12.6.0", "12.9.1", "13.2.1")
    assert [image_ubuntu(v) for v in versions] == [
        "ubuntu20.04", "ubuntu20.04", "ubuntu22.04", "ubuntu22.04", "ubuntu22.04",
        "ubuntu24.04", "ubuntu24.04", "ubuntu24.04"]
    old = replace(RTX4090, cuda_version="12.4", driver_version="552.22", driver_branch=552)
    with pytest.raises(PreflightError) as e:
        run_deploy(DEFAULTS, facts(GpuInfo=old))
    assert "tags as <release>-devel-ubuntu22.04" in e.value.fix, str(e.value)
    dockerfile = uploaded(run_deploy({**DEFAULTS, "cuda_version": "12.4.1"},
                                     facts(GpuInfo=old)), "Render the Dockerfile")
    assert "ARG BUILD_BASE=nvidia/cuda:12.4.1-devel-ubuntu22.04\n" in dockerfile
    assert "ARG RUNTIME_BASE=nvidia/cuda:12.4.1-runtime-ubuntu22.04\n" in dockerfile
