"""
A driver installed by hand from NVIDIA's .run installer: no dpkg package carries it, so
`upgrade_driver`'s purge finds nothing to purge, and installing the kit's packages would put a
second driver beside it (NVIDIA's installation guide: uninstall a runfile driver before
installing the driver from packages). The kit already refuses to install a second driver over
one that does not load (driver_preflight.check_driver_install); a working .run driver too old
for cuda_version is refused the same way, naming nvidia-uninstall, before any change.
"""

from __future__ import annotations

import pytest

from beekeeper.core.errors import BeekeeperError
from beekeeper.facts.gpu import NvidiaModuleInfo

from .harness import DEFAULTS, NATIVE, PCI_RTX4090, card, facts, names, run_deploy, smi

# driver 570 from NVIDIA-Linux-x86_64-570.133.20.run: its module in the kernel's own tree
# (the .run installer's place, not DKMS's updates/dkms), loaded; no driver package at all
RUNFILE = facts(Wsl=NATIVE, GpuInfo=smi(card(), branch=570, cuda="12.8"),
                PciListing=PCI_RTX4090, LinuxDriverPackages=[],
                NvidiaKernelModule=NvidiaModuleInfo(
                    path="/lib/modules/6.8.0-45-generic/kernel/drivers/video/nvidia.ko",
                    loaded=True))


def test_upgrade_driver_never_installs_packages_over_a_runfile_driver():
    try:
        ops = run_deploy({**DEFAULTS, "upgrade_driver": True}, RUNFILE)
    except BeekeeperError as e:
        assert "nvidia-uninstall" in str(e), e
        return
    installs = [n for n in names(ops) if n.startswith("Install the NVIDIA driver")]
    pytest.fail(f"a second driver is installed beside the .run one: {installs}")


def test_the_too_old_refusal_does_not_offer_upgrade_driver_for_a_runfile_driver():
    with pytest.raises(BeekeeperError) as e:
        run_deploy(DEFAULTS, RUNFILE)
    assert "upgrade_driver = True" not in str(e.value), e.value
    assert "nvidia-uninstall" in str(e.value)
