"""
NVIDIA driver on native Linux (never inside WSL2), NVIDIA's documented way, locked to its branch
by the pinning package, not held (docs/gpu-hosts.md, docs/hosts-as-you-find-them.md).
Preflight (tasks/driver_preflight.py) has refused the hosts where an install would loop.
"""

from __future__ import annotations

import io

from pyinfra import host
from pyinfra.facts.files import FileContents
from pyinfra.operations import files, server

from beekeeper.core.config import HostConfig
from beekeeper.core.distro import driver_package, headers_meta
from beekeeper.core.paths import HOLDS_RECORD, NOUVEAU_BLACKLIST
from beekeeper.facts.hostfacts import HostFacts
from beekeeper.operations import apt_sources, nvidia
from beekeeper.operations.apt import missing_packages, packages as apt_packages

from . import nvidia_repos
from .driver_preflight import driver_branch_to_install, older_branch_advice


def needs_driver(cfg: HostConfig, facts: HostFacts) -> bool:
    """A native Linux host with an NVIDIA GPU on PCI but no driver, or one to upgrade."""
    if facts.wsl.is_wsl2 or cfg.service.profile.backend != "cuda":
        return False
    if facts.driver_action == "upgrade":
        return True
    if facts.gpu and facts.gpu.driver_branch:
        return False  # preflight refused a too-old one already
    return facts.pci_nvidia_gpus > 0


def ensure(cfg: HostConfig, facts: HostFacts) -> bool:
    """Returns whether the deploy stops for a reboot or a second run."""
    # a host an earlier beekeeper deployed holds the driver packages it installed (its record
    # names them): released, so the branch's updates come in; the branch pin stays
    held = [] if facts.wsl.is_wsl2 else \
        nvidia.kit_driver_holds(host.get_fact(FileContents, path=HOLDS_RECORD) or [])
    if held:
        nvidia.kit_driver_holds_released(
            name=f"Release the holds an earlier beekeeper set on {len(held)} NVIDIA driver "
                 "packages (the branch pin keeps the branch; its updates come in)")
    if not needs_driver(cfg, facts):
        return False
    branch = driver_branch_to_install(cfg, facts.cuda_version)
    pinning = f"nvidia-driver-pinning-{branch}"
    driver = driver_package(cfg.data.driver_flavour)
    headers = [f"linux-headers-{facts.wsl.kernel_release}"]  # Wsl fact: `uname -r`
    meta = headers_meta(facts.os.as_mapping(), facts.wsl.kernel_release)
    headers += [meta] if meta else []
    upgrade = facts.driver_action == "upgrade"
    nvidia_repos.cuda_repo(nvidia_repos.repos(cfg, facts))
    _debian_steps(facts, [pinning, driver], branch, upgrade,
                  older_branch_advice(cfg, branch, facts.cuda_version))
    files.put(name="Blacklist nouveau (it would hold the GPU)",
              src=io.StringIO(NOUVEAU_BLACKLIST.text), dest=NOUVEAU_BLACKLIST.path,
              mode="0644")
    apt_packages(name=f"Install the kernel headers ({', '.join(headers)})",
                 packages=headers, update=True if upgrade or facts.os.id == "debian"
                 else bool(missing_packages([*headers, pinning, driver])),
                 no_recommends=True)
    if upgrade:
        version = (facts.gpu.driver_version if facts.gpu else None) or "?"
        nvidia.driver_purged(
            name=f"Purge the installed NVIDIA driver ({version}, upgrade_driver)", branch=branch)
    apt_packages(name=f"Lock the NVIDIA driver to branch {branch} ({pinning})",
                 packages=[pinning], no_recommends=True)
    nvidia.driver_installed(name=f"Install the NVIDIA driver, branch {branch} ({driver})",
                            package=driver, after_purge=upgrade)
    if not cfg.data.allow_reboot:
        server.shell(
            name="Stop: the new NVIDIA driver needs a reboot",
            commands=["echo 'beekeeper: NVIDIA driver installed; reboot the host, then deploy "
                      "again (or set allow_reboot = True in host data)' >&2; exit 1"])
        return True
    server.reboot(name="Reboot to load the NVIDIA driver (allow_reboot)",
                  delay=10, reboot_timeout=600)
    if facts.cuda_arch or facts.compute_cap:  # cuda_arch, or an upgraded driver's
        return False
    # the build's arch is fixed when the deploy is planned, before nvidia-smi existed (a
    # fallback sm_89 image would not run on an RTX 3090); re-reading facts would need a
    # second planning pass in one pyinfra run, so: stop and ask for a second run
    server.shell(
        name="Stop: the GPU arch is known only now; deploy again",
        commands=["echo 'beekeeper: NVIDIA driver installed and the host rebooted; its "
                  "GPU arch was unknown when this run was planned: deploy again (or set "
                  "cuda_arch in host data)' >&2; exit 1"])
    return True


def _debian_steps(facts: HostFacts, packages: list[str], branch: int,
                  upgrade: bool, older: str) -> None:
    """Debian: the contrib archive area; Debian 12: apt's answer to whether the driver
    packages install with its dkms. Not asked in preflight: apt knows what NVIDIA's repository
    requires and offers only once it and contrib are in its lists (Debian's own dkms 3.0.10
    alone would refuse hosts that work), so it is asked right after those two additive
    changes, before anything that touches the driver or the boot (ensure's order)."""
    if facts.os.id != "debian":
        return
    apt_sources.component_enabled(
        name="Enable Debian's contrib archive area (NVIDIA's Debian steps)",
        component="contrib")
    if facts.os.version_id == "12":
        nvidia.driver_installable(
            name="Check that Debian 12's dkms can take the driver packages",
            packages=packages, branch=branch, replacing=upgrade, older=older)
