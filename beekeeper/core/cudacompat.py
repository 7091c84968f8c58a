"""
Which NVIDIA driver runs which CUDA, from NVIDIA's own tables (see docs/gpu-hosts.md):

- CUDA Toolkit release notes, Table 3 "CUDA Toolkit and Corresponding Driver Versions"
  (Linux x86_64): 13.0 GA >= 580.65.06, 13.1 GA >= 590.44.01, 13.1 Update 1 >= 590.48.01,
  13.2 GA >= 595.45.04, 13.2 Update 1 >= 595.58.03. A driver of that branch reports that CUDA
  version in nvidia-smi, which the container runtime compares with NVIDIA_REQUIRE_CUDA.
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


# nvidia/cuda images' NVIDIA_REQUIRE_CUDA (the base image's Dockerfile in NVIDIA's
# container-images repository): `cuda>=M.m`, or, on the brands listed, a driver of one of the
# branches listed (those cards run the newer CUDA through the image's cuda-compat libraries,
# CUDA forward compatibility). 13.2: dist/13.2.1/ubuntu2404/base/Dockerfile; 13.1:
# dist/13.1.2/ubuntu2404/base/Dockerfile (branches of its own: 550, 560 and 565 beside 13.2.1's
# 535, 570 and 580, and no 590); 13.0: the CUDA 13.0.2 image's environment read on an H200
# host (tests/unit/data/README-host-states.md).
REQUIRE_BRANDS = ("unknown", "grid", "tesla", "nvidia", "quadro", "quadrortx", "nvidiartx",
                  "vapps", "vpc", "vcs", "vws", "cloudgaming")
REQUIRE_BRANCHES: dict[tuple[int, int], tuple[int, ...]] = {
    (13, 0): (535, 550, 565, 570, 575), (13, 1): (535, 550, 560, 565, 570, 580),
    (13, 2): (535, 570, 580, 590)}
# the newest nvidia/cuda release of each CUDA minor, for an image that follows the driver
NEWEST_RELEASE: dict[tuple[int, int], str] = {
    (12, 8): "12.8.1", (12, 9): "12.9.1", (13, 0): "13.0.2", (13, 1): "13.1.2", (13, 2): "13.2.1"}


# the first CUDA whose nvidia/cuda images are tagged with each Ubuntu the kit names: 22.04
# from 11.7 (20.04 before it), 24.04 from 12.6 (from 12.5 or 12.5.1: which is not certain,
# and 22.04 has both)
UBUNTU_FROM = ((12, 6, "ubuntu24.04"), (11, 7, "ubuntu22.04"))


def image_ubuntu(cuda_version: str) -> str:
    """The Ubuntu of nvidia/cuda's `<release>-devel-<ubuntu>` and `-runtime-` images of a
    release (a tag that does not exist fails the image's build at its first line)."""
    mm = major_minor(cuda_version)
    return next((name for *first, name in UBUNTU_FROM if mm >= tuple(first)), "ubuntu20.04")


def require_cuda(cuda_version: str) -> str:
    """The image's NVIDIA_REQUIRE_CUDA as nvidia/cuda:<cuda_version> spells it (known minors),
    else its first clause alone."""
    mm = major_minor(cuda_version)
    clauses = [f"cuda>={spell(mm)}"]
    for branch in REQUIRE_BRANCHES.get(mm, ()):
        clauses += [f"brand={b},driver>={branch},driver<{branch + 1}" for b in REQUIRE_BRANDS]
    return " ".join(clauses)


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text))


def require_accepts(rule: str, cuda: str | None, driver: str | None, brand: str | None) -> bool:
    """Whether a host passes an NVIDIA_REQUIRE_CUDA rule as the container runtime judges it:
    space-separated clauses are ORed, comma-separated constraints ANDed; `cuda` is the CUDA
    version the driver reports, `driver` its version, `brand` the card's brand token."""
    facts = {"cuda": cuda, "driver": driver, "brand": brand}
    ops = {">=": lambda a, b: a >= b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b,
           "<": lambda a, b: a < b, "=": lambda a, b: a == b}

    def holds(constraint: str) -> bool:
        m = re.match(r"^(\w+)(>=|<=|=|<|>)(.+)$", constraint)
        if not m or not facts.get(m.group(1)):
            return False
        have, want = str(facts[m.group(1)]), m.group(3)
        if m.group(1) == "brand":
            return m.group(2) == "=" and have == want
        return bool(ops[m.group(2)](_version(have), _version(want)))

    return any(all(holds(c) for c in clause.split(",")) for clause in rule.split())


def brand_token(product_brand: str | None) -> str | None:
    """nvidia-smi -q's "Product Brand" ("NVIDIA", "NVIDIA RTX", "Quadro RTX", "GeForce") as the
    container runtime names it in brand= constraints ("nvidia", "nvidiartx", "quadrortx")."""
    return re.sub(r"\s+", "", product_brand).lower() if product_brand else None


# The brands whose cards run a newer CUDA on an older driver through the image's
# cuda-compat libraries. NVIDIA's CUDA Compatibility guide, "Forward Compatibility": it "is
# applicable only for systems with NVIDIA Data Center GPUs, select NGC Server Ready SKUs of
# RTX cards, Jetson boards"; elsewhere CUDA fails at start with error 804
# (cudaErrorCompatNotSupportedOnDevice), after the build. So of the image's brand clauses
# only the data-center ones count: Tesla, NVIDIA (H100, H200, L40 ...), and the vGPU brands
# on them; the workstation brands (quadro, quadrortx, nvidiartx: the guide's "select" RTX
# SKUs cannot be told from the brand) and GeForce do not, nor a brand nvidia-smi cannot name.
FORWARD_COMPAT_BRANDS = frozenset(("tesla", "nvidia", "grid", "vapps", "vpc", "vcs", "vws",
                                   "cloudgaming"))


def forward_compat_brand(product_brand: str | None) -> str | None:
    """The card's brand token where CUDA forward compatibility runs on it, else None."""
    token = brand_token(product_brand)
    return token if token in FORWARD_COMPAT_BRANDS else None


def newest_release(mm: tuple[int, int]) -> str | None:
    """The nvidia/cuda release the kit builds for a CUDA major.minor, if it knows one."""
    return NEWEST_RELEASE.get(mm)
