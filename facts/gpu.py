"""
Facts about NVIDIA GPUs, read through nvidia-smi.
"""

from __future__ import annotations

import re
from typing import Any

from pyinfra.api import FactBase

QUERY = "name,driver_version,compute_cap,memory.total"
WSL_NVIDIA_SMI = "/usr/lib/wsl/lib/nvidia-smi"


def parse_nvidia_smi(lines: list[str]) -> dict[str, Any] | None:
    """Output of the GpuInfo command -> GPU facts, or None when there is no nvidia-smi."""
    values: dict[str, str] = {}
    gpus: list[dict[str, Any]] = []
    for line in lines:
        if line.startswith("path="):
            values["path"] = line[5:].strip()
        elif line.startswith("gpu="):
            parts = [p.strip() for p in line[4:].split(",")]
            if len(parts) != 4:
                continue
            name, driver, cap, mem = parts
            gpus.append({
                "name": name,
                "driver_version": driver,
                "compute_cap": cap,
                "memory_total_mib": int(float(mem)) if re.match(r"^[\d.]+$", mem) else None,
            })
        else:
            m = re.search(r"CUDA Version:\s*([\d.]+)", line)
            if m:
                values["cuda_version"] = m.group(1)
    if not values.get("path"):
        return None
    drv: str | None = gpus[0]["driver_version"] if gpus else None
    return {
        "path": values["path"],
        "cuda_version": values.get("cuda_version"),
        "driver_version": drv,
        "driver_branch": int(drv.split(".")[0]) if drv else None,
        "gpus": gpus,
    }


class GpuInfo(FactBase[dict[str, Any] | None]):
    """
    Returns the NVIDIA GPUs and driver, or ``None`` when nvidia-smi is missing:

    .. code:: python

        {"path": "/usr/lib/wsl/lib/nvidia-smi", "cuda_version": "13.2",
         "driver_version": "596.21", "driver_branch": 596,
         "gpus": [{"name": "NVIDIA GeForce RTX 4090", "driver_version": "596.21",
                   "compute_cap": "8.9", "memory_total_mib": 24564}]}
    """

    def command(self) -> str:
        return (
            f"smi=$(command -v nvidia-smi || ls {WSL_NVIDIA_SMI} 2>/dev/null || true); "
            'if [ -n "$smi" ]; then echo "path=$smi"; '
            f'"$smi" --query-gpu={QUERY} --format=csv,noheader,nounits 2>/dev/null '
            "| sed 's/^/gpu=/'; \"$smi\" 2>/dev/null | grep -o 'CUDA Version: [0-9.]*'; fi; true"
        )

    def process(self, output: list[str]) -> dict[str, Any] | None:
        return parse_nvidia_smi(output)
