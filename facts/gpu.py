"""
Facts about NVIDIA GPUs, read through nvidia-smi.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pyinfra.api import FactBase

from . import ListFact

QUERY = "name,driver_version,compute_cap,memory.total"
WSL_NVIDIA_SMI = "/usr/lib/wsl/lib/nvidia-smi"


@dataclass(frozen=True)
class GpuCard:
    """One GPU as nvidia-smi lists it; `compute_cap` as nvidia-smi spells it ("8.9"), None
    where it prints a placeholder instead (`[N/A]`, `[Not Supported]`, `[Unknown Error]`:
    a vGPU, MIG or an old driver), which the kit takes as unknown."""

    name: str
    driver_version: str
    compute_cap: str | None
    memory_total_mib: int | None


@dataclass(frozen=True)
class NvidiaSmiInfo:
    """The driver as nvidia-smi reports it, and the GPUs it sees. `cuda_version`: the
    "CUDA Version" line (the newest CUDA the driver runs), None when it prints none."""

    path: str
    cuda_version: str | None = None
    driver_version: str | None = None
    driver_branch: int | None = None
    gpus: tuple[GpuCard, ...] = field(default_factory=tuple)
    # the first GPU's "Product Brand" in nvidia-smi -q ("NVIDIA" on an H200, "GeForce" ...)
    brand: str | None = None
    # what the GPU query printed in place of a card's line ("No devices were found", "Failed
    # to initialize NVML: ..."): its first such line, None where it printed none
    said: str | None = None


def parse_nvidia_smi(output: list[str]) -> NvidiaSmiInfo | None:
    values: dict[str, str] = {}
    gpus: list[GpuCard] = []
    for line in output:
        if line.startswith("path="):
            values["path"] = line[5:].strip()
        elif line.startswith("gpu="):
            parts = [p.strip() for p in line[4:].split(",")]
            if len(parts) != 4:
                values.setdefault("said", line[4:].strip())
                continue
            name, driver, cap, mem = parts
            gpus.append(GpuCard(
                name=name,
                driver_version=driver,
                compute_cap=cap if re.fullmatch(r"\d+\.\d+", cap) else None,
                memory_total_mib=int(float(mem)) if re.match(r"^[\d.]+$", mem) else None,
            ))
        elif line.startswith("brand=") and "brand" not in values:
            values["brand"] = line.split(":", 1)[-1].strip()
        else:
            m = re.search(r"CUDA Version:\s*([\d.]+)", line)
            if m:
                values["cuda_version"] = m.group(1)
    if not values.get("path"):
        return None
    drv = gpus[0].driver_version if gpus else None
    return NvidiaSmiInfo(
        path=values["path"],
        cuda_version=values.get("cuda_version"),
        driver_version=drv,
        driver_branch=int(drv.split(".")[0]) if drv else None,
        gpus=tuple(gpus),
        brand=values.get("brand") or None,
        said=values.get("said") or None,
    )


class GpuInfo(FactBase[NvidiaSmiInfo | None]):
    """Returns the NVIDIA GPUs and driver, or ``None`` when nvidia-smi is missing."""

    def command(self) -> str:
        return (
            f"smi=$(command -v nvidia-smi || ls {WSL_NVIDIA_SMI} 2>/dev/null || true); "
            'if [ -n "$smi" ]; then echo "path=$smi"; '
            f'"$smi" --query-gpu={QUERY} --format=csv,noheader,nounits 2>/dev/null '
            "| sed 's/^/gpu=/'; \"$smi\" 2>/dev/null | grep -o 'CUDA Version: [0-9.]*'; "
            "\"$smi\" -q 2>/dev/null | grep -m1 'Product Brand' | sed 's/^ */brand=/'; fi; true"
        )

    process = staticmethod(parse_nvidia_smi)


def parse_pci_nvidia_devices(output: list[str]) -> tuple[int, ...]:
    """`<class> <device>` per NVIDIA PCI function (sysfs' hex words) -> the device ids of
    the display/3D ones (class 0x03....)."""
    out = []
    for line in output:
        cls, _, device = line.strip().partition(" ")
        if cls.startswith("0x03") and re.match(r"^0x[0-9a-fA-F]{4}$", device.strip()):
            out.append(int(device.strip(), 16))
    return tuple(out)


class PciNvidiaDevices(FactBase[tuple[int, ...]]):
    """Returns the PCI device ids of the NVIDIA display/3D devices, read from sysfs without
    a driver (what tells the card's generation before nvidia-smi can): ``(0x2684,)``; none
    under WSL2, where the GPU is reached through /dev/dxg."""

    default = staticmethod(tuple)

    def command(self) -> str:  # each NVIDIA PCI function's class and device id
        return ("for d in /sys/bus/pci/devices/*; do "
                '[ "$(cat $d/vendor 2>/dev/null)" = 0x10de ] && '
                'echo "$(cat $d/class) $(cat $d/device)"; done; true')

    process = staticmethod(parse_pci_nvidia_devices)


# Packages that carry the Linux driver, by name prefix, as NVIDIA's Ubuntu and Debian
# repositories name them (libnvidia-container*, the Container Toolkit, is not the driver).
# They must never be inside WSL2: they shadow /usr/lib/wsl/lib.
DRIVER_PACKAGE_PREFIXES = ("cuda-drivers", "nvidia-driver", "nvidia-open", "nvidia-dkms",
                           "nvidia-kernel", "nvidia-utils", "nvidia-modprobe",
                           "nvidia-persistenced", "libnvidia-compute", "libnvidia-ml",
                           "libcuda1", "nvidia-smi", "firmware-nvidia-gsp")


def parse_driver_packages(output: list[str]) -> list[str]:
    """`dpkg-query -W -f '${Package} ${Status}\\n'` lines -> installed driver packages."""
    out = []
    for line in output:
        parts = line.split(None, 1)
        if len(parts) == 2 and parts[1].strip().endswith("installed") and \
                "not-installed" not in parts[1] and parts[0].startswith(DRIVER_PACKAGE_PREFIXES):
            out.append(parts[0])
    # a Multi-Arch: same package installed for two architectures is two lines of one name
    return sorted(set(out))


class LinuxDriverPackages(ListFact[str]):
    def command(self) -> str:
        return ("dpkg-query -W -f '${Package} ${Status}\\n' 2>/dev/null "
                "| grep -E '^(nvidia|libnvidia|libcuda1|cuda-drivers|firmware-nvidia)' || true")

    process = staticmethod(parse_driver_packages)


@dataclass(frozen=True)
class NvidiaModuleInfo:
    """The NVIDIA kernel module for the running kernel: its file (`modinfo -n nvidia`, e.g.
    DKMS's /lib/modules/<release>/updates/dkms/nvidia.ko.zst; None: no such module), whether
    it is loaded (/sys/module/nvidia), and whether the file is newer than the last boot (a
    driver installed since, which only a reboot loads)."""

    path: str | None = None
    loaded: bool = False
    since_boot: bool = False


def parse_nvidia_module(output: list[str]) -> NvidiaModuleInfo:
    """`module=`, `mtime=`, `btime=` (/proc/stat), `loaded=1` lines -> NvidiaModuleInfo."""
    v = dict(line.strip().split("=", 1) for line in output if "=" in line)
    path = v.get("module", "").strip() or None
    mtime, btime = v.get("mtime", ""), v.get("btime", "")
    since = bool(path) and mtime.isdigit() and btime.isdigit() and int(mtime) > int(btime)
    return NvidiaModuleInfo(path=path, loaded=v.get("loaded") == "1", since_boot=since)


class NvidiaKernelModule(FactBase[NvidiaModuleInfo]):
    def command(self) -> str:
        return (
            "m=$(modinfo -n nvidia 2>/dev/null || find /lib/modules/$(uname -r) "
            "-name 'nvidia.ko*' 2>/dev/null | head -n1); "
            'echo "module=$m"; '
            '[ -n "$m" ] && echo "mtime=$(stat -c %Y "$m" 2>/dev/null)"; '
            "echo \"btime=$(awk '/^btime/ {print $2}' /proc/stat)\"; "
            "[ -d /sys/module/nvidia ] && echo loaded=1; true"
        )

    process = staticmethod(parse_nvidia_module)
