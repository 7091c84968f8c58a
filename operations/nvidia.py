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
