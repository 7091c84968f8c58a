"""
NVIDIA Container Toolkit: pinned packages from NVIDIA's signed repository, the nvidia
runtime registered with Docker only when missing (Docker restarted only then; daemon.json
never rewritten by the kit), CDI refresh units, and a GPU check inside a container.
"""

from __future__ import annotations

import shlex

from pyinfra import host
from pyinfra.api import StringCommand, operation
from pyinfra.api.operation import OperationMeta
from pyinfra.operations import apt, systemd

from beekeeper.core.config import HostConfig
from beekeeper.facts.docker import DockerEngine, GpuInContainer
from beekeeper.facts.hostfacts import HostFacts
from beekeeper.operations.apt import held, missing_packages

from . import nvidia_repos

TOOLKIT_VERSION = "1.18.0-1"
PACKAGES = ("nvidia-container-toolkit", "nvidia-container-toolkit-base",
            "libnvidia-container-tools", "libnvidia-container1")


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


def wanted(cfg: HostConfig, facts: HostFacts) -> bool:
    return (cfg.mode == "container" and cfg.service.profile.backend == "cuda"
            and facts.docker.flavour != "docker-desktop")


def ensure(cfg: HostConfig, facts: HostFacts) -> list[OperationMeta]:
    if not wanted(cfg, facts):
        return []
    version = cfg.container_toolkit_version or TOOLKIT_VERSION
    ops = nvidia_repos.toolkit_repo(nvidia_repos.repos(cfg, facts))
    specs = [f"{p}={version}" for p in PACKAGES]
    install = apt.packages(
        name=f"Install the NVIDIA Container Toolkit {version} (pinned)",
        packages=specs, update=bool(missing_packages(specs)), no_recommends=True)
    ops.append(install)
    ops.append(held(name="Hold the Container Toolkit packages at the pinned version",
                    packages=list(PACKAGES)))
    runtime = nvidia_runtime_registered(name="Register the nvidia runtime with Docker")
    ops.append(runtime)
    ops.append(systemd.service(
        name="Restart Docker to load the nvidia runtime" if runtime.will_change
        else "Keep Docker running (runtime unchanged)",
        service="docker.service", running=True, restarted=runtime.will_change))
    ops.append(systemd.service(name="Enable the CDI spec refresh (nvidia-cdi-refresh.path)",
                               service="nvidia-cdi-refresh.path", enabled=True, running=True))
    return ops


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
    if not after_change and host.get_fact(GpuInContainer, image=image):
        host.noop("the GPU is visible inside a container of the server image")
        return
    yield StringCommand(gpu_visible_in_container(image) + " || { echo 'beekeeper: no GPU "
                        "inside a container: check the NVIDIA Container Toolkit and "
                        "`docker info | grep -i runtime`' >&2; exit 1; }")


def check_in_container(cfg: HostConfig, facts: HostFacts, image: str,
                       upstream: list[OperationMeta]) -> list[OperationMeta]:
    """The GPU seen from a container of the server image, where the toolkit is wanted; run
    again when the toolkit or the image changed in this run (`upstream`)."""
    if not wanted(cfg, facts):
        return []
    return [gpu_checked_in_container(
        name="Check that the GPU is visible inside a container", image=image,
        after_change=any(op.will_change for op in upstream))]
