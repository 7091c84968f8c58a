"""
deploy.py on canned facts, one case per host kind the kit must handle. The reference box
(WSL2 Ubuntu 24.04, Windows driver 596.21 / CUDA 13.2, RTX 4090) is the dry run of record.
"""

import configparser
import subprocess
from dataclasses import replace

import pytest

from beekeeper.core.distro import apt_wait
from beekeeper.core.errors import PreflightError
from beekeeper.facts.host import AptSource, InitInfo, OsReleaseInfo

from .harness import (
    DEFAULTS,
    DOCKER_CE,
    NATIVE,
    NO_DOCKER,
    NO_DRIVER,
    PCI_RTX4090,
    RTX4090,
    commands,
    facts,
    names,
    run_deploy,
    uploaded,
)


def test_reference_box_dry_run_shows_every_step_in_order():
    ops = run_deploy(DEFAULTS, facts())
    steps = names(ops)
    assert not any("driver" in s.lower() and "install" in s.lower() for s in steps)
    assert not any(s.startswith("Install the CUDA toolkit") for s in steps)  # container mode
    order = ["Add the NVIDIA Container Toolkit key (own keyring)",
             "Add the NVIDIA Container Toolkit repository (signed-by)",
             "Install the NVIDIA Container Toolkit 1.18.0-1 (pinned)",
             "Hold the Container Toolkit packages at the pinned version",
             "Register the nvidia runtime with Docker",
             "Restart Docker to load the nvidia runtime",
             "Enable the CDI spec refresh (nvidia-cdi-refresh.path)",
             "Fetch the server source https://github.com/Anbeeld/beellama.cpp at ba1fdce591f5",
             "Render the Dockerfile",
             "Check that the GPU is visible inside a container",
             "Download model unsloth/Qwen3.5-9B-GGUF/Qwen3.5-9B-Q8_0.gguf@0123456789ab "
             "(sha256 abababababab…)",
             "Render systemd unit beekeeper-llm.service",
             "Start and enable beekeeper-llm.service",  # a first start: no restart
             "Wait for /health on port 8083 and smoke-check the API"]
    idx = [steps.index(s) for s in order]
    assert idx == sorted(idx)
    build = next(n for n in steps if n.startswith("Build server image"))
    assert "cuda13.2-sm89-" in build
    dockerfile = commands(ops, "Render the Dockerfile")
    assert any("Remove legacy list file nvidia-docker.list" == s for s in steps)
    assert commands(ops, "Register the nvidia runtime") == [
        "nvidia-ctk runtime configure --runtime=docker"]
    pinned = " ".join(commands(ops, "Install the NVIDIA Container Toolkit"))
    assert "nvidia-container-toolkit=1.18.0-1" in pinned and "libnvidia-container1=1.18.0-1" \
        in pinned
    srcs = " ".join(commands(ops, "Add the NVIDIA Container Toolkit repository"))
    assert "Signed-By: /etc/apt/keyrings/nvidia-container-toolkit.gpg" in srcs
    assert dockerfile  # uploaded


def test_runtime_already_known_means_no_configure_and_no_docker_restart():
    ops = run_deploy(DEFAULTS, facts(DockerEngine=replace(DOCKER_CE, nvidia_runtime=True)))
    assert commands(ops, "Register the nvidia runtime") == []
    assert "Restart Docker to load the nvidia runtime" not in names(ops)


def test_wsl2_with_a_linux_driver_inside_is_refused():
    with pytest.raises(PreflightError, match=r"inside WSL2 \(nvidia-driver-580-open\).*apt purge"):
        run_deploy(DEFAULTS, facts(LinuxDriverPackages=["nvidia-driver-580-open"]))


def test_wsl2_nvidia_smi_shadowed_by_a_linux_one_is_refused():
    with pytest.raises(PreflightError, match="not /usr/lib/wsl/lib/nvidia-smi"):
        run_deploy(DEFAULTS, facts(GpuInfo=replace(RTX4090, path="/usr/bin/nvidia-smi")))


def test_wsl2_without_systemd_is_told_how_to_enable_it():
    with pytest.raises(PreflightError, match=r"/etc/wsl.conf.*wsl.exe --shutdown"):
        run_deploy(DEFAULTS, facts(InitSystem=InitInfo(pid1="init", systemd=False,
                                                      state="offline")))


def test_wsl2_without_a_windows_driver_gets_a_windows_side_instruction():
    with pytest.raises(PreflightError, match="driver on Windows"):
        run_deploy(DEFAULTS, facts(GpuInfo=None))


def test_native_ubuntu_2204_without_driver_installs_it_and_stops_for_a_reboot():
    ops = run_deploy({**DEFAULTS, "profile": "q4km-f16-32k"},
                     facts(Wsl=NATIVE, OsRelease=OsReleaseInfo(id="ubuntu", version_id="22.04"),
                           GpuInfo=None, PciListing=PCI_RTX4090, DockerEngine=NO_DOCKER))
    steps = names(ops)
    assert steps[-1] == "Stop: the new NVIDIA driver needs a reboot"
    assert "Install the NVIDIA driver, branch 595 (nvidia-open)" in steps
    assert "Blacklist nouveau (it would hold the GPU)" in steps
    srcs = " ".join(commands(ops, "Add NVIDIA's CUDA repository (signed-by"))
    assert "/repos/ubuntu2204/x86_64/" in srcs
    assert not any(s.startswith("Build server image") for s in steps)  # after the reboot
    assert commands(ops, "Install the NVIDIA driver")[-1].endswith("nvidia-open")


def test_native_linux_reboots_when_host_data_allows_it():
    ops = run_deploy({**DEFAULTS, "allow_reboot": True},
                     facts(Wsl=NATIVE, GpuInfo=None, PciListing=PCI_RTX4090))
    assert "Reboot to load the NVIDIA driver (allow_reboot)" in names(ops)


def test_debian12_native_mode_installs_cuda_toolkit_only():
    # a 580 driver reports CUDA 13.0; native mode runs a 13.2 build on it by NVIDIA's minor
    # version compatibility (SASS for the GPU's own arch, no PTX JIT)
    driver = replace(RTX4090, path="/usr/bin/nvidia-smi", driver_version="580.95",
                     driver_branch=580, cuda_version="13.0")
    ops = run_deploy({**DEFAULTS, "mode": "native"},
                     facts(Wsl=NATIVE, OsRelease=OsReleaseInfo(id="debian", version_id="12"),
                           GpuInfo=driver))
    steps = names(ops)
    assert "Install the CUDA toolkit (cuda-toolkit-13-2 only)" in steps
    pkgs = " ".join(commands(ops, "Install the CUDA toolkit"))
    assert "cuda-toolkit-13-2" in pkgs and " cuda " not in pkgs and "cuda-drivers" not in pkgs
    assert "/repos/debian12/x86_64/" in " ".join(
        commands(ops, "Add NVIDIA's CUDA repository (signed-by"))
    assert not any("Container Toolkit" in s for s in steps)
    assert any(s.startswith("Build llama-server") for s in steps)


def test_an_arm_server_gets_nvidias_sbsa_and_arm64_repositories_or_one_line():
    """A Grace or GH200 box (`uname -m` aarch64): NVIDIA's CUDA repository for server-class
    Arm is `sbsa` (Ubuntu's only; its `arm64` folders are Jetson's) and the Container
    Toolkit's is `arm64`; the x86_64 ones would fail at apt-get on the host. Debian on
    aarch64 has none: one line before any change."""
    from beekeeper.facts.host import Resources

    arm = Resources(cpus=72, mem_total_bytes=480 * 2**30, machine="aarch64",
                    cpu_flags=frozenset({"asimd"}))
    native = run_deploy({**DEFAULTS, "mode": "native"},
                        facts(Wsl=NATIVE, GpuInfo=NATIVE_580, BuildResources=arm))
    container = run_deploy(DEFAULTS, facts(Wsl=NATIVE, DockerEngine=NO_DOCKER,
                                           BuildResources=arm))
    every = " ".join(c for ops in (native, container) for _, cs in ops for c in cs)
    assert "/repos/ubuntu2404/sbsa/" in every and "/repos/ubuntu2404/sbsa/3bf863cc.pub" in every
    assert "libnvidia-container/stable/deb/arm64" in every
    assert "/x86_64/" not in every and "deb/amd64" not in every
    with pytest.raises(PreflightError) as e:
        run_deploy({**DEFAULTS, "mode": "native"},
                   facts(Wsl=NATIVE, GpuInfo=NATIVE_580, BuildResources=arm,
                         OsRelease=OsReleaseInfo(id="debian", version_id="12")))
    assert "no NVIDIA CUDA repository for debian12 on aarch64" in str(e.value), e.value


def test_wsl2_native_mode_uses_the_wsl_ubuntu_repository():
    ops = run_deploy({**DEFAULTS, "mode": "native"}, facts())
    assert "/repos/wsl-ubuntu/x86_64/" in " ".join(
        commands(ops, "Add NVIDIA's CUDA repository (signed-by"))
    assert not any("driver" in n.lower() and "install" in n.lower() for n in names(ops))


def test_docker_desktop_is_not_joined_by_a_second_engine():
    with pytest.raises(PreflightError, match="Docker Desktop"):
        run_deploy(DEFAULTS, facts(DockerEngine=replace(DOCKER_CE, flavour="docker-desktop")))


def test_snap_docker_is_refused_with_the_reason():
    with pytest.raises(PreflightError, match="snap"):
        run_deploy(DEFAULTS, facts(DockerEngine=replace(DOCKER_CE, flavour="snap")))


def test_driver_570_with_a_cuda_13_2_image_is_stopped():
    # a 570 driver reports CUDA 12.8 (CUDA 12.8 GA ships 570.26, release notes Table 3)
    old = replace(RTX4090, driver_version="570.86", driver_branch=570, cuda_version="12.8")
    with pytest.raises(PreflightError, match="driver 570.86 is older than 580"):
        run_deploy(DEFAULTS, facts(Wsl=NATIVE, GpuInfo=replace(old, path="/usr/bin/nvidia-smi")))
    # under WSL2 (the facts' default) the number is the Windows driver's: judged by its CUDA
    with pytest.raises(PreflightError, match=r"the Windows driver 570\.86 reports CUDA 12\.8, "
                       r"older than CUDA 13\.2"):
        run_deploy(DEFAULTS, facts(GpuInfo=old))


def test_arch_override_the_gpu_cannot_run_is_stopped():
    with pytest.raises(PreflightError, match="cuda_arch 120 has no kernels"):
        run_deploy({**DEFAULTS, "cuda_arch": "120"}, facts())


def test_arch_override_builds_for_another_card():
    ops = run_deploy({**DEFAULTS, "cuda_arch": "89;120"}, facts())
    assert any("cuda13.2-sm89-120-" in n for n in names(ops))


def test_model_dir_on_a_windows_drive_is_refused():
    with pytest.raises(PreflightError, match="Windows drive"):
        run_deploy({**DEFAULTS, "model_dir": "/mnt/c/models"}, facts())


def test_profile_over_the_vram_budget_is_refused_with_its_breakdown():
    with pytest.raises(PreflightError, match=r"q8-dflash-32k needs \d+ MiB.*weights .*"
                                             r"profiles that fit: .*q8-turbo4-64k"):
        run_deploy({**DEFAULTS, "profile": "q8-dflash-32k"}, facts())


def test_two_services_over_the_card_are_refused():
    services = [{"profile": "q8-turbo4-64k", "port": 8083, "service_name": "chat"},
                {"profile": "q8-turbo3-64k", "port": 8084, "service_name": "second"},
                {"profile": "q8-f16-4k", "port": 8085, "service_name": "third"}]
    # a budget that holds them (host data checks the budget per card), the card that does not
    with pytest.raises(PreflightError, match="3 services need .* more than the card's 24564"):
        run_deploy({**DEFAULTS, "services": services, "vram_budget_gib": 30}, facts())


def test_two_services_that_fit_get_their_own_units():
    services = [{"profile": "q4km-f16-32k", "port": 8083, "service_name": "chat"},
                {"profile": "q8-f16-4k", "port": 8084, "service_name": "second"}]
    steps = names(run_deploy({**DEFAULTS, "services": services, "vram_budget_gib": 20},
                             facts()))
    assert "Render systemd unit beekeeper-chat.service" in steps
    assert "Render systemd unit beekeeper-second.service" in steps


# --- issue 11 -------------------------------------------------------------------------

NATIVE_580 = replace(RTX4090, path="/usr/bin/nvidia-smi", driver_version="580.95.05",
                     driver_branch=580, cuda_version="13.0",
                     gpus=(replace(RTX4090.gpus[0], driver_version="580.95.05"),))
KEYRING_LIST = "/etc/apt/sources.list.d/cuda-ubuntu2404-x86_64.list"


def test_580_driver_with_the_cuda_13_2_image_is_refused_before_the_build():
    # nvidia/cuda:13.2.1 carries NVIDIA_REQUIRE_CUDA cuda>=13.2; a 580 driver reports 13.0
    with pytest.raises(PreflightError, match=r"driver 580\.95\.05 reports CUDA 13\.0, older than "
                       r"the image's CUDA 13\.2\.1 .*cuda>=13\.2.*branch 595 or newer.*"
                       r"cuda_version = '13\.0\.2'"):
        run_deploy(DEFAULTS, facts(Wsl=NATIVE, GpuInfo=NATIVE_580))


def test_wsl2_windows_driver_reporting_cuda_13_0_is_told_to_update_on_windows():
    win = replace(RTX4090, driver_version="581.57", driver_branch=581, cuda_version="13.0")
    with pytest.raises(PreflightError, match=r"reports CUDA 13\.0.*driver on Windows to one "
                       r"whose nvidia-smi reports CUDA 13\.2 or newer .*, or set"):
        run_deploy(DEFAULTS, facts(GpuInfo=win))


def test_580_driver_with_a_cuda_13_0_image_builds_it():
    ops = run_deploy({**DEFAULTS, "cuda_version": "13.0.2"},
                     facts(Wsl=NATIVE, GpuInfo=NATIVE_580))
    assert any(n.startswith("Build server image") and "cuda13.0-sm89-" in n for n in names(ops))


def test_driver_install_picks_the_branch_that_reports_the_image_cuda():
    steps = names(run_deploy(DEFAULTS, facts(**NO_DRIVER)))
    assert "Lock the NVIDIA driver to branch 595 (nvidia-driver-pinning-595)" in steps
    assert "Install the NVIDIA driver, branch 595 (nvidia-open)" in steps
    steps = names(run_deploy({**DEFAULTS, "cuda_version": "13.0.2"}, facts(**NO_DRIVER)))
    assert "Lock the NVIDIA driver to branch 580 (nvidia-driver-pinning-580)" in steps


def test_driver_branch_that_cannot_run_the_image_is_refused():
    with pytest.raises(PreflightError, match=r"host data `driver_branch`: 580 runs CUDA 13\.0, "
                       r"but cuda_version is 13\.2\.1.*set driver_branch = 595"):
        run_deploy({**DEFAULTS, "driver_branch": 580}, facts(**NO_DRIVER))


def test_native_mode_accepts_driver_branch_580_for_cuda_13_2():
    steps = names(run_deploy({**DEFAULTS, "mode": "native", "driver_branch": 580},
                             facts(**NO_DRIVER)))
    assert "Lock the NVIDIA driver to branch 580 (nvidia-driver-pinning-580)" in steps


def test_docker_desktop_unit_does_not_require_docker_service():
    desktop = replace(DOCKER_CE, flavour="docker-desktop")
    ops = run_deploy({**DEFAULTS, "use_docker_desktop": True},
                     facts(DockerEngine=desktop, ComposeVersion="2.40.3"))
    unit = uploaded(ops, "Render systemd unit beekeeper-llm.service")
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.read_string(unit)
    assert "docker.service" not in parser["Unit"].get("Requires", "")
    assert "docker.service" not in parser["Unit"]["After"]
    waits = [ln for ln in unit.splitlines() if ln.startswith("ExecStartPre=")]
    assert any("/usr/bin/docker info" in ln for ln in waits)  # waits for Desktop's engine
    assert not any("Container Toolkit" in n for n in names(ops))


def test_docker_engine_unit_still_requires_docker_service():
    ops = run_deploy(DEFAULTS, facts())
    unit = uploaded(ops, "Render systemd unit beekeeper-llm.service")
    assert "Requires=docker.service" in unit and "docker info" not in unit


def test_allow_reboot_without_cuda_arch_stops_for_a_second_run_instead_of_sm89():
    ops = run_deploy({**DEFAULTS, "allow_reboot": True}, facts(**NO_DRIVER))
    steps = names(ops)
    assert steps.index("Reboot to load the NVIDIA driver (allow_reboot)") < len(steps) - 1
    assert steps[-1] == "Stop: the GPU arch is known only now; deploy again"
    assert "deploy again (or set cuda_arch" in commands(ops, "Stop: the GPU arch")[0]
    assert not any(s.startswith("Build server image") for s in steps)


def test_allow_reboot_with_cuda_arch_builds_that_arch_after_the_reboot():
    ops = run_deploy({**DEFAULTS, "allow_reboot": True, "cuda_arch": "86"}, facts(**NO_DRIVER))
    steps = names(ops)
    build = next(s for s in steps if s.startswith("Build server image"))
    assert "-sm86-" in build
    assert steps.index("Reboot to load the NVIDIA driver (allow_reboot)") < steps.index(build)


def test_driver_install_brings_kernel_headers_and_pins_the_branch_without_a_hold():
    """The branch's pinning package keeps the driver on its branch; no apt-mark hold, which
    would also keep out the branch's own (security) updates."""
    ops = run_deploy(DEFAULTS, facts(**NO_DRIVER))
    steps = names(ops)
    headers = "Install the kernel headers (linux-headers-6.8.0-45-generic, linux-headers-generic)"
    pin = "Lock the NVIDIA driver to branch 595 (nvidia-driver-pinning-595)"
    install = "Install the NVIDIA driver, branch 595 (nvidia-open)"
    assert steps.index(headers) < steps.index(pin) < steps.index(install)
    assert "linux-headers-6.8.0-45-generic" in " ".join(commands(ops, headers))
    assert "nvidia-driver-pinning-595" in " ".join(commands(ops, pin))
    every = " ".join(c for _, cs in ops for c in cs)
    assert "apt-mark hold" not in every.replace("apt-mark hold nvidia-container", "")
    assert not any("Hold the NVIDIA driver" in s or "Release the holds" in s for s in steps)


# The kit's record of its holds on a host an earlier beekeeper deployed: the driver's
# packages (each architecture's copy by its name) and the Container Toolkit's four.
OLD_RECORD = ["libnvidia-compute-580:amd64", "libnvidia-compute-580:i386", "nvidia-open",
              "nvidia-dkms-580-open", "nvidia-container-toolkit",
              "nvidia-container-toolkit-base", "libnvidia-container1",
              "libnvidia-container-tools"]
OLD_DRIVER_HOLDS = ["libnvidia-compute-580:amd64", "libnvidia-compute-580:i386",
                    "nvidia-dkms-580-open", "nvidia-open"]


def _with_record(record):
    from beekeeper.core.paths import HOLDS_RECORD

    return lambda path: record if path == HOLDS_RECORD else None


def test_an_earlier_kits_driver_holds_are_released_and_the_toolkits_kept():
    from beekeeper.operations.nvidia import kit_driver_holds

    assert kit_driver_holds(OLD_RECORD) == OLD_DRIVER_HOLDS
    release = "Release the holds an earlier beekeeper set on 4 NVIDIA driver packages"
    native = {**DEFAULTS, "mode": "native"}  # the 580 driver in place builds for CUDA 13.0
    for data, case in ((native, facts(Wsl=NATIVE, GpuInfo=NATIVE_580)),
                       (DEFAULTS, facts(**NO_DRIVER))):  # a driver in place, or to install
        ops = run_deploy(data, {**case, "FileContents": _with_record(OLD_RECORD)})
        step = next(n for n in names(ops) if n.startswith(release))
        line = " ".join(commands(ops, step)).removeprefix(apt_wait() + "; ")
        assert line.startswith("apt-mark unhold libnvidia-compute-580:amd64 "
                               "libnvidia-compute-580:i386 nvidia-dkms-580-open nvidia-open &&")
        assert "nvidia-container" not in line.split("&&")[0]
    # no record, or one with the toolkit only: no release step at all
    for record in (None, OLD_RECORD[4:]):
        ops = run_deploy(native, {**facts(Wsl=NATIVE, GpuInfo=NATIVE_580),
                                  "FileContents": _with_record(record)})
        assert not any(n.startswith("Release the holds") for n in names(ops))
    # WSL2: the kit never held a driver there (the Windows driver serves it)
    ops = run_deploy(DEFAULTS, {**facts(), "FileContents": _with_record(OLD_RECORD)})
    assert not any(n.startswith("Release the holds") for n in names(ops))


def test_the_release_unholds_and_leaves_the_rest_of_the_record(tmp_path):
    """The release command run by a real shell, apt-mark echoed and the record in tmp_path:
    the driver's names unheld, each copy by its own name, and dropped from the record; the
    toolkit's stay there for the uninstall; a record of the driver only ends empty."""
    from beekeeper.core.paths import HOLDS_RECORD
    from beekeeper.operations.nvidia import release_command

    record = tmp_path / "apt-holds"
    for lines, left in ((OLD_RECORD, OLD_RECORD[4:]), (OLD_DRIVER_HOLDS, [])):
        record.write_text("".join(f"{n}\n" for n in lines))
        line = release_command(OLD_DRIVER_HOLDS).replace("apt-mark unhold",
                                                         "echo apt-mark unhold")
        done = subprocess.run(["/bin/sh", "-c", line.replace(HOLDS_RECORD, str(record))],
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert done.stdout.split() == ["apt-mark", "unhold", *OLD_DRIVER_HOLDS]
        assert record.read_text().splitlines() == left


def test_existing_cuda_keyring_source_is_used_not_duplicated():
    found = [AptSource(path=KEYRING_LIST, signed_by="/usr/share/keyrings/cuda-archive-keyring.gpg")]
    ops = run_deploy({**DEFAULTS, "mode": "native"},
                     facts(Wsl=NATIVE, GpuInfo=NATIVE_580, AptSourcesFor=found))
    steps = names(ops)
    assert "Use the CUDA repository already configured (cuda-ubuntu2404-x86_64.list)" in steps
    assert not any(s.startswith("Add NVIDIA's CUDA repository") for s in steps)
    assert commands(ops, "Remove the kit's own CUDA source") == []  # none to remove


def test_a_changed_repository_key_reaches_the_keyring_a_first_run_wrote():
    """Host data `nvidia_repos` given after a first deploy (a mirror with its own signing
    key; or the key the kit names changing, as Debian 12's 3bf863cc to Debian 13's 8793F200
    on a host upgraded in place): the sources file is rewritten to the new repository, so
    the keyring it is signed by must hold the new key. pyinfra's apt.key, given no key id,
    skips a keyring file that exists, whatever key is in it: apt then refuses the repository
    (NO_PUBKEY) and the deploy stops at its next apt-get update."""
    from beekeeper.core.paths import CUDA_APT

    key = "https://mirror.example/nvidia/cuda/mirror-signing.pub"
    mirror = {"nvidia_repos": {"cuda": "https://mirror.example/nvidia/cuda/{distro}/x86_64/",
                               "cuda_key": key}}
    # the keyring a first run wrote, with NVIDIA's key in it: pyinfra's gpg.key asks for the
    # File fact of its keyring positionally, which the harness hands on as path=None (native
    # mode adds no other keyring: the Container Toolkit's repository is container mode's)
    first_run = facts(Wsl=NATIVE, GpuInfo=NATIVE_580,
                      File=lambda path=None, **_: {"size": 1202, "mode": 644}
                      if path in (None, CUDA_APT.keyring) else None)
    ops = run_deploy({**DEFAULTS, "mode": "native", **mirror}, first_run)
    sources = " ".join(c for n, cs in ops if n.startswith("Add NVIDIA's CUDA repository (")
                       for c in cs)
    assert "mirror.example/nvidia/cuda/ubuntu2404" in sources  # the repository changes
    assert any(key in c for _, cs in ops for c in cs), \
        "the mirror's key is never fetched: the keyring keeps NVIDIA's key"


def test_a_repository_key_fetched_from_its_url_is_not_fetched_again():
    """The keyring holds the key of the URL its `.src` records: a second run changes nothing
    there."""
    from beekeeper.core.paths import CUDA_APT

    key = "https://mirror.example/nvidia/cuda/mirror-signing.pub"
    mirror = {"nvidia_repos": {"cuda": "https://mirror.example/nvidia/cuda/{distro}/x86_64/",
                               "cuda_key": key}}
    again = facts(Wsl=NATIVE, GpuInfo=NATIVE_580,
                  File=lambda path=None, **_: {"size": 1202, "mode": 644}
                  if path == CUDA_APT.keyring else None,
                  FileContents=lambda path=None, **_: [key]
                  if path == CUDA_APT.key_source else None)
    ops = dict(run_deploy({**DEFAULTS, "mode": "native", **mirror}, again))
    assert ops["Add NVIDIA's CUDA repository key (own keyring)"] == []
