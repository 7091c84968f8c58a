"""
The host's own CUDA toolkit for a native build: used instead of installing
`cuda-toolkit-X-Y` where it can build for the card and its binaries run on the driver.

- It builds for the card when its release knows the card's arch (NVIDIA's CUDA Toolkit
  release notes: sm_89/sm_90 from CUDA 11.8, sm_100/sm_120 from 12.8, sm_103/sm_121 from
  12.9), and still has it (CUDA 13.0 dropped every arch below sm_75).
- Its binaries run on the driver by CUDA's minor version compatibility (beekeeper.core.
  cudacompat: a 13.x build runs on any driver of branch 580 or newer); the kit builds SASS for
  the card's own arch, so nothing needs the driver's PTX JIT.
- The kit builds with CUDA 12 or newer (the releases it knows driver branches for).
"""

from __future__ import annotations

from dataclasses import dataclass

from . import cudacompat

# arch -> the first CUDA release that compiles for it (release notes, "New Features")
FIRST_CUDA: dict[int, tuple[int, int]] = {
    75: (10, 0), 80: (11, 0), 86: (11, 1), 87: (11, 4), 89: (11, 8), 90: (11, 8),
    100: (12, 8), 101: (12, 8), 103: (12, 9), 110: (13, 0), 120: (12, 8), 121: (12, 9),
}
# CUDA 13.0 removed offline compilation for architectures before Turing (sm_75)
LAST_MAJOR_BELOW_75 = 12
OLDEST = (12, 0)
# an arch's suffix -> the first CUDA that compiles it: 'a' (sm_90a) from 12.0, 'f' (the
# family-specific targets, sm_100f) from 12.9 (release notes; hostdata._arch_list holds
# which archs have one)
SUFFIX_CUDA: dict[str, tuple[int, int]] = {"": (0, 0), "a": (12, 0), "f": (12, 9)}
# the newest release the kit knows of the last major that still builds below sm_75
LAST_BELOW_75 = cudacompat.NEWEST_RELEASE[
    max(mm for mm in cudacompat.NEWEST_RELEASE if mm[0] == LAST_MAJOR_BELOW_75)]


def split_arch(arch: str) -> tuple[int, str]:
    """'90a' -> (90, 'a'); '89' -> (89, '')."""
    digits = arch.rstrip("abcdefghijklmnopqrstuvwxyz")
    return int(digits), arch[len(digits):]


def first_cuda(arch: str) -> tuple[int, int] | None:
    """The first CUDA release that compiles for `arch` ('120', '90a', '100f'); None where
    the kit does not know the arch (unknown is not wrong: nvcc judges it)."""
    n, suffix = split_arch(arch)
    first = FIRST_CUDA.get(n)
    return None if first is None else max(first, SUFFIX_CUDA.get(suffix, (0, 0)))


def cannot_build(mm: tuple[int, int], arch: str) -> str | None:
    """Why CUDA `mm` (major, minor) cannot compile for `arch`, in a few words; None where it
    can, or where the kit does not know the arch."""
    if split_arch(arch)[0] < 75 and mm[0] > LAST_MAJOR_BELOW_75:
        return "CUDA 13 dropped architectures before sm_75"
    first = first_cuda(arch)
    if first is not None and mm < first:
        return f"sm_{arch} needs CUDA {cudacompat.spell(first)} or newer"
    return None


@dataclass(frozen=True)
class ToolkitChoice:
    """`use`: build with the host's nvcc; `why`: the reason, for a line of output."""

    use: bool
    why: str


def host_toolkit(nvcc_version: str | None, archs: list[str],
                 driver_branch: int | None) -> ToolkitChoice:
    """Whether the host's toolkit (`nvcc --version`'s release) builds for each arch of
    `archs` ("90", "89") and runs on the driver of `driver_branch`."""
    if not nvcc_version:
        return ToolkitChoice(False, "no CUDA toolkit on the host (no nvcc)")
    try:
        mm = cudacompat.major_minor(nvcc_version)
    except ValueError:
        return ToolkitChoice(False, f"nvcc reports {nvcc_version!r}, not a CUDA release")
    have = f"the host's CUDA toolkit {nvcc_version}"
    if mm < OLDEST:
        return ToolkitChoice(False, f"{have} is older than {cudacompat.spell(OLDEST)}")
    for arch in archs:
        # the archs: host data cuda_arch's (hostdata.CUDA_ARCH) or the cards' (digits)
        why = cannot_build(mm, arch)
        if why or first_cuda(arch) is None:  # an arch the kit does not know: not this one
            return ToolkitChoice(False, f"{have} cannot build for sm_{arch}"
                                        + (f" ({why})" if why else ""))
    if driver_branch is None:
        return ToolkitChoice(False, f"{have}: no driver to run it on yet")
    floor = cudacompat.MINOR_COMPAT_BRANCH.get(mm[0])
    if floor is None or driver_branch < floor:
        return ToolkitChoice(False, f"{have} needs a driver of branch {floor or '?'} or newer "
                                    f"(minor version compatibility); this one is {driver_branch}")
    return ToolkitChoice(True, f"{have} builds for sm_{', sm_'.join(archs)} and runs on "
                               f"driver branch {driver_branch}: used, nothing installed")
