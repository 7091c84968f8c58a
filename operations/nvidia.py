"""
NVIDIA operations: hold the driver's packages, register the nvidia runtime with Docker,
check the GPU from inside a container.
"""

from __future__ import annotations

import shlex

from pyinfra import host
from pyinfra.api import StringCommand, operation

from beekeeper.facts.docker import DockerEngine, GpuInContainer
from beekeeper.facts.gpu import DRIVER_PACKAGE_PREFIXES, LinuxDriverPackages
from beekeeper.facts.host import AptHolds


def hold_command() -> str:
    """apt-mark hold every installed package that carries the driver, whatever the distro
    calls it (Ubuntu 580: libnvidia-compute-580, nvidia-dkms-580-open, ...; Ubuntu 590+:
    libnvidia-compute, nvidia-dkms-open, ...; Debian: nvidia-kernel-dkms, libcuda1, ...).
    The list is read on the host after the install, when the names are known."""
    pattern = "^(" + "|".join(p.replace(".", "\\.") for p in DRIVER_PACKAGE_PREFIXES) + ")"
    return ("dpkg-query -W -f '${Package} ${Status}\\n' | awk '$NF == \"installed\" "
            f"{{print $1}}' | grep -E {shlex.quote(pattern)} | xargs -r apt-mark hold")


@operation()
def driver_held():
    """
    Hold the packages that carry the driver (kernel module, libcuda, NVML, nvidia-smi), not
    only the meta-package: an unattended upgrade of any of them leaves the loaded kernel
    module and the user-space libraries apart ("Driver/library version mismatch").
    """
    installed = host.get_fact(LinuxDriverPackages)
    held = host.get_fact(AptHolds)
    # Every driver package already held?
    if installed and all(p in held for p in installed):
        host.noop(f"the {len(installed)} NVIDIA driver packages are held")
        return
    yield StringCommand(hold_command())


@operation()
def nvidia_runtime_registered():
    """
    Register the nvidia runtime with Docker (`nvidia-ctk runtime configure`), only when
    `docker info` does not list it. nvidia-ctk merges its keys into daemon.json.
    """
    if host.get_fact(DockerEngine).nvidia_runtime:
        host.noop("Docker already knows the nvidia runtime")
        return
    yield "nvidia-ctk runtime configure --runtime=docker"


def gpu_visible_in_container(image: str) -> str:
    """The command that proves the GPU is visible inside a container of `image`."""
    return (f"docker run --rm --gpus all --entrypoint nvidia-smi {shlex.quote(image)} "
            "--query-gpu=name,compute_cap --format=csv,noheader")


@operation()
def gpu_checked_in_container(image: str, after_change: bool):
    """
    Prove the GPU is visible inside a container before the server starts.

    + image: the server image (its runtime base carries the CUDA runtime)
    + after_change: whether this run changed the image or the toolkit
    """
    # Nothing changed, and the GPU was seen from a container of this image?
    if not after_change and host.get_fact(GpuInContainer, image=image):
        host.noop("the GPU is visible inside a container of the server image")
        return
    yield StringCommand(gpu_visible_in_container(image) + " || { echo 'beekeeper: no GPU "
                        "inside a container: check the NVIDIA Container Toolkit and "
                        "`docker info | grep -i runtime`' >&2; exit 1; }")


# Installed packages of an NVIDIA driver, whoever installed them (Ubuntu's nvidia-driver-570,
# Debian's nvidia-driver, NVIDIA's cuda-drivers-570 / nvidia-open), by name; never the
# Container Toolkit (libnvidia-container*, nvidia-container-*), which is not the driver.
PURGE_PATTERN = ("^(nvidia-|libnvidia-|cuda-drivers|libcuda1|firmware-nvidia-gsp|"
                 "xserver-xorg-video-nvidia|libnvcuvid1|libnvoptix1|libnvidia)")
KEEP_PATTERN = "^(libnvidia-container|nvidia-container-)"


def purge_command() -> str:
    """Unhold, then purge, every installed driver package the host has now (read on the
    host: the names depend on who installed the driver)."""
    pick = ("dpkg-query -W -f '${Package} ${Status}\\n' | awk '$NF == \"installed\" "
            f"{{print $1}}' | grep -E {shlex.quote(PURGE_PATTERN)} | "
            f"grep -vE {shlex.quote(KEEP_PATTERN)}")
    return (f"pkgs=$({pick}); [ -z \"$pkgs\" ] || {{ apt-mark unhold $pkgs >/dev/null && "
            "DEBIAN_FRONTEND=noninteractive apt-get purge -y $pkgs; }")


@operation()
def driver_purged():
    """
    Purge the NVIDIA driver that is installed (host data upgrade_driver), before the kit
    installs its pinned branch: two drivers' packages side by side conflict or leave the
    kernel module and the libraries apart. The running module stays loaded until the reboot.
    """
    if not host.get_fact(LinuxDriverPackages):
        host.noop("no NVIDIA driver packages are installed")
        return
    yield StringCommand(purge_command())


@operation()
def driver_installed(package: str, after_purge: bool = False):
    """
    Install the driver's meta-package from NVIDIA's repository, within the branch its
    pinning package locks.

    + package: nvidia-open or cuda-drivers
    + after_purge: this run purged the driver first, so the packages read at the start of the
      run (which may name this very package, at the old branch) say nothing
    """
    if not after_purge and package in host.get_fact(LinuxDriverPackages):
        host.noop(f"{package} is installed")
        return
    yield StringCommand("DEBIAN_FRONTEND=noninteractive apt-get install -y "
                        f"--no-install-recommends {shlex.quote(package)}")


@operation()
def driver_installable(packages: list[str], branch: int):
    """
    Debian 12: ask apt, without installing anything, whether NVIDIA's driver packages can
    be installed with the dkms Debian 12 ships (3.0.10; bookworm-backports has none); newer
    driver packages are reported to need a newer dkms. Stops, before the driver changes,
    with the fix when they cannot.

    + packages: the pinning and driver meta-packages
    + branch: the branch they lock to
    """
    if all(p in host.get_fact(LinuxDriverPackages) for p in packages):
        host.noop("the driver packages are installed")
        return
    names = " ".join(shlex.quote(p) for p in packages)
    fix = (f"beekeeper: NVIDIA's branch {branch} driver packages cannot be installed on "
           "Debian 12 (apt says why above; the dkms Debian 12 ships is 3.0.10 and "
           "bookworm-backports has no newer one): set driver_branch to an older branch that "
           "runs cuda_version, or use Debian 13, or install the driver yourself")
    yield StringCommand(f"out=$(apt-get install -s --no-install-recommends {names} 2>&1) || "
                        f"{{ echo \"$out\" | tail -n 8 >&2; echo {shlex.quote(fix)} >&2; "
                        "exit 1; }")
