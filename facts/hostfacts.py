"""
What preflight learned about the host, one typed record of the facts' records.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from beekeeper.core.runtime import Runtime

from .docker import DockerEngineInfo
from .gpu import NvidiaSmiInfo
from .host import InitInfo, OsReleaseInfo, WslInfo
from .toolchain import HostToolsInfo


@dataclass(frozen=True)
class HostFacts:
    """
    The host as preflight read it, and what preflight resolved from it and host data, made
    once per host (tasks/preflight.py check). Tasks read these here; HostConfig keeps what
    host data asked (requested_way, data.cuda_version and data.cuda_arch).
    """

    os: OsReleaseInfo
    init: InitInfo
    wsl: WslInfo
    docker: DockerEngineInfo
    gpu: NvidiaSmiInfo | None
    pci_nvidia_gpus: int = 0
    cpus: int = 1
    mem_total_bytes: int = 0
    machine: str = "x86_64"  # `uname -m`: picks the server's CPU baseline (core/cpu.py)
    # the compose v2 plugin's version (runtime "compose" only; None: not installed yet)
    compose_version: str | None = None
    # the NVIDIA driver: "install" (none), "upgrade" (too old, host data upgrade_driver), None
    driver_action: str | None = None
    proxy_vars: tuple[str, ...] = ()
    tools: HostToolsInfo | None = None
    # the host's CUDA toolkit the native build uses (its nvcc), None: the kit installs one
    host_nvcc: str | None = None
    # packages of the build tools the host lacks, for apt to install (native builds)
    install_tools: tuple[str, ...] = ()
    # the build this deploy runs is on the host already (preflight's build_there; None: no
    # build stage): a pod's build on its volume needs neither the build tools nor the toolkit
    built: bool | None = None
    # runtime supervisor: host data `persistent_root`, resolved (`/workspace/beekeeper` by
    # default where /workspace is off the container's overlay); None: the standard layout
    persistent_root: str | None = None
    # servers of the kit listening on a service's port with no supervisor owning them (their
    # supervisord was killed): the deploy ends these before it starts the service
    port_orphans: tuple[int, ...] = ()
    # what runs the server (core/runtime.py), from host data `mode` and the runtime: host
    # data's, or supervisor where PID 1 is not systemd
    runtime: Runtime = field(kw_only=True)
    # the CUDA release the server is built for: host data `cuda_version`, the host's own
    # toolkit's where the native build uses it, or the driver's (cuda_follows_driver)
    cuda_version: str = field(kw_only=True)
    # the arch list to build for: host data `cuda_arch`, else every card's where the host
    # has cards of more than one arch ('86;89'); None: the build takes the first card's
    cuda_arch: str | None = field(kw_only=True)

    @property
    def compute_cap(self) -> str | None:
        """The first GPU's compute capability ("8.9"), None without a visible GPU."""
        return self.gpu.gpus[0].compute_cap if self.gpu and self.gpu.gpus else None
