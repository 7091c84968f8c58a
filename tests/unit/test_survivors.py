"""
Mutants that survived the fast tier (issue 35; docs/testing.md, "Mutation testing"), each
killed here by a test of the behaviour the mutant breaks. A test's docstring names the
mutant it is for.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from beekeeper.core.errors import PreflightError
from beekeeper.core.profiles import PROFILES

from .harness import (
    DEFAULTS,
    NATIVE,
    PCI_A100,
    PCI_GTX1080,
    PCI_H200,
    PCI_RTX4090,
    PCI_V100,
    commands,
    facts,
    names,
    pci_facts,
    run_deploy,
)

ROOT = Path(__file__).resolve().parents[2]
NO_DRIVER = {"Wsl": NATIVE, "GpuInfo": None}
CPU_EXPECTED = PROFILES["cpu-tiny"].expected  # no figures of a card to judge against
OPEN = "Install the NVIDIA driver, branch 595 (nvidia-open)"
# what a pre-Turing card can run: the proprietary modules, and CUDA 12 on branch 580 (CUDA
# 13 and the branches after 580 dropped Maxwell, Pascal and Volta)
OLD_CARD = {"driver_flavour": "proprietary", "cuda_version": "12.9.1", "driver_branch": 580}
PROPRIETARY = "Install the NVIDIA driver, branch 580 (cuda-drivers)"


# --- PCI: datacenter cards are 3D controllers (class 0x0302), not VGA (0x0300) -----------

@pytest.mark.parametrize("listing", [PCI_H200, PCI_A100], ids=["H200", "A100"])
def test_a_datacenter_card_with_no_driver_is_found_and_gets_the_driver(listing):
    """Mutant: the PCI parser keeps class 0x0300 only. An H200 or A100 (class 0x030200, no
    display engine) with no driver was then refused with "no NVIDIA GPU found"."""
    assert len(pci_facts(listing)["PciNvidiaDevices"]) == 1
    steps = names(run_deploy(DEFAULTS, facts(**NO_DRIVER, PciListing=listing)))
    assert OPEN in steps
    assert steps[-1] == "Stop: the new NVIDIA driver needs a reboot"


def test_the_pci_parser_keeps_display_and_3d_functions_only():
    from beekeeper.facts.gpu import parse_pci_nvidia_devices

    listing = ["0x030000 0x2684", "0x030200 0x2335", "0x038000 0x1234",  # VGA, 3D, other
               "0x040300 0x22ba", "0x0c0330 0x1ada", "0x068000 0x22a3",  # audio, USB, bridge
               "0x030000 bogus", "0x030200"]  # unreadable device files
    assert parse_pci_nvidia_devices(listing) == (0x2684, 0x2335, 0x1234)
    # sysfs writes lower-case hex; an upper-case id (a hand-made tree) reads the same
    assert parse_pci_nvidia_devices(["0x030200 0x1DB4"]) == (0x1DB4,)


def test_no_nvidia_function_on_pci_is_no_gpu_on_native_linux():
    with pytest.raises(PreflightError, match=r"no NVIDIA GPU found \(nvidia-smi missing\)"):
        run_deploy(DEFAULTS, facts(**NO_DRIVER, PciListing=("0x040300 0x22ba",)))


def test_the_harness_refuses_a_pci_state_no_host_can_have():
    with pytest.raises(ValueError, match="PciNvidiaDevices"):
        run_deploy(DEFAULTS, facts(**NO_DRIVER, PciListing=PCI_RTX4090,
                                   PciNvidiaDevices=(0x1B80,)))


# --- the pre-Turing boundary (open kernel modules need Turing, PCI ids from 10de:1e00) -----

def test_a_v100_with_no_driver_gets_the_proprietary_flavour_not_open_modules():
    """Mutant: FIRST_TURING_PCI_ID moved to 0x1D00. A V100 (GV100, 10de:1db4, Volta) then got
    nvidia-open, which does not load on it after the reboot."""
    with pytest.raises(PreflightError, match=r"PCI id 10de:1db4\) is older than Turing"):
        run_deploy(DEFAULTS, facts(**NO_DRIVER, PciListing=PCI_V100))
    assert PROPRIETARY in names(run_deploy({**DEFAULTS, **OLD_CARD},
                                           facts(**NO_DRIVER, PciListing=PCI_V100)))


@pytest.mark.parametrize(("device", "old"), [
    (0x1B80, True),   # GTX 1080 (Pascal)
    (0x1DB4, True),   # V100 PCIe (Volta)
    (0x1DFF, True),   # the last id below the rule's line
    (0x1E00, False),  # the rule's line: "ids below 10de:1e00" are pre-Turing
    (0x1E04, False),  # RTX 2080 Ti (TU102, Turing)
    (0x2684, False),  # RTX 4090 (Ada)
])
def test_the_open_modules_rule_draws_its_line_at_10de_1e00(device, old):
    from beekeeper.core.config import load_host_config
    from beekeeper.tasks.driver_preflight import check_flavour_by_pci

    cfg = load_host_config(DEFAULTS)
    if old:
        with pytest.raises(PreflightError, match=f"10de:{device:04x}"):
            check_flavour_by_pci(cfg, (0x2684, device))  # any old card of the host counts
    else:
        check_flavour_by_pci(cfg, (device,))
    # the proprietary flavour of a branch that still has the card: never refused
    check_flavour_by_pci(load_host_config({**DEFAULTS, **OLD_CARD}), (device,))


def test_a_turing_card_with_no_driver_gets_open_modules():
    turing = ("0x030000 0x1e04", "0x040300 0x10f7")  # RTX 2080 Ti and its audio
    assert OPEN in names(run_deploy(DEFAULTS, facts(**NO_DRIVER, PciListing=turing)))
    with pytest.raises(PreflightError, match="driver_flavour = 'proprietary'"):
        run_deploy(DEFAULTS, facts(**NO_DRIVER, PciListing=PCI_GTX1080))


# --- the multi-host summary -----------------------------------------------------------------

def _summary(state, capsys) -> list[str]:
    capsys.readouterr()
    from beekeeper.tasks.hostfail import print_summary

    print_summary(state, state.beekeeper_failures)
    return capsys.readouterr().err.splitlines()


def test_a_bad_host_that_is_the_last_one_active_is_counted_in_the_summary(capsys):
    """Mutant: the summary is built from pyinfra's failed hosts only. The last host still
    active that fails raises (pyinfra stops the run) instead of being marked failed, so it
    is in beekeeper's own record only and disappeared from "N of M hosts failed"."""
    from .harness import CPU_GIT, CPU_HOST, _deploy_hosts, facts as cpu_facts

    bad = {**CPU_GIT, "prot": 1}
    state, errors = _deploy_hosts([("gone", CPU_GIT), ("first", bad), ("last", bad)],
                                  cpu_facts(**CPU_HOST), unreachable={"gone"})
    assert list(errors) == ["last"]  # the last one active raised, as pyinfra's run ends
    assert {h.name for h in state.failed_hosts} == {"gone", "first"}
    lines = _summary(state, capsys)
    assert lines[0] == "beekeeper: 3 of 3 hosts failed:"
    assert [x.split(":")[0] for x in lines[1:]] == ["  host first", "  host gone", "  host last"]
    assert lines[3].startswith("  host last: host data `prot`: unknown key")


# --- the Container Toolkit's hold, recorded for the uninstall ------------------------------

def test_the_container_toolkits_hold_is_recorded_for_the_uninstall(tmp_path):
    """Mutant: the hold step runs apt-mark hold without writing the kit's record
    (/etc/beekeeper/apt-holds), so the uninstall never released it. The step's command is run
    by sh, with apt-mark echoed and the record in tmp_path."""
    from beekeeper.core.paths import HOLDS_RECORD

    step = "Hold the Container Toolkit packages at the pinned version"
    (cmd,) = commands(run_deploy(DEFAULTS, facts()), step)
    record = tmp_path / "etc" / "apt-holds"
    here = cmd.replace("apt-mark hold", "echo apt-mark hold") \
        .replace(HOLDS_RECORD.rsplit("/", 1)[0], str(record.parent)) \
        .replace(HOLDS_RECORD, str(record))
    record.parent.mkdir(parents=True)
    record.write_text("nvidia-driver-open\n")  # a hold the driver step recorded before
    out = subprocess.run(["/bin/sh", "-c", here], capture_output=True, text=True, check=True)
    toolkit = ["nvidia-container-toolkit", "nvidia-container-toolkit-base",
               "libnvidia-container-tools", "libnvidia-container1"]
    assert out.stdout.split() == ["apt-mark", "hold", *toolkit]
    assert record.read_text().splitlines() == ["nvidia-driver-open", *toolkit]
    # packages apt holds already are neither held again nor recorded (not the kit's hold)
    ops = run_deploy(DEFAULTS, facts(AptHolds=toolkit))
    assert commands(ops, step) == []


# --- the host checks' decisions (verify/host_checks.py) ------------------------------------

def _tag(profile: str, data: dict | None = None) -> str:
    from beekeeper.core.config import load_host_config

    from .harness import requested_build

    cfg = load_host_config({**DEFAULTS, "profile": profile, **(data or {})})
    return requested_build(cfg, "8.9" if cfg.service.profile.backend == "cuda" else None).tag()


def test_an_image_of_a_profile_the_kit_does_not_know_is_gpu_checked_by_its_tag():
    """Mutant: uses_gpu answers False for a profile not in PROFILES. Such an image (a user's
    own profile, or one of a newer kit) was never GPU-checked, and the unit test meant for it
    reported SKIPPED: the check's skip was raised inside it."""
    from dataclasses import replace

    from beekeeper.core.deployed import DeployedService
    from beekeeper.verify import host_checks

    cuda, cpu = _tag("q8-turbo4-64k"), _tag("cpu-tiny")  # the tags core/build.py writes
    assert "-cuda13.2-sm" in cuda and "-cuda" not in cpu
    mine = DeployedService(mode="container", profile="my-own-profile", image=cuda)
    assert host_checks.uses_gpu(mine)
    assert not host_checks.uses_gpu(replace(mine, image=cpu))
    assert not host_checks.uses_gpu(DeployedService(profile="my-own-profile"))  # no image
    # a known profile is judged by its backend, whatever the tag says
    assert host_checks.uses_gpu(replace(mine, profile="q8-turbo4-64k", image=cpu))
    assert not host_checks.uses_gpu(replace(mine, profile="cpu-tiny", image=cuda))
    assert host_checks.gpu_checked([mine]).items == (mine,)
    assert host_checks.gpu_checked([replace(mine, image=cpu)]).skip == (
        "no container-mode service with a CUDA profile: no GPU to look for")


def test_each_host_check_applies_to_its_services_or_says_why_not():
    from dataclasses import replace

    from beekeeper.core.deployed import DeployedService
    from beekeeper.verify import host_checks as hc

    box = DeployedService(mode="container", profile="cpu-tiny", runtime="compose",
                          model_path="/m/a.gguf", model_sha256="a" * 64)
    unit = DeployedService(mode="native", profile="cpu-tiny", runtime="systemd",
                           model_path="/m/b.gguf", model_sha256=None, draft_path="/m/d.gguf",
                           draft_sha256="d" * 64)
    assert hc.containers([box, unit]) == hc.Applies(items=(box,))
    assert hc.native([box, unit]) == hc.Applies(items=(unit,))
    assert hc.compose([box, unit]) == hc.Applies(items=(box,))
    assert hc.hashed([box, unit]).items == (("/m/a.gguf", "a" * 64), ("/m/d.gguf", "d" * 64))
    assert hc.containers([unit]).skip.startswith("no container-mode service")
    assert hc.native([box]).skip == "no native-mode service"
    assert hc.compose([unit]) == hc.Applies(skip="no compose-runtime service")
    assert hc.hashed([replace(box, model_sha256=None)]).skip == (
        "no sha256 recorded for any model (a Hub model deployed unpinned): nothing to check "
        "the files against")
    for f in (hc.containers, hc.native, hc.compose, hc.hashed, hc.gpu_checked):
        assert f([]).items == () and f([]).skip


# --- verify's numeric rules, pinned at their lines (verify/judge.py's docstring says why
# each number is what it is); before, the CPU floor, the GPU TTFT ceiling, the CPU sampler
# allowance and the noise limit held against a change of 0.01 (tests only far from them)

def _decode(served: float, engine: float, *, cpu: bool, sampler_on_cpu: bool = False) -> str:
    from beekeeper.verify.engine import EngineBaseline
    from beekeeper.verify.judge import decode_checks
    from beekeeper.verify.results import EngineRun

    from .harness import bench, served as served_run

    base = EngineBaseline(placement="recorded", commands=[],
                          decode=[bench(0, 160, 1024, engine, 0.0)])
    checks = decode_checks([served_run(1024, [served])], EngineRun(requested=True,
                                                                   baseline=base),
                           CPU_EXPECTED, None, cpu=cpu, sampler_on_cpu=sampler_on_cpu)
    return next(c for c in checks if c.name == "decode.vs_engine@1024").status


@pytest.mark.parametrize(("cpu", "floor"), [(True, 0.70), (False, 0.95)])
def test_the_decode_floor_is_0_70_on_a_cpu_build_and_0_95_on_a_gpu_one(cpu, floor):
    engine = 100.0
    assert _decode(engine * (floor + 0.001), engine, cpu=cpu) == "PASS"
    assert _decode(engine * (floor - 0.001), engine, cpu=cpu) == "FAIL"


def test_a_gpu_server_sampling_on_the_cpu_is_allowed_2_ms_a_token():
    # at 100 tok/s (10 ms a token) the floor 0.95 becomes 1 / (1 / 0.95 + 2 ms * 100 / 1000)
    needs = 1 / (1 / 0.95 + 2.0 * 100.0 / 1000)
    assert _decode(100.0 * (needs + 0.001), 100.0, cpu=False, sampler_on_cpu=True) == "PASS"
    assert _decode(100.0 * (needs - 0.001), 100.0, cpu=False, sampler_on_cpu=True) == "FAIL"
    assert _decode(100.0 * (needs + 0.001), 100.0, cpu=False) == "FAIL"  # no allowance
    # a CPU build has its own floor and no allowance on top
    assert _decode(100.0 * 0.699, 100.0, cpu=True, sampler_on_cpu=True) == "FAIL"


def _ttft(ratio: float, *, cpu: bool) -> str:
    from beekeeper.verify.client import RequestRecord, StreamEvent
    from beekeeper.verify.engine import EngineBaseline
    from beekeeper.verify.judge import ttft_checks
    from beekeeper.verify.results import EngineRun, TtftResult

    from .harness import bench

    base = EngineBaseline(placement="recorded", commands=[],
                          decode=[bench(0, 160, 1024, 64.7, 0.0)],
                          prefill=bench(512, 0, 0, 512 / 0.982, 0.0))
    median = base.ttft_s(512) * ratio
    recs = [RequestRecord(ok=True, status_code=200, error=None, t_send_s=0.0,
                          events=[StreamEvent(median, "content", 1)],
                          usage={"prompt_tokens": 512}, timings={"cache_n": 0})
            for _ in range(5)]
    res = TtftResult(target_tokens=512, prompt_tokens=[512] * 5, records=recs)
    return next(c for c in ttft_checks(res, EngineRun(requested=True, baseline=base),
                                       CPU_EXPECTED, None, cpu=cpu)
                if c.name == "ttft.vs_engine").status


@pytest.mark.parametrize(("cpu", "ceiling"), [(True, 1.5), (False, 1.25)])
def test_the_ttft_ceiling_is_1_5_on_a_cpu_build_and_1_25_on_a_gpu_one(cpu, ceiling):
    assert _ttft(ceiling - 0.001, cpu=cpu) == "PASS"
    assert _ttft(ceiling + 0.001, cpu=cpu) == "FAIL"


def test_a_figure_whose_own_error_is_over_6_percent_cannot_judge():
    from beekeeper.verify.judge import Spread, judge_decode, too_noisy

    def fig(error: float, n: int = 4) -> Spread:  # relative spread = error x sqrt(n)
        return Spread("served decode", 100.0, 100.0 * error * n ** 0.5, "tok/s", n_requests=n)

    assert too_noisy([fig(0.0599)]) is None
    assert too_noisy([fig(0.0601)]) == fig(0.0601)
    assert too_noisy([fig(0.01), fig(0.07), fig(0.065)]) == fig(0.07)  # the worst is named
    # the error is the spread over sqrt(repeats): 10% over 4 requests is 5%, judged
    assert too_noisy([Spread("served decode", 100.0, 10.0, "tok/s", n_requests=4)]) is None
    assert too_noisy([Spread("llama-bench", 100.0, 10.0, "tok/s", n_repeats=2)]) is not None
    v = judge_decode(99.0, 100.0, 1024, spreads=[fig(0.0601)])
    assert v.status == "SKIP" and "over 6% cannot judge it" in v.detail
    assert judge_decode(99.0, 100.0, 1024, spreads=[fig(0.0599)]).status == "PASS"


# --- facts/boot.py: Secure Boot and .wslconfig parsing ---------------------------------------

def test_secure_boot_read_from_the_efivar_alone_says_enabled_in_the_refusal():
    """Mutant: the line for a state mokutil did not give is "XXXX", not "": the refusal
    then read "Secure Boot is on (XXXX)". No mokutil, the efivar's value byte 1."""
    from beekeeper.facts.boot import parse_secure_boot
    from beekeeper.tasks.driver_preflight import check_secure_boot

    sb = parse_secure_boot(["efi=1", "mokutil=absent", "efivar=6 0 0 0 1"])
    assert (sb.state, sb.line, sb.dkms_keys) == ("enabled", "", ())
    with pytest.raises(PreflightError, match=r"^Secure Boot is on \(enabled\) and no DKMS"):
        check_secure_boot(sb, "ubuntu")
    assert parse_secure_boot(["efi=1", "mokutil=absent", "efivar=6 0 0 0 0"]).state == \
        "disabled"
    assert parse_secure_boot(["efi=1", "mokutil=absent"]).state == "unknown"  # unreadable


@pytest.mark.parametrize(("said", "state"), [
    (["SecureBoot enabled"], "enabled"),
    (["SecureBoot enabled", "SecureBoot validation is disabled in shim"], "disabled"),
    (["SecureBoot disabled"], "disabled"),
    (["EFI variables are not supported on this system"], "bios"),  # with efi=0: agreed
])
def test_the_secure_boot_state_keeps_mokutils_line(said, state):
    """SecureBootInfo.line is what mokutil said (the refusal quotes it): each of mokutil's
    answers (lcp/mokutil src/mokutil.c) with the state it means."""
    from beekeeper.facts.boot import parse_secure_boot

    sb = parse_secure_boot([f"efi={int(state != 'bios')}", *said])
    assert (sb.state, sb.line) == (state, said[-1])


def test_mokutil_without_efivarfs_on_a_uefi_boot_is_unknown_not_bios():
    """mokutil's 'EFI variables are not supported' where /sys/firmware/efi is there (a UEFI
    boot without efivarfs mounted) is not a BIOS boot: Secure Boot may be on. With efi=0 it
    stays 'bios' with mokutil's line (the test above)."""
    from beekeeper.facts.boot import parse_secure_boot

    sb = parse_secure_boot(["efi=1", "EFI variables are not supported on this system"])
    assert sb.state == "unknown"


def test_the_wslconfig_parser_keeps_values_as_windows_users_write_them():
    from beekeeper.facts.boot import parse_wsl_settings

    got = parse_wsl_settings([
        "wslversion=2.5.7", "distro=Ubuntu-24.04", "file=/mnt/c/Users/me/.wslconfig",
        "[General]",                       # WSL reads section names in any case
        "instanceIdleTimeout=-1#forever",  # a comment right after the value
        "[WSL2]",
        "memory=24GB # was 16GB=too small",  # '=' in a trailing comment
        "memory",                          # a line WSL does not read: no value, unset nothing
        "#memory=4GB", ";swap=0",          # comments
        "vmIdleTimeout=",                  # no value: not set
    ])
    assert got.instance_idle_timeout == -1 and got.kept_alive
    assert got.memory == "24GB"
    assert got.vm_idle_timeout is None
    assert (got.wsl_version, got.distro) == ("2.5.7", "Ubuntu-24.04")
    # no wslinfo and no WSL_DISTRO_NAME (over SSH): both empty, not made up
    bare = parse_wsl_settings(["wslversion=", "distro="])
    assert (bare.wsl_version, bare.distro, bare.wslconfig) == ("", "", None)
    assert parse_wsl_settings([]) == parse_wsl_settings(["wslversion=", "distro="])


def test_the_wsl_settings_command_names_the_distro_wsl_sets(tmp_path):
    """Mutants of the command's text (`ECHO`, `${wsl_distro_name:-}`): run by sh, with
    WSL_DISTRO_NAME set as a WSL2 session has it and a wslinfo stand-in."""
    from beekeeper.facts.boot import WslSettings

    from .harness import _stub, _tools

    bin_ = tmp_path / "bin"
    bin_.mkdir()
    _tools(bin_, "sed", "head", "od", "tr", "cat")
    _stub(bin_, "wslinfo", "printf 2.5.7")
    cmd = WslSettings().command().replace("/mnt/c/Users", str(tmp_path / "none"))
    out = subprocess.run(["/bin/sh", "-c", cmd], capture_output=True, text=True, timeout=30,
                         env={"PATH": str(bin_), "HOME": "/nonexistent",
                              "WSL_DISTRO_NAME": "Ubuntu-24.04"}).stdout.splitlines()
    got = WslSettings().process(out)
    assert (got.distro, got.wsl_version, got.wslconfig) == ("Ubuntu-24.04", "2.5.7", None)


# --- facts/gpu.py: the commands run by sh, and their parsers on what the commands print ----

def _sh(command: str, path: Path, **env: str) -> list[str]:
    out = subprocess.run(["/bin/sh", "-c", command], capture_output=True, text=True, timeout=30,
                         env={"PATH": str(path), "HOME": "/nonexistent", **env})
    return out.stdout.splitlines()


# `nvidia-smi` as the H200 box's driver 580 answers the three calls GpuInfo makes (its query
# line, the banner's CUDA Version, -q's Product Brand), typed from that box's output
H200_SMI = r"""case "$*" in
  --query-gpu=*) echo 'NVIDIA H200, 580.95.05, 9.0, 143771' ;;
  -q) printf '    Product Name                          : NVIDIA H200\n'
      printf '    Product Brand                         : NVIDIA\n' ;;
  '') echo '| NVIDIA-SMI 580.95.05   Driver Version: 580.95.05   CUDA Version: 13.0     |' ;;
esac"""


def test_the_gpu_fact_reads_what_nvidia_smi_prints(tmp_path):
    """GpuInfo's command had no test (the canned facts stand in for it): run by sh with an
    nvidia-smi stand-in answering as the H200's driver does, then without one."""
    from beekeeper.facts.gpu import GpuCard, GpuInfo, NvidiaSmiInfo

    from .harness import _stub, _tools

    bin_ = tmp_path / "bin"
    bin_.mkdir()
    _tools(bin_, "sed", "grep", "ls")
    _stub(bin_, "nvidia-smi", H200_SMI)
    got = GpuInfo().process(_sh(GpuInfo().command(), bin_))
    assert got == NvidiaSmiInfo(
        path=f"{bin_}/nvidia-smi", cuda_version="13.0", driver_version="580.95.05",
        driver_branch=580, brand="NVIDIA",
        gpus=(GpuCard(name="NVIDIA H200", driver_version="580.95.05", compute_cap="9.0",
                      memory_total_mib=143771),))
    (bin_ / "nvidia-smi").unlink()
    assert GpuInfo().process(_sh(GpuInfo().command(), bin_)) is None  # no driver


def test_the_nvidia_smi_parser_on_odd_output():
    from beekeeper.facts.gpu import NvidiaSmiInfo, parse_nvidia_smi

    # a driver with no GPU to list ("No devices were found" goes to stderr)
    assert parse_nvidia_smi(["path=/usr/bin/nvidia-smi"]) == NvidiaSmiInfo(
        path="/usr/bin/nvidia-smi")
    got = parse_nvidia_smi([
        "path=/usr/bin/nvidia-smi",
        "gpu=NVIDIA GeForce RTX 4090, 580.95.05",                   # cut short: skipped
        "gpu=NVIDIA GeForce RTX 4090, 580.95.05, 8.9, [N/A]",        # memory not reported
        "gpu=NVIDIA GeForce RTX 3090, 580.95.05, 8.6, 24576.0",
        "CUDA Version: 13.0"])
    assert [(c.name, c.memory_total_mib) for c in got.gpus] == [
        ("NVIDIA GeForce RTX 4090", None), ("NVIDIA GeForce RTX 3090", 24576)]
    assert (got.cuda_version, got.driver_branch, got.brand) == ("13.0", 580, None)


def test_the_driver_packages_fact_reads_dpkg(tmp_path):
    """LinuxDriverPackages had no test: its command on real dpkg-query over a status file,
    and its parser on the states dpkg prints."""
    from beekeeper.facts.gpu import LinuxDriverPackages, parse_driver_packages

    from .harness import require_tools

    require_tools("dpkg-query", "grep", why="Debian's dpkg")
    (tmp_path / "updates").mkdir()
    (tmp_path / "status").write_text(
        (Path(__file__).parent / "data" / "dpkg-status-multiarch-written-by-hand").read_text())
    fact = LinuxDriverPackages()
    cmd = fact.command().replace("dpkg-query -W", f"dpkg-query --admindir={tmp_path} -W")
    out = subprocess.run(["/bin/sh", "-c", cmd], capture_output=True, text=True, check=True)
    # both architectures' copies of the library, named once; held or not; never the
    # Container Toolkit
    assert fact.process(out.stdout.splitlines()) == [
        "libcuda1", "libnvidia-compute-580", "nvidia-dkms-580-open"]
    assert parse_driver_packages([
        "nvidia-driver-580-open install ok installed",
        "nvidia-dkms-580-open hold ok installed",
        "nvidia-utils-580 deinstall ok config-files",   # removed, its conffiles left
        "libnvidia-compute-570 unknown ok not-installed",  # known to dpkg, never installed
        "nvidia-container-toolkit install ok installed",  # not the driver
        "cuda-drivers-580",                               # no status: not a dpkg line
        "firmware-nvidia-gsp install ok installed"]) == [
        "firmware-nvidia-gsp", "nvidia-dkms-580-open", "nvidia-driver-580-open"]
    assert fact.default() == [] and parse_driver_packages([]) == []


def test_the_kernel_module_fact_reads_the_module_and_the_boot_time(tmp_path):
    """NvidiaKernelModule had no test: its command by sh, /proc/stat the real one, and for
    the kernel's folders (/lib/modules/<release>, /sys/module/nvidia) folders in tmp_path:
    modinfo, a stand-in, names a module file written now (after this machine booted); with
    no modinfo, find looks in the release's folder."""
    from beekeeper.facts.gpu import NvidiaKernelModule, NvidiaModuleInfo

    from .harness import _stub, _tools

    bin_ = tmp_path / "bin"
    bin_.mkdir()
    _tools(bin_, "stat", "awk", "find", "uname", "head")
    release = tmp_path / "modules"
    module = release / "updates" / "dkms" / "nvidia.ko.zst"
    module.parent.mkdir(parents=True)
    module.write_bytes(b"\0")
    loaded = tmp_path / "sys-module-nvidia"
    cmd = NvidiaKernelModule().command().replace("/lib/modules/$(uname -r)", str(release)) \
        .replace("/sys/module/nvidia", str(loaded))
    _stub(bin_, "modinfo", f'[ "$*" = "-n nvidia" ] && echo {module}')
    fact = NvidiaKernelModule()
    assert fact.process(_sh(cmd, bin_)) == NvidiaModuleInfo(str(module), False, True)
    loaded.mkdir()  # the module is loaded
    assert fact.process(_sh(cmd, bin_)) == NvidiaModuleInfo(str(module), True, True)
    (bin_ / "modinfo").unlink()  # no modinfo: find finds the file
    assert fact.process(_sh(cmd, bin_)).path == str(module)
    module.unlink()
    assert fact.process(_sh(cmd, bin_)) == NvidiaModuleInfo(loaded=True)  # no module file


def test_the_kernel_module_parser_on_partial_output():
    from beekeeper.facts.gpu import NvidiaModuleInfo, parse_nvidia_module

    ko = "/lib/modules/6.8.0-45-generic/updates/dkms/nvidia.ko.zst"
    assert parse_nvidia_module([]) == NvidiaModuleInfo()  # the command printed nothing
    assert parse_nvidia_module(["module=", "btime=1700000000"]) == NvidiaModuleInfo()
    # stat failed (no mtime), or /proc/stat unread (no btime): not "since the boot"
    assert parse_nvidia_module([f"module={ko}", "btime=1700000000"]) == \
        NvidiaModuleInfo(path=ko)
    assert parse_nvidia_module([f"module={ko}", "mtime=1700000000"]) == \
        NvidiaModuleInfo(path=ko)
    # a module file as old as the boot was there when the kernel booted
    assert not parse_nvidia_module([f"module={ko}", "mtime=1700000000",
                                    "btime=1700000000"]).since_boot
    assert parse_nvidia_module([f"module={ko}", "mtime=1700000001", "btime=1700000000",
                                "loaded=1"]) == NvidiaModuleInfo(ko, True, True)


def test_no_pci_output_is_no_gpu():
    from beekeeper.facts.gpu import PciNvidiaDevices

    # what pyinfra gives when the command fails (no sysfs: a container without /sys/bus/pci)
    assert PciNvidiaDevices.default() == ()


# --- beekeeper/core/cudacompat.py: NVIDIA_REQUIRE_CUDA as the container runtime reads it ----

@pytest.mark.parametrize(("rule", "cuda", "driver", "brand", "ok"), [
    ("cuda>=13.2", "13.2", None, None, True), ("cuda>=13.2", "13.0", None, None, False),
    ("cuda<=13.0", "13.0", None, None, True), ("cuda<=13.0", "13.1", None, None, False),
    ("cuda>13.0", "13.0", None, None, False), ("cuda>13.0", "13.1", None, None, True),
    ("cuda=13.0", "13.0", None, None, True), ("cuda=13.0", "13.2", None, None, False),
    ("driver<581", None, "580.95.05", None, True), ("driver<580", None, "580", None, False),
    # a brand matches by name only, with `=` only
    ("brand=nvidia,driver>=580,driver<581", None, "580.95.05", "nvidia", True),
    ("brand=tesla,driver>=580,driver<581", None, "580.95.05", "nvidia", False),
    ("brand>=nvidia", None, None, "nvidia", False),
    # clauses (spaces) ORed, constraints (commas) ANDed; a fact not known holds nothing
    ("cuda>=13.2 brand=nvidia,driver>=580,driver<581", "13.0", "580.95.05", "nvidia", True),
    ("cuda>=13.2 brand=nvidia,driver>=580,driver<581", "13.0", "590.44.01", "nvidia", False),
    ("driver>=580", "13.0", None, None, False),
])
def test_the_require_cuda_rule_is_judged_as_the_container_runtime_does(rule, cuda, driver,
                                                                      brand, ok):
    from beekeeper.core.cudacompat import require_accepts

    assert require_accepts(rule, cuda, driver, brand) is ok


def test_a_constraint_the_runtime_cannot_read_holds_nothing():
    from beekeeper.core.cudacompat import require_accepts

    assert require_accepts("garbage cuda>=13.0", "13.2", None, None)  # the other clause
    assert not require_accepts("garbage", "13.2", "580.95.05", "nvidia")


def test_brands_and_branches_as_nvidia_names_them():
    from beekeeper.core.cudacompat import brand_token, major_minor, minor_compat_branch

    assert [brand_token(b) for b in ("NVIDIA", "NVIDIA RTX", "Quadro  RTX", "GeForce", None)] \
        == ["nvidia", "nvidiartx", "quadrortx", "geforce", None]
    assert [minor_compat_branch(v) for v in ("11.8.0", "12.8.1", "13.2.1", "14.0")] == \
        [450, 525, 580, 580]  # a major the kit does not know: 13's floor
    with pytest.raises(ValueError, match=r"^not a CUDA version: 'latest'$"):
        major_minor("latest")
