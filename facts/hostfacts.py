"""
What preflight learned about the host, one typed record of the facts' records.
"""

from __future__ import annotations

from dataclasses import dataclass

from .docker import DockerEngineInfo
from .gpu import NvidiaSmiInfo
from .host import InitInfo, OsReleaseInfo, WslInfo
from .toolchain import HostToolsInfo


@dataclass(frozen=True)
class HostFacts:
    """
    The host as preflight read it, for the tasks that follow:

    .. code:: python

        HostFacts(os=OsReleaseInfo(id="ubuntu", version_id="24.04", ...),
                  init=InitInfo(...), wsl=WslInfo(...), docker=DockerEngineInfo(...),
                  gpu=NvidiaSmiInfo(...) or None, free_model_dir_bytes=84221202432,
                  pci_nvidia_gpus=0, cpus=16, mem_total_bytes=67108864000,
                  machine="x86_64", compose_version="2.26.1" or None,
                  persistent_root="/workspace/beekeeper" or None, port_orphans=(4242,))
    """

    os: OsReleaseInfo
    init: InitInfo
    wsl: WslInfo
    docker: DockerEngineInfo
    gpu: NvidiaSmiInfo | None
    free_model_dir_bytes: int | None
    pci_nvidia_gpus: int = 0
    cpus: int = 1
    mem_total_bytes: int = 0
    machine: str = "x86_64"  # `uname -m`: picks the server's CPU baseline (core/cpu.py)
    # the compose v2 plugin's version (runtime "compose" only; None: not installed yet)
    compose_version: str | None = None
    # the NVIDIA driver: "install" (none), "upgrade" (too old, host data upgrade_driver), None
    driver_action: str | None = None
    # the CUDA release the image is built for where it follows the driver (cuda_follows_driver)
    cuda_version: str | None = None
    # proxy variables /etc/environment sets, by name (the image build passes them on)
    proxy_vars: tuple[str, ...] = ()
    # the host's own tools (nvcc, cmake, c++, make, git, python3, setpriv)
    tools: HostToolsInfo | None = None
    # what runs the server: "systemd", "compose", or "supervisor" where PID 1 is not systemd
    runtime: str = "systemd"
    # the host's CUDA toolkit the native build uses (its nvcc), None: the kit installs one
    host_nvcc: str | None = None
    # packages of the build tools the host lacks, for apt to install (native builds)
    install_tools: tuple[str, ...] = ()
    # runtime supervisor: the folder on the pod's volume that keeps all the kit needs to
    # start the server again (host data `persistent_root`, resolved: `/workspace/beekeeper`
    # by default where /workspace is a folder off the container's overlay); None: the
    # standard layout (/opt, /etc, /var ...), and always None under systemd
    persistent_root: str | None = None
    # servers of the kit (user beekeeper, a binary under NATIVE_PREFIX) that listen on a
    # service's port with no supervisor owning them (their supervisord was killed): the
    # deploy ends these pids before it starts the service under supervision
    port_orphans: tuple[int, ...] = ()

    @property
    def compute_cap(self) -> str | None:
        """The first GPU's compute capability ("8.9"), None without a visible GPU."""
        return self.gpu.gpus[0].compute_cap if self.gpu and self.gpu.gpus else None
