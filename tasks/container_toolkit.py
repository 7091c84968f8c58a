"""
NVIDIA Container Toolkit: pinned packages from NVIDIA's signed repository, the nvidia runtime
registered with Docker only when missing (Docker restarted only then), CDI refresh units, and
a GPU check inside a container.
"""

from __future__ import annotations

from pyinfra.api.operation import OperationMeta
from pyinfra.operations import systemd

from beekeeper.core.config import HostConfig
from beekeeper.facts.hostfacts import HostFacts
from beekeeper.operations import nvidia
from beekeeper.operations.apt import held, missing_packages, packages as apt_packages

from . import nvidia_repos

TOOLKIT_VERSION = "1.18.0-1"
PACKAGES = ("nvidia-container-toolkit", "nvidia-container-toolkit-base",
            "libnvidia-container-tools", "libnvidia-container1")


def gpu_in_containers(cfg: HostConfig, facts: HostFacts) -> bool:
    """A CUDA server in a container: the GPU must be seen from inside one, whatever the
    engine (Docker Desktop's included)."""
    return facts.runtime.container and cfg.service.profile.backend == "cuda"


def ensure(cfg: HostConfig, facts: HostFacts) -> list[OperationMeta]:
    # installed for the host's own engine; Docker Desktop's (WSL2) runs `--gpus all` on the
    # Windows driver and has no nvidia-ctk to configure
    if not gpu_in_containers(cfg, facts) or facts.docker.flavour == "docker-desktop":
        return []
    version = cfg.data.container_toolkit_version or TOOLKIT_VERSION
    ops = nvidia_repos.toolkit_repo(nvidia_repos.repos(cfg, facts))
    specs = [f"{p}={version}" for p in PACKAGES]
    ops.append(apt_packages(
        name=f"Install the NVIDIA Container Toolkit {version} (pinned)",
        packages=specs, update=bool(missing_packages(specs)), no_recommends=True))
    ops.append(held(name="Hold the Container Toolkit packages at the pinned version",
                    packages=list(PACKAGES)))
    runtime = nvidia.nvidia_runtime_registered(name="Register the nvidia runtime with Docker")
    ops.append(runtime)
    ops.append(systemd.service(
        name="Restart Docker to load the nvidia runtime" if runtime.will_change
        else "Keep Docker running (runtime unchanged)",
        service="docker.service", running=True, restarted=runtime.will_change))
    ops.append(systemd.service(name="Enable the CDI spec refresh (nvidia-cdi-refresh.path)",
                               service="nvidia-cdi-refresh.path", enabled=True, running=True))
    return ops


def check_in_container(cfg: HostConfig, facts: HostFacts, image: str,
                       upstream: list[OperationMeta]) -> None:
    """The GPU seen from a container of the server image (on Docker Desktop too); run again
    when the toolkit or the image changed in this run (`upstream`)."""
    if gpu_in_containers(cfg, facts):
        nvidia.gpu_checked_in_container(
            name="Check that the GPU is visible inside a container", image=image,
            after_change=any(op.will_change for op in upstream),
            desktop=facts.docker.flavour == "docker-desktop")
