"""
NVIDIA driver: installed on native Linux only, locked to a branch and held; never inside
WSL2, where the Windows driver is used. A reboot happens only when host data allows it.

NVIDIA's driver installation guide (Ubuntu/Debian, network repository): the kernel
headers of the running kernel (`linux-headers-$(uname -r)`, DKMS builds the module against
them), then `nvidia-driver-pinning-<branch>` (an apt preferences file that locks the
`cuda-drivers` tree to that branch; from branch 590 the Ubuntu packages lost their
`-<branch>` suffix and `cuda-drivers-<branch>` goes away), then `cuda-drivers`.

Preflight (tasks/preflight.py, check_driver_install) has already refused, before any change,
the hosts where this would loop: a driver installed that does not load (an nvidia module for
the running kernel while nvidia-smi sees no GPU), and Secure Boot on without an enrolled DKMS
signing key (the module built here would be rejected at boot). What reaches `ensure` is a
host with no driver module for the running kernel, or one installed since the last boot
where host data allows the reboot that loads it.
"""

from __future__ import annotations

from pyinfra.api.operation import OperationMeta
from pyinfra.operations import apt, files, server

from beekeeper.core.config import HostConfig
from beekeeper.facts.hostfacts import HostFacts
from beekeeper.operations import nvidia
from beekeeper.operations.apt import missing_packages

from . import nvidia_repos
from .preflight import driver_branch_to_install


def needs_driver(cfg: HostConfig, facts: HostFacts) -> bool:
    """A native Linux host with an NVIDIA GPU on PCI but no (new enough) driver."""
    if facts.wsl.is_wsl2 or cfg.service.profile.backend != "cuda":
        return False
    if facts.gpu and facts.gpu.driver_branch:
        return False  # preflight refused a too-old one already
    return facts.pci_nvidia_gpus > 0


def ensure(cfg: HostConfig, facts: HostFacts) -> tuple[bool, list[OperationMeta]]:
    """Returns (stopped for a reboot or a second run, operations)."""
    if not needs_driver(cfg, facts):
        return False, []
    branch = driver_branch_to_install(cfg)
    pinning = f"nvidia-driver-pinning-{branch}"
    headers = f"linux-headers-{facts.wsl.kernel_release}"  # Wsl fact: `uname -r`
    wanted = [headers, pinning, "cuda-drivers"]
    r = nvidia_repos.repos(cfg, facts)
    ops = nvidia_repos.cuda_repo(r)
    ops += [
        files.put(name="Blacklist nouveau (it would hold the GPU)",
                  src=_text("blacklist nouveau\noptions nouveau modeset=0\n"),
                  dest="/etc/modprobe.d/blacklist-nouveau.conf", mode="0644"),
        apt.packages(name=f"Install the headers of the running kernel ({headers})",
                     packages=[headers], update=bool(missing_packages(wanted)),
                     no_recommends=True),
        apt.packages(name=f"Lock the NVIDIA driver to branch {branch} ({pinning})",
                     packages=[pinning], no_recommends=True),
        apt.packages(name=f"Install the NVIDIA driver, branch {branch} (cuda-drivers)",
                     packages=["cuda-drivers"], no_recommends=True),
        nvidia.driver_held(name="Hold the NVIDIA driver packages (module, libcuda, NVML, "
                         "nvidia-smi) so unattended upgrades cannot break NVML"),
    ]
    if cfg.allow_reboot:
        ops.append(server.reboot(name="Reboot to load the NVIDIA driver (allow_reboot)",
                                 delay=10, reboot_timeout=600))
        if cfg.cuda_arch:
            return False, ops
        # The GPU's compute capability comes from nvidia-smi, which did not exist when this
        # run read its facts; the image tag and cmake flags are fixed from those facts when
        # the deploy is planned, so a build now would fall back to sm_89 and give an RTX 3090
        # (sm_86) an image it cannot run. Re-reading facts after the reboot would need a
        # second planning pass inside one pyinfra run (and --dry could not show it), and
        # refusing up front would block the driver install on every fresh box. So: install,
        # reboot, then stop and ask for a second run, which reads the arch; or set cuda_arch.
        ops.append(server.shell(
            name="Stop: the GPU arch is known only now; deploy again",
            commands=["echo 'beekeeper: NVIDIA driver installed and the host rebooted; its "
                      "GPU arch was unknown when this run was planned: deploy again (or set "
                      "cuda_arch in host data)' >&2; exit 1"]))
        return True, ops
    ops.append(server.shell(
        name="Stop: the new NVIDIA driver needs a reboot",
        commands=["echo 'beekeeper: NVIDIA driver installed; reboot the host, then deploy "
                  "again (or set allow_reboot = True in host data)' >&2; exit 1"]))
    return True, ops


def _text(s: str):
    import io

    return io.StringIO(s)
