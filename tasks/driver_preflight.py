"""
Preflight of the NVIDIA driver, before any change: the driver there against the CUDA asked for,
the branch the kit would install, and the hosts where an install would loop or break
(docs/hosts-as-you-find-them.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NoReturn

from pyinfra import host

from beekeeper.core import cudacompat
from beekeeper.core.build import arch_runs_on, card_archs, cuda_arch_from_compute_cap
from beekeeper.core.config import HostConfig
from beekeeper.core.cudacompat import spell
from beekeeper.core.distro import backports_suite, headers_meta, image_meta, series
from beekeeper.core.errors import PreflightError, host_data, shown
from beekeeper.core.hostdata import HostData
from beekeeper.core.planner import predict
from beekeeper.core.toolkit import (
    LAST_BELOW_75,
    LAST_MAJOR_BELOW_75,
    cannot_build,
    first_cuda,
    split_arch,
)
from beekeeper.facts.boot import SecureBoot, SecureBootInfo
from beekeeper.facts.gpu import (
    WSL_NVIDIA_SMI,
    LinuxDriverPackages,
    NvidiaKernelModule,
    NvidiaModuleInfo,
    NvidiaSmiInfo,
    PciNvidiaDevices,
)
from beekeeper.facts.host import AptPolicy, AptPolicyInfo, OsRelease, WslInfo

from .say import warn


@dataclass(frozen=True)
class DriverPlan:
    """What preflight decided about the NVIDIA driver: `pci` NVIDIA GPUs on PCI; `action`
    "install" (none there), "upgrade" (one too old, host data `upgrade_driver`), or None;
    `cuda_version` the release the image is built for when it follows the driver."""

    pci: int = 0
    action: str | None = None
    cuda_version: str | None = None


def check_cuda(cfg: HostConfig, wsl: WslInfo, gpu: NvidiaSmiInfo | None,
               os_id: str, cuda: str, *, gpu_container: bool) -> DriverPlan:
    """A CUDA profile: GPU, driver, arch; what the driver tasks are to do, for the CUDA
    release `cuda` (host data's, or the host toolkit's that builds: tasks/preflight.py).
    `gpu_container`: PID 1 is not systemd, a GPU container, whose driver is the machine's."""
    if cfg.service.profile.backend != "cuda":
        return DriverPlan()
    devices = host.get_fact(PciNvidiaDevices)
    pci = len(devices)
    wsl_pkgs = host.get_fact(LinuxDriverPackages) if wsl.is_wsl2 else []
    if not wsl.is_wsl2 and pci > 0 and (gpu is None or not gpu.gpus):
        if gpu_container:
            raise PreflightError(
                "no NVIDIA GPU", f"is visible in this container (the PCI bus shows {pci}, "
                f"nvidia-smi {'is missing' if gpu is None else 'lists none'}); a container's "
                "driver is the machine's, never installed inside it", "start the container "
                "with its GPU (`docker run --gpus all`, or the provider's GPU option), or "
                "choose a CPU profile such as cpu-tiny", lead=" ", then=": ")
        # the kit would install the driver: not if one is there that does not load, nor
        # where Secure Boot would reject the module it builds
        check_driver_install(host.get_fact(LinuxDriverPackages),
                             host.get_fact(NvidiaKernelModule), host.get_fact(SecureBoot),
                             cfg.data.allow_reboot, os_id)
        check_flavour_by_pci(cfg, devices)
    plan = check_gpu(cfg, wsl, gpu, pci, wsl_pkgs, cuda,
                     lambda: fixed_driver(gpu_container, wsl, gpu))
    if plan.action == "upgrade":
        check_secure_boot(host.get_fact(SecureBoot), os_id)
    if plan.action in ("install", "upgrade"):  # the kit installs the kernel headers
        os_release = host.get_fact(OsRelease).as_mapping()
        meta = headers_meta(os_release, wsl.kernel_release)
        if meta:
            check_kernel_headers(
                os_release, wsl.kernel_release, meta,
                host.get_fact(AptPolicy, package=f"linux-headers-{wsl.kernel_release}"),
                host.get_fact(AptPolicy, package=meta))
    return DriverPlan(pci=pci, action=plan.action, cuda_version=plan.cuda_version)


# why the kit cannot replace a driver nvidia-smi reports, and the way instead (old_driver)
FIXED = {
    "container": "the driver is the machine's, outside this container, and the kit cannot "
                 "replace it: run on a machine (or a provider's template) with driver branch "
                 "{branch} or newer",
    "runfile": "no package carries this driver (NVIDIA's .run installer), so the kit cannot "
               "purge it: remove it with `sudo nvidia-uninstall`, reboot, and deploy again (the "
               "kit then installs branch {branch}), or update it to branch {branch} or newer",
}


def fixed_driver(gpu_container: bool, wsl: WslInfo, gpu: NvidiaSmiInfo | None) -> str | None:
    """A FIXED key where nvidia-smi reports a driver the kit cannot replace (upgrade_driver
    purges driver packages, then installs its branch): a container's, or one no dpkg package
    carries; None where it can, or there is none to replace."""
    if wsl.is_wsl2 or gpu is None or not gpu.gpus:
        return None
    if gpu_container:
        return "container"
    return None if host.get_fact(LinuxDriverPackages) else "runfile"


def check_kernel_headers(os_release: dict[str, str], kernel: str, meta: str,
                         own: AptPolicyInfo, follow: AptPolicyInfo) -> None:
    """Before the kit installs a driver, the kernel headers it installs beside it can be had
    from apt's lists as they are: a backports kernel's meta-package of its own series, and the
    running kernel's own headers (docs/hosts-as-you-find-them.md, "Which driver the kit
    installs"); the latter judged only where the lists offer the meta-package."""
    suite = backports_suite(os_release, kernel)
    if suite and series(follow.installed) != series(kernel):
        have = follow.installed or follow.candidate
        brings = f" ({meta} {have} is the {spell(series(have) or (0, 0))} series')" \
            if series(have) else ""
        raise PreflightError(
            f"the running kernel {kernel}", f"is a {suite} kernel, and Debian "
            f"{os_release.get('version_id')}'s {meta} follows its own kernels{brings}: DKMS "
            "would build the NVIDIA module for no later backports kernel, and after the next "
            "kernel update it would not load", f"`sudo apt install -t {suite} {meta}` "
            f"(with {suite} in apt's sources), then deploy again", lead=" ")
    if own.installed is None and own.candidate is None and follow.candidate:
        raise PreflightError(
            f"the running kernel {kernel}", "has no headers apt can install (linux-headers-"
            f"{kernel}: no candidate; the archive carries its current kernel ABI only, and "
            f"{meta} brings {follow.candidate}), so DKMS cannot build the NVIDIA module for "
            f"it", f"`sudo apt update && sudo apt install {image_meta(meta)}`, reboot into "
            "the kernel it brings, then deploy again (the kit installs `linux-headers-$(uname "
            "-r)`)", lead=" ")


def check_gpu(cfg: HostConfig, wsl: WslInfo, gpu: NvidiaSmiInfo | None,
              pci_gpus: int, wsl_driver_packages: list[str],
              cuda: str | None = None,
              fixed: Callable[[], str | None] | None = None) -> DriverPlan:
    """Refuse a CUDA profile on a host whose GPU, driver or arch cannot run the image
    (`cuda`: the release judged, cuda_judged(); `fixed`: fixed_driver, read for a driver
    too old)."""
    cuda = cuda_judged(cfg, cuda)
    if wsl.is_wsl2 and wsl_driver_packages:
        raise PreflightError(
            "Linux NVIDIA driver packages", "are installed inside WSL2 "
            f"({', '.join(wsl_driver_packages)}); they shadow the Windows driver and break "
            f"NVML", f"remove them (apt purge {' '.join(wsl_driver_packages)}) and deploy again",
            lead=" ", then=": ")
    if (gpu is None or not gpu.gpus) and not wsl.is_wsl2 and pci_gpus > 0:
        driver_branch_to_install(cfg, cuda)  # refuses a branch that cannot run the chosen CUDA
        return DriverPlan(action="install")  # tasks/nvidia_driver.py installs it
    # a Linux driver's nvidia-smi inside WSL2 lists no GPU either: named before refuse_no_gpu
    if wsl.is_wsl2 and gpu is not None and gpu.path != WSL_NVIDIA_SMI:
        raise PreflightError(
            "nvidia-smi", f"resolves to {gpu.path}, not {WSL_NVIDIA_SMI}: a Linux NVIDIA "
            "driver is installed inside WSL2", "remove it (apt purge 'nvidia-*' 'libnvidia-*') "
            "and use the Windows driver", lead=" ", then="; ")
    if gpu is None or not gpu.gpus:
        refuse_no_gpu(cfg, wsl, gpu, cuda)
    unknown = next((c for c in gpu.gpus if c.compute_cap is None), None)
    if unknown is not None and not cfg.data.cuda_arch:
        raise PreflightError(
            "nvidia-smi", f"prints no compute capability for the {unknown.name} ([N/A]: a "
            "vGPU, MIG or an older driver), so the kit cannot tell which CUDA arch to build "
            "for", "set host data `cuda_arch` to the card's (e.g. cuda_arch = '90' for an H100 or "
            "H200, '89' for an RTX 40xx; NVIDIA's CUDA GPUs page lists them)", lead=" ", then=": ")
    check_generation(cfg, _cards(gpu), cuda)
    asked = cfg.data.cuda_arch
    for card in gpu.gpus:  # every card: the unit gives the server every GPU
        cap = card.compute_cap  # not printed: the given cuda_arch is taken as the card's
        if asked and cap is not None and not arch_runs_on(asked, cap):
            raise PreflightError(
                f"cuda_arch {asked}", f"has no kernels for the {card.name} (compute "
                f"capability {cap}, sm_{cuda_arch_from_compute_cap(cap)})", "add "
                f"{cuda_arch_from_compute_cap(cap)} to cuda_arch or remove the override",
                lead=" ", then=": ")
    check_cards_memory(cfg, gpu)
    why = driver_too_old(cfg, wsl, gpu, cuda)
    plan = DriverPlan() if why is None else old_driver(cfg, wsl, gpu, why, cuda,
                                                       fixed() if fixed else None)
    if plan.action == "upgrade":
        check_flavour(cfg, gpu)
        check_branch_keeps_card(cfg, _cards(gpu), cuda)
    return plan


def refuse_no_gpu(cfg: HostConfig, wsl: WslInfo, gpu: NvidiaSmiInfo | None,
                  cuda: str) -> NoReturn:
    """No GPU nvidia-smi lists: under WSL2, the Windows driver missing (no nvidia-smi: the
    driver `cuda` needs, by the CUDA version it reports, as docs/quickstart-wsl2.md says), or
    there and listing none (what it printed, where the fact has it)."""
    if wsl.is_wsl2 and gpu is not None:
        said = f" (it printed {gpu.said!r})" if gpu.said else ""
        raise PreflightError(
            gpu.path, f"is there but lists no GPU{said}", "run `wsl --shutdown` on Windows "
            "and open the distro again; if it still lists none, check that nvidia-smi on "
            "Windows lists the card, and reinstall the NVIDIA driver on Windows if it does "
            "not", lead=" ", then=": ")
    if wsl.is_wsl2:
        raise PreflightError(
            "no NVIDIA GPU", f"visible in WSL2 (no {WSL_NVIDIA_SMI})",
            f"install or update {windows_driver(cfg, cuda)}", lead=" ", then=": ")
    raise PreflightError("no NVIDIA GPU", "found (nvidia-smi missing)", "install the "
                         "driver, or choose a CPU profile such as cpu-tiny", lead=" ",
                         then=": ")


def check_cards_memory(cfg: HostConfig, gpu: NvidiaSmiInfo) -> None:
    """A host of several cards: the services' planned VRAM, with 1 GiB to spare, fits the
    smallest (the unit gives the server every GPU). One card: preflight's own VRAM check."""
    cards = [c for c in gpu.gpus if c.memory_total_mib]
    if len(gpu.gpus) < 2 or not cards:
        return
    total = sum(predict(s.profile).total_mib for s in cfg.services
                if s.profile.backend == "cuda")
    small = min(cards, key=lambda c: c.memory_total_mib or 0)
    if total + 1024 > (small.memory_total_mib or 0):
        raise PreflightError(
            "the services", f"plan {total:.0f} MiB of VRAM, more than the {small.name}'s "
            f"{small.memory_total_mib} MiB less 1024 MiB margin, the smallest of this host's "
            f"{len(gpu.gpus)} cards", "pick smaller profiles or ctx_size, or drop a service",
            lead=" ", then=": ")


def archs_of_cards(cfg: HostConfig, gpu: NvidiaSmiInfo | None) -> str | None:
    """The arch list to build for: host data `cuda_arch`, else every card's own arch where
    they differ (a 4090 and a 3090: '86;89'), else None (the build takes the one card's)."""
    if cfg.data.cuda_arch:
        return cfg.data.cuda_arch
    archs = [arch for arch, _ in archs_built(cfg, gpu)]
    return ";".join(archs) if len(archs) > 1 else None


def archs_built(cfg: HostConfig, gpu: NvidiaSmiInfo | None) -> list[tuple[str, str | None]]:
    """Each arch the build targets and the card it is for: host data `cuda_arch`'s (no card),
    else each card's own, in card_archs' order (the first card of an arch named)."""
    if cfg.data.cuda_arch:
        return [(arch, None) for arch in cfg.data.cuda_arch.split(";")]
    cards = gpu.gpus if gpu else ()
    named = {cuda_arch_from_compute_cap(c.compute_cap): c.name
             for c in reversed(cards) if c.compute_cap}
    return [(arch, named[arch]) for arch in card_archs(c.compute_cap for c in cards)]


# the kit's default CUDA release
DEFAULT_CUDA = str(HostData.model_fields["cuda_version"].default)


def release_for(archs: list[str]) -> str | None:
    """A CUDA release that builds every arch of `archs`: the kit's default where it does,
    else the newest the kit knows that does (cudacompat.NEWEST_RELEASE); None: none does."""
    known = sorted(cudacompat.NEWEST_RELEASE.values(), key=cudacompat.major_minor, reverse=True)
    return next((r for r in [DEFAULT_CUDA, *known] if not any(
        cannot_build(cudacompat.major_minor(r), arch) for arch in archs)), None)


def check_cuda_builds(cfg: HostConfig, gpu: NvidiaSmiInfo | None, followed: str | None,
                      host_cuda: str | None = None) -> None:
    """The CUDA release a CUDA build uses compiles for every arch it targets (archs_built;
    core/toolkit.cannot_build), refused here rather than by nvcc minutes into the build
    ("Unsupported gpu architecture 'compute_120'"). The release: `followed`, the one
    cuda_follows_driver chose, else host data's cuda_version; `host_cuda`: the host's own
    toolkit builds, chosen by host_toolkit only where it builds for these archs. Not judged:
    a build image of base_images, whose CUDA the kit does not read."""
    if cfg.service.profile.backend != "cuda" or "build" not in cfg.data.stages or host_cuda \
            or (cfg.data.base_images is not None and cfg.data.base_images.build):
        return
    cuda = followed or cfg.data.cuda_version
    targets = archs_built(cfg, gpu)
    bad = [(arch, card, why) for arch, card in targets
           if (why := cannot_build(cudacompat.major_minor(cuda), arch))]
    if not bad:
        return
    arch, card, why = bad[0]
    given = cfg.data.cuda_arch
    ours = " (the kit's default)" if cuda == DEFAULT_CUDA and not followed else ""
    fixes = [f"remove {', '.join(a for a, _, _ in bad)} from cuda_arch"] \
        if given and len(bad) < len(targets) else []
    release = release_for([a for a, _ in targets])
    if split_arch(arch)[0] >= 75:
        need = first_cuda(arch)
        assert need is not None  # cannot_build refuses from sm_75 only an arch it knows
        if followed:
            fixes.append(f"update the NVIDIA driver to one that reports CUDA {spell(need)} or "
                         "newer (the build follows it)")
        elif release:
            fixes.append(f"set cuda_version = '{release}'" + (
                " or newer (or remove it: the kit's default)" if release == DEFAULT_CUDA else ""))
        elif len(targets) == 1:  # a release newer than the kit knows
            fixes.append(f"set cuda_version to a CUDA {spell(need)} release or newer")
        target = f"the {card}" if card else f"cuda_arch {shown(given)}"
        said = f"the driver's CUDA {cuda}" if followed else f"{shown(cuda)}{ours}"
        raise PreflightError(host_data("cuda_follows_driver" if followed else "cuda_version"),
                             f"{said} cannot build for {target} ({why})", _either(fixes, arch))
    # an arch CUDA 13 dropped, named in cuda_arch (check_generation refuses such a card
    # before this): a CUDA 12 release builds it, no newer one does
    if release:
        fixes.append(f"set cuda_version = '{release}' (CUDA {LAST_MAJOR_BELOW_75} is the last "
                     f"that builds for sm_{arch})")
    of = "cuda_follows_driver: the driver's" if followed else \
        "cuda_version, the kit's default" if ours else "cuda_version"
    raise PreflightError(host_data("cuda_arch"), f"{shown(given)} asks for sm_{arch}, which "
                         f"CUDA {cuda} ({of}) cannot build ({why})", _either(fixes, arch))


def _either(fixes: list[str], arch: str) -> str:
    """The fixes offered, or where none is (no release the kit knows builds every arch
    asked for): build the others apart."""
    return ", or ".join(fixes) or f"no CUDA release the kit knows builds sm_{arch} beside " \
        "the other archs: give each its own host (cuda_arch), or remove it from cuda_arch"


# NVIDIA's CUDA 13.0 dropped offline compilation and library support for compute capability
# below 7.5 (Maxwell, Pascal, Volta: CUDA 12.x is their last), and "the release 580 series
# will be the last to support GPUs based on the Maxwell, Pascal, and Volta architectures"
# (NVIDIA's Unix graphics feature deprecation schedule); Kepler (below 5.0) ended with 470.
# NVIDIA's open kernel modules, too, run on Turing (compute capability 7.5) and newer.
TURING = (7, 5)
LAST_BRANCH_BELOW_TURING = 580
KEPLER_LAST_BRANCH = 470


def _cap(compute_cap: str) -> tuple[int, int]:
    major, _, minor = compute_cap.partition(".")
    return int(major), int(minor or 0)


def _cards(gpu: NvidiaSmiInfo) -> list[tuple[str, str]]:
    """(how a refusal says what the card is, its compute capability) for each card."""
    return [(f"the {c.name} is compute capability {c.compute_cap}", c.compute_cap)
            for c in gpu.gpus if c.compute_cap]


def cuda_judged(cfg: HostConfig, cuda: str | None) -> str:
    return cuda or cfg.data.cuda_version


def check_generation(cfg: HostConfig, cards: list[tuple[str, str]],
                     cuda: str | None = None) -> None:
    """A card CUDA 13 cannot serve (Maxwell, Pascal, Volta; Kepler and older) is refused
    before any change, naming it, its last driver branch and the way that works: CUDA 12
    on branch 580 (the proprietary modules: the open ones need Turing)."""
    old = [(n, c) for n, c in cards if _cap(c) < TURING]
    if not old:
        return
    name, cap = old[0]
    if _cap(cap) < (5, 0):
        raise PreflightError(
            name, "Kepler or older, past NVIDIA's support: "
            f"its last driver branch is {KEPLER_LAST_BRANCH} (CUDA 11.4), older than any "
            "CUDA the kit builds for", "use a Turing or newer card, or a CPU profile",
            lead=", ")
    cuda = cuda_judged(cfg, cuda)
    if cudacompat.major_minor(cuda)[0] >= 13:
        raise PreflightError(
            name, "Maxwell, Pascal or Volta, which CUDA 13 dropped (cuda_version is "
            f"{cuda}; CUDA 12 is their last), and NVIDIA's branch "
            f"{LAST_BRANCH_BELOW_TURING} is their last driver", "set driver_flavour = "
            f"'proprietary', cuda_version = '{LAST_BELOW_75}' and driver_branch = "
            f"{LAST_BRANCH_BELOW_TURING}, or use a Turing or newer card")
    check_branch_keeps_card(cfg, cards, cuda)


def check_branch_keeps_card(cfg: HostConfig, cards: list[tuple[str, str]],
                            cuda: str | None = None) -> None:
    """The branch the kit would install (or upgrade to) still drives every card: never a
    branch after 580 on a Maxwell, Pascal or Volta card, which that branch dropped."""
    old = [(n, c) for n, c in cards if _cap(c) < TURING]
    branch = cfg.data.driver_branch or cudacompat.branch_for_cuda(cuda_judged(cfg, cuda))
    if old and branch is not None and branch > LAST_BRANCH_BELOW_TURING:
        raise PreflightError(
            host_data("driver_branch"), f"branch {branch} drops Maxwell, Pascal and Volta, "
            f"and {old[0][0]}: NVIDIA's {LAST_BRANCH_BELOW_TURING} is its last", "set "
            f"driver_branch = {LAST_BRANCH_BELOW_TURING} (with cuda_version = "
            f"'{LAST_BELOW_75}')")


def driver_branch_to_install(cfg: HostConfig, cuda: str | None = None,
                             branch: int | None = None) -> int:
    """The driver branch the kit installs on native Linux: host data `driver_branch`, else
    the branch NVIDIA ships with the chosen CUDA (release notes, Table 3), so the driver
    reports at least the image's CUDA and its NVIDIA_REQUIRE_CUDA holds. `cuda`: the release
    judged (cuda_judged()); `branch`: one to judge instead of host data's driver_branch."""
    cuda = cuda_judged(cfg, cuda)
    mm = cudacompat.major_minor(cuda)
    shipped = cudacompat.branch_for_cuda(cuda)
    given = cfg.data.driver_branch if branch is None else branch
    if given is None:
        if shipped is None:
            raise PreflightError(
                host_data("cuda_version"), f"no known driver branch for CUDA {cuda}",
                "set driver_branch to the branch NVIDIA's release notes give for it", then=": ")
        return shipped
    branch = int(given)
    runs = cudacompat.cuda_of_branch(branch)
    floor = cudacompat.minor_compat_branch(cuda)
    # container: the runtime checks NVIDIA_REQUIRE_CUDA against the driver's CUDA version;
    # native: minor version compatibility runs any 13.x build on the major's floor branch
    if (cfg.requested_way.checks_require_cuda and (runs is None or runs < mm)) \
            or branch < floor:
        raise PreflightError(
            host_data("driver_branch"), f"{branch} runs CUDA "
            f"{cudacompat.spell(runs) if runs else 'older than ' + cudacompat.spell(mm)}, "
            f"but cuda_version is {cuda} (the image asks cuda>="
            f"{cudacompat.spell(mm)})", f"set driver_branch = {shipped or floor} or remove it",
            then=": ")
    return branch


def older_branch_advice(cfg: HostConfig, branch: int, cuda: str | None = None) -> str:
    """What Debian 12's dkms stop offers when `branch` cannot be installed: an older branch
    the kit knows that still runs cuda_version here (driver_branch_to_install's own rule, so
    the advice is never a branch it would refuse: for CUDA 13 none below 580), else CUDA
    13.0 on branch 580 where the CUDA 13 major allows it, else no older branch."""
    cuda = cuda_judged(cfg, cuda)

    def runs(b: int, c: str) -> bool:
        try:
            return driver_branch_to_install(cfg, c, b) == b
        except PreflightError:
            return False

    known = sorted(set(cudacompat.TOOLKIT_DRIVER_BRANCH.values()), reverse=True)
    older = [b for b in known if b < branch and runs(b, cuda)]
    if older:
        return (f"set driver_branch = {older[0]} (an older branch that still runs CUDA "
                f"{cuda} in {cfg.data.mode} mode)")
    floor = cudacompat.minor_compat_branch(cuda)
    release = cudacompat.newest_release(cudacompat.cuda_of_branch(floor) or (0, 0))
    if release and floor < branch and runs(floor, release):
        return (f"no older branch runs CUDA {cuda} in {cfg.data.mode} mode: set "
                f"cuda_version = '{release}' and driver_branch = {floor} (its branch)")
    return f"no older branch the kit knows runs CUDA {cuda} in {cfg.data.mode} mode"


def driver_too_old(cfg: HostConfig, wsl: WslInfo, gpu: NvidiaSmiInfo,
                   cuda: str | None = None) -> str | None:
    """Why the installed driver cannot run the chosen CUDA; None if it can. Container mode:
    the image's NVIDIA_REQUIRE_CUDA, as far as forward compatibility serves the card
    (docs/hosts-as-you-find-them.md, "The image's own rule"). Native mode: minor version
    compatibility runs a 13.x build on any driver >= 580 (SASS for the GPU's own arch).
    WSL2, where nvidia-smi prints the CUDA version: windows_driver_too_old (without one, the
    Windows driver's number is judged as a Linux branch: R580 is both)."""
    cuda = cuda_judged(cfg, cuda)
    if wsl.is_wsl2 and gpu.cuda_version:
        return windows_driver_too_old(cfg, gpu, cuda)
    floor = cudacompat.minor_compat_branch(cuda)
    reported = reported_cuda(gpu)
    new_enough = gpu.driver_branch is None or gpu.driver_branch >= floor
    if cfg.requested_way.checks_require_cuda:
        # forward compatibility: data-center cards only (cudacompat.FORWARD_COMPAT_BRANDS)
        brand = cudacompat.forward_compat_brand(gpu.brand)
        cuda_clause, *brand_clauses = cudacompat.require_cuda(cuda).split()
        # the brand clauses stand alone (forward compatibility); the cuda clause holds only
        # with a driver of the CUDA major's branches (a reported CUDA a branch below the
        # floor could not report is facts out of step, not a driver that runs the image)
        if cudacompat.require_accepts(" ".join(brand_clauses), None, gpu.driver_version,
                                      brand) or (new_enough and cudacompat.require_accepts(
                                          cuda_clause, reported, None, None)):
            return None
    elif new_enough:
        return None
    if gpu.driver_branch is not None and gpu.driver_branch < floor:
        return (f"driver {gpu.driver_version} is older than {floor}, which CUDA "
                f"{cuda} needs")
    brand = f", brand {gpu.brand}" if gpu.brand else ""
    if reported is None:
        return _reports_no_cuda(gpu, cuda, brand)
    return (f"driver {gpu.driver_version} reports CUDA {reported}{brand}, older than the "
            f"image's CUDA {cuda} {_require(cuda)}")


def _require(cuda: str) -> str:
    return f"(NVIDIA_REQUIRE_CUDA cuda>={cudacompat.spell(cudacompat.major_minor(cuda))})"


def _reports_no_cuda(gpu: NvidiaSmiInfo, cuda: str, brand: str = "") -> str:
    branchless = f", and the kit knows no CUDA of branch {gpu.driver_branch}" \
        if gpu.driver_branch else ""
    return (f"{_the_driver(gpu)} reports no CUDA version (no \"CUDA Version\" in "
            f"nvidia-smi{branchless}){brand}, so the kit cannot tell that it runs the image's "
            f"CUDA {cuda} {_require(cuda)}")


def needed_cuda(cfg: HostConfig, cuda: str) -> tuple[str, str]:
    """The CUDA version a driver must report to run a build for `cuda`, and the rule that
    asks it (a refusal's words): the image's NVIDIA_REQUIRE_CUDA (cuda>=M.m) in container
    mode; natively, minor version compatibility: any of its major's (M.0)."""
    major, minor = cudacompat.major_minor(cuda)
    if cfg.requested_way.checks_require_cuda:
        return cudacompat.spell((major, minor)), _require(cuda)
    return cudacompat.spell((major, 0)), "(minor version compatibility)"


def windows_driver(cfg: HostConfig, cuda: str) -> str:
    """The Windows driver a WSL2 host needs for `cuda`, named by the CUDA version its
    nvidia-smi reports: NVIDIA gives no Windows minimum for CUDA 13.x and Windows numbers
    are not Linux branches (docs/quickstart-wsl2.md)."""
    return (f"the NVIDIA driver on Windows to one whose nvidia-smi reports CUDA "
            f"{needed_cuda(cfg, cuda)[0]} or newer (for CUDA {cuda}: go by that CUDA version, "
            "not the driver's number), then `wsl --shutdown`")


def windows_driver_too_old(cfg: HostConfig, gpu: NvidiaSmiInfo, cuda: str) -> str | None:
    """driver_too_old under WSL2, where nvidia-smi shows the Windows driver and the CUDA
    version it reports: judged by that version alone (no forward compatibility there)."""
    reported = str(gpu.cuda_version)
    needs, rule = needed_cuda(cfg, cuda)
    if cudacompat.major_minor(reported) >= cudacompat.major_minor(needs):
        return None
    return (f"{_the_driver(gpu, True)} reports CUDA {reported}, older than CUDA {needs}, "
            f"which CUDA {cuda} needs {rule}")


def reported_cuda(gpu: NvidiaSmiInfo) -> str | None:
    """The CUDA the driver runs: nvidia-smi's "CUDA Version", else the newest its branch
    reports (cudacompat.cuda_of_branch); None when neither tells."""
    if gpu.cuda_version:
        return gpu.cuda_version
    known = cudacompat.cuda_of_branch(gpu.driver_branch) if gpu.driver_branch else None
    return cudacompat.spell(known) if known else None


def _the_driver(gpu: NvidiaSmiInfo, windows: bool = False) -> str:
    """The driver as a refusal names it (`windows`: WSL2's, the Windows driver)."""
    if gpu.driver_version:
        return f"the Windows driver {gpu.driver_version}" if windows else \
            f"driver {gpu.driver_version}"
    return f"the {'Windows ' if windows else ''}driver (nvidia-smi prints no driver version)"


def _the_driver_and(gpu: NvidiaSmiInfo, why: str, windows: bool = False) -> tuple[str, str]:
    """A refusal's subject and problem from driver_too_old's line, which names the driver
    first."""
    the = _the_driver(gpu, windows)
    return the, why.removeprefix(f"{the} ")


# where an nvidia/cuda release the kit has no image of is found (build.py's base images)
CUDA_TAGS = "https://hub.docker.com/r/nvidia/cuda/tags"


def _a_release(cfg: HostConfig, reported: str | None, release: str | None) -> str:
    """`set cuda_version` ... of a refusal: a release of the CUDA the driver reports, named
    where the kit knows one (`release`: cudacompat.NEWEST_RELEASE's, which
    cuda_follows_driver builds); else, in container mode, where nvidia/cuda lists one, and
    natively any of that CUDA (the kit installs its toolkit by major.minor); nothing for a
    driver that reports no CUDA (no release to name)."""
    if not reported:
        return ""
    if release:
        return f" = '{release}'"
    if cfg.requested_way.builds_image:
        return (f" to a {reported} release (the kit names none: pick one that nvidia/cuda tags "
                f"as <release>-devel-{cudacompat.image_ubuntu(reported)}, {CUDA_TAGS})")
    return f" to a {reported} release"


def _update(cfg: HostConfig, wsl: WslInfo, cuda: str) -> str:
    """The way to a driver that runs `cuda`, named by its release: under WSL2 the Windows
    driver by the CUDA version it reports, else the branch the kit installs."""
    if wsl.is_wsl2:
        return f"update {windows_driver(cfg, cuda)}"
    return (f"update the NVIDIA driver on the host to branch "
            f"{driver_branch_to_install(cfg, cuda)} or newer")


def old_driver(cfg: HostConfig, wsl: WslInfo, gpu: NvidiaSmiInfo, why: str,
               cuda: str | None = None, fixed: str | None = None) -> DriverPlan:
    """A driver older than cuda_version needs: the image follows it (`cuda_follows_driver`),
    the kit replaces it (`upgrade_driver`), or, by default, the deploy stops offering both:
    a purge and a reboot, or another CUDA than asked for, is the user's call. `fixed`: a
    FIXED key, a driver the kit cannot replace (upgrade_driver neither offered nor done)."""
    reported = reported_cuda(gpu)
    release = cudacompat.newest_release(cudacompat.major_minor(reported)) if reported else None
    a_release = _a_release(cfg, reported, release)
    judged = cuda_judged(cfg, cuda)
    if cfg.data.cuda_follows_driver:
        if not cfg.requested_way.follows_driver:
            other = _update(cfg, wsl, judged) if wsl.is_wsl2 else "upgrade_driver = True"
            raise PreflightError(host_data("cuda_follows_driver"), f"{why}; it applies to "
                                 "container mode only", f"set cuda_version{a_release}, or "
                                 f"{other}", then=": ")
        if release is None:
            knows_none = f"the kit knows no nvidia/cuda release for CUDA {reported}" \
                if reported else "the driver reports no CUDA version to follow"
            raise PreflightError(host_data("cuda_follows_driver"), f"{why}, and {knows_none}",
                                 f"set cuda_version{a_release}, or {_update(cfg, wsl, judged)}",
                                 then=": ")
        return DriverPlan(cuda_version=release)
    if wsl.is_wsl2:
        follows = " (or cuda_follows_driver = True)" \
            if release and cfg.requested_way.follows_driver else ""
        raise PreflightError(*_the_driver_and(gpu, why, True),
                             f"{_update(cfg, wsl, judged)}, or set cuda_version{a_release}"
                             f"{follows}", lead=" ", then=": ")
    branch = driver_branch_to_install(cfg, cuda)
    follow = f"cuda_follows_driver = True (the image is built for CUDA {release}, which this " \
        "driver runs), " if release and cfg.requested_way.follows_driver else ""
    if fixed:
        raise PreflightError(*_the_driver_and(gpu, why), FIXED[fixed].format(branch=branch)
                             + f", {follow}or set cuda_version{a_release}", lead=" ", then=": ")
    if cfg.data.upgrade_driver:
        return DriverPlan(action="upgrade")
    raise PreflightError(
        *_the_driver_and(gpu, why), "set upgrade_driver = True (the kit purges the installed "
        f"NVIDIA driver packages and installs branch {branch}, pinned to it; a reboot follows), "
        f"{follow}or {_update(cfg, wsl, judged)}, or set cuda_version{a_release}", lead=" ",
        then=": ")


def check_flavour(cfg: HostConfig, gpu: NvidiaSmiInfo | None) -> None:
    """The open kernel modules (the default) need Turing or newer: refused on any older card
    nvidia-smi names (the driver drives them all, and the unit gives the server every GPU)."""
    if gpu is not None:
        _refuse_open(cfg, [name for name, cap in _cards(gpu) if _cap(cap) < TURING])


def _refuse_open(cfg: HostConfig, older: list[str]) -> None:
    if older and cfg.data.driver_flavour == "open":
        raise PreflightError(
            host_data("driver_flavour"), "'open' (the default) needs a Turing or newer GPU, and "
            f"{older[0]}", "set driver_flavour = 'proprietary'", then=": ")


# The first Turing PCI device id (TU102, 0x1e02): every earlier NVIDIA GPU (Pascal up to
# 0x1d8x, Volta 0x1db0-0x1dbf) has a lower one, every Turing and newer one a higher one
# (NVIDIA's open-gpu-kernel-modules list of supported GPUs starts at 0x1e02).
FIRST_TURING_PCI_ID = 0x1E00


def check_flavour_by_pci(cfg: HostConfig, devices: tuple[int, ...]) -> None:
    """check_flavour with no driver yet, by PCI device id (installing the open modules on an
    older card would end, after the reboot, in a driver that does not load)."""
    old = [d for d in devices if d < FIRST_TURING_PCI_ID]
    if not old:
        return
    ids = ", ".join(f"10de:{d:04x}" for d in old)
    what = f"this host's NVIDIA GPU (PCI id {ids}) is older than Turing (ids below 10de:1e00)"
    check_generation(cfg, [(what, "7.0")])  # the generation rule, by PCI id
    _refuse_open(cfg, [what])


# DKMS's own key and certificate (dkms framework.conf defaults mok_signing_key and
# mok_certificate): made by hand with the Debian wiki's command, since Debian 12's dkms
# 3.0.10 has no `dkms generate_mok` (3.1 and newer make the same two files with it)
DEBIAN_NEW_MOK = ("`sudo mkdir -p /var/lib/dkms && sudo openssl req -new -x509 -nodes -days 36500 "
                  "-subj '/CN=DKMS module signing key/' -newkey rsa:2048 -keyout "
                  "/var/lib/dkms/mok.key -outform DER -out /var/lib/dkms/mok.pub && sudo "
                  "mokutil --import /var/lib/dkms/mok.pub`")
UBUNTU_NEW_MOK = ("`sudo update-secureboot-policy --new-key && sudo update-secureboot-policy "
                  "--enroll-key`")


def new_mok(os_id: str) -> str:
    """How to create and enrol DKMS's module signing key on this distro, before the build."""
    how = UBUNTU_NEW_MOK if os_id == "ubuntu" else DEBIAN_NEW_MOK
    return (f"create and enrol DKMS's module signing key first ({how}), reboot and choose "
            "Enroll MOK in the MOK manager, then deploy again; or disable Secure Boot in the "
            "firmware")


def enrol_mok(os_id: str) -> str:
    """How to have a DKMS module that is there signed and loaded under Secure Boot."""
    key = "/var/lib/shim-signed/mok/MOK.der" if os_id == "ubuntu" else "/var/lib/dkms/mok.pub"
    return ("DKMS-built modules load only when signed with an enrolled Machine Owner Key: "
            f"`sudo mokutil --import {key}` (no such file: {new_mok(os_id)}), reboot and "
            "choose Enroll MOK in the MOK manager, then `sudo dkms autoinstall` and reboot; or "
            "disable Secure Boot in the firmware")


def check_driver_install(packages: list[str], module: NvidiaModuleInfo | None,
                         sb: SecureBootInfo | None, allow_reboot: bool = False,
                         os_id: str = "ubuntu") -> None:
    """Native Linux with an NVIDIA GPU and no working driver, before the kit installs one
    (docs/hosts-as-you-find-them.md): a driver that does not load is refused with its likely
    cause (installing again would loop) unless a reboot loads it and host data allows one."""
    sb = sb or SecureBootInfo(state="unknown")
    loadable = not sb.enabled or sb.enrolled_key is not None  # after a reboot
    if not module or not module.path or (module.since_boot and loadable and allow_reboot):
        check_secure_boot(sb, os_id)
        return
    # installed but not loaded: refused by its likely cause
    what = ", ".join([str(module.path)] + packages[:3] + (["..."] if len(packages) > 3 else []))
    driver = "the NVIDIA driver"
    head = f"is installed ({what}) but not loaded (nvidia-smi sees no GPU)"
    if sb.pending_key:
        raise PreflightError(driver, f"{head}: the key {sb.pending_key} waits for enrolment",
                             "reboot and choose Enroll MOK in the MOK manager, then deploy "
                             "again", lead=" ", then=": ")
    if module.since_boot and loadable:
        signed = f" (DKMS signs it with the enrolled key {sb.enrolled_key})" \
            if sb.enabled else ""
        raise PreflightError(driver, f"{head}: it was installed after the last boot{signed}",
                             "reboot the host (or set allow_reboot = True), then deploy again",
                             lead=" ", then="; ")
    if sb.enabled:
        raise PreflightError(driver, f"{head}, and Secure Boot is on, the likely cause (the "
                             "kernel rejects an unsigned DKMS module)", enrol_mok(os_id),
                             lead=" ", then=": ")
    loaded = " (the module is loaded: a driver/library mismatch after an upgrade, "\
        "a reboot fixes it)" if module.loaded else ""
    raise PreflightError(
        driver, f"{head}{loaded}; Secure Boot is {sb.state}", "see `sudo modprobe nvidia` and "
        "`sudo dmesg | grep -i nvidia`, or purge the driver packages to let the kit install its "
        "own; the kit does not install a second driver over it", lead=" ", then=": ")


def check_secure_boot(sb: SecureBootInfo | None, os_id: str) -> None:
    """Before the kit builds an NVIDIA module: with Secure Boot on, a DKMS signing key must
    be enrolled, or the module is rejected at boot."""
    sb = sb or SecureBootInfo(state="unknown")
    if sb.enabled and not sb.enrolled_key:
        pending = f"; {sb.pending_key} waits for enrolment: reboot and choose Enroll MOK" \
            if sb.pending_key else ""
        raise PreflightError(
            "Secure Boot", f"is on ({sb.line or sb.state}) and no DKMS signing key is enrolled, "
            f"so the NVIDIA module the kit would build would be rejected at boot{pending}",
            new_mok(os_id), lead=" ", then=": ")
    if sb.state == "unknown":
        warn("Secure Boot state unknown (no mokutil, no readable efivar): if it is on, the "
             "NVIDIA module will not load until its DKMS key is enrolled (apt install mokutil "
             "to let preflight check)")
