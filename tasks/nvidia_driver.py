"""
NVIDIA driver: installed on native Linux only, pinned to a branch and held; never inside
WSL2, where the Windows driver is used. A reboot happens only when host data allows it.
"""

from __future__ import annotations

from pyinfra import host
from pyinfra.api.operation import OperationMeta
from pyinfra.operations import apt, files, server

from beekeeper.build import min_driver_for_cuda
from beekeeper.config import HostConfig

from . import nvidia_repos
from .ops import held, missing_packages
from .preflight import HostFacts


def needs_driver(cfg: HostConfig, facts: HostFacts) -> bool:
    """A native Linux host with an NVIDIA GPU on PCI but no (new enough) driver."""
    if facts.wsl["is_wsl2"] or cfg.service.profile.backend != "cuda":
        return False
    if facts.gpu and facts.gpu["driver_branch"]:
        return False  # preflight refused a too-old one already
    return facts.pci_nvidia_gpus > 0


def ensure(cfg: HostConfig, facts: HostFacts) -> tuple[bool, list[OperationMeta]]:
    """Returns (reboot pending, operations)."""
    if not needs_driver(cfg, facts):
        return False, []
    branch = int(cfg.extra.get("driver_branch", min_driver_for_cuda(cfg.cuda_version)))
    package = f"cuda-drivers-{branch}"
    r = nvidia_repos.repos(cfg, facts)
    ops = nvidia_repos.cuda_repo(r)
    ops += [
        files.put(name="Blacklist nouveau (it would hold the GPU)",
                  src=_text("blacklist nouveau\noptions nouveau modeset=0\n"),
                  dest="/etc/modprobe.d/blacklist-nouveau.conf", mode="0644"),
        apt.packages(name=f"Install the NVIDIA driver, branch {branch} ({package})",
                     packages=[package], update=bool(missing_packages([package])),
                     no_recommends=True),
        held(name=f"Hold {package} so unattended upgrades cannot break NVML",
             packages=[package]),
    ]
    if host.data.get("allow_reboot"):
        ops.append(server.reboot(name="Reboot to load the NVIDIA driver (allow_reboot)",
                                 delay=10, reboot_timeout=600))
        return False, ops
    ops.append(server.shell(
        name="Stop: the new NVIDIA driver needs a reboot",
        commands=["echo 'beekeeper: NVIDIA driver installed; reboot the host, then deploy "
                  "again (or set allow_reboot = True in host data)' >&2; exit 1"]))
    return True, ops


def _text(s: str):
    import io

    return io.StringIO(s)
