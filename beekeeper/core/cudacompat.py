"""
Which NVIDIA driver runs which CUDA, from NVIDIA's own tables (see README, "GPU hosts"):

- CUDA Toolkit release notes, Table 3 "CUDA Toolkit and Corresponding Driver Versions"
  (Linux x86_64): 13.0 GA >= 580.65.06, 13.1 GA >= 590.44.01, 13.2 GA >= 595.45.04,
  13.2 Update 1 >= 595.58.03. A driver of that branch reports that CUDA version in
  nvidia-smi ("CUDA Version"), which is what the container runtime compares with an
  image's NVIDIA_REQUIRE_CUDA (`cuda>=13.2` for a 13.2 image).
- CUDA Compatibility, "Minor Version Compatibility": an application built with any 13.x
  toolkit runs, with a limited feature set (no PTX JIT of newer PTX), on a driver >= 580.
"""

from __future__ import annotations

import re

# CUDA major.minor -> the driver branch NVIDIA ships with it (release notes, Table 3).
TOOLKIT_DRIVER_BRANCH: dict[tuple[int, int], int] = {(13, 0): 580, (13, 1): 590, (13, 2): 595}
# CUDA major -> lowest driver branch for minor version compatibility (CUDA Compatibility).
MINOR_COMPAT_BRANCH: dict[int, int] = {11: 450, 12: 525, 13: 580}


def major_minor(version: str) -> tuple[int, int]:
    """'13.2.1' -> (13, 2); '13.0' -> (13, 0)."""
    m = re.match(r"\s*(\d+)\.(\d+)", version)
    if not m:
        raise ValueError(f"not a CUDA version: {version!r}")
    return int(m.group(1)), int(m.group(2))


def spell(mm: tuple[int, int]) -> str:
    return f"{mm[0]}.{mm[1]}"


def minor_compat_branch(cuda_version: str) -> int:
    """Lowest driver branch that runs a CUDA major's binaries at all (minor version compat)."""
    return MINOR_COMPAT_BRANCH.get(major_minor(cuda_version)[0], 580)


def branch_for_cuda(cuda_version: str) -> int | None:
    """The driver branch that reports (and so fully runs) this CUDA major.minor, if known."""
    return TOOLKIT_DRIVER_BRANCH.get(major_minor(cuda_version))


def cuda_of_branch(branch: int) -> tuple[int, int] | None:
    """The newest CUDA major.minor a driver branch reports, from Table 3; None below it."""
    known = [mm for mm, b in TOOLKIT_DRIVER_BRANCH.items() if b <= branch]
    return max(known) if known else None
