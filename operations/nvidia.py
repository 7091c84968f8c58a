"""
NVIDIA operations: release the driver holds an earlier kit set, register the nvidia runtime
with Docker, check the GPU from inside a container.
"""

from __future__ import annotations

import posixpath

from pyinfra import host
from pyinfra.api import StringCommand, operation
from pyinfra.facts.files import File, FileContents

from beekeeper.core.container import gpu_in_container_command
from beekeeper.core.distro import APT_GET, apt_free, apt_wait
from beekeeper.core.paths import HOLDS_RECORD, AptRepo
from beekeeper.facts.docker import DockerEngine, GpuInContainer
from beekeeper.facts.gpu import DRIVER_PACKAGE_PREFIXES, LinuxDriverPackages
from beekeeper.facts.lifecycle import purge_simulated

from .shell import StreamedCommand, q, via_tmp


@operation()
def repo_key(repo: AptRepo, src: str):
    """
    The repository's signing key from `src` in its keyring (dearmored where it is ASCII),
    fetched again where the key's URL changed (host data nvidia_repos given later, the key
    the kit names for a distro upgraded in place): pyinfra's apt.key keeps a keyring that
    exists whatever key it holds, and apt then refuses the repository (NO_PUBKEY).

    + repo: the repository's files (its keyring, and beside it the URL the key came from)
    + src: the key's URL
    """
    had = host.get_fact(FileContents, path=repo.key_source)
    if had is not None and [line.strip() for line in had] == [src] \
            and host.get_fact(File, path=repo.keyring):
        host.noop(f"{repo.keyring}: the key from {src}")
        return
    tmp = f"{repo.keyring}.tmp"
    yield (f"install -d -m 0755 {q(posixpath.dirname(repo.keyring))} && "
           f"wget -qO {q(tmp)} {q(src)} && "
           f"if grep -q 'BEGIN PGP PUBLIC KEY BLOCK' {q(tmp)}; then "
           f"gpg --batch --yes --dearmor -o {q(repo.keyring)}.new {q(tmp)}; "
           f"else cp {q(tmp)} {q(repo.keyring)}.new; fi && rm -f {q(tmp)} && "
           f"chmod 644 {q(repo.keyring)}.new && mv -f {q(repo.keyring)}.new {q(repo.keyring)} && "
           f"printf '%s\\n' {q(src)} > {q(repo.key_source)}")


def kit_driver_holds(record: list[str]) -> list[str]:
    """The driver packages in the kit's record of its holds (HOLDS_RECORD, one name a line:
    `libnvidia-compute-580:amd64`), set by an earlier beekeeper; the user's are not in it."""
    names = [line.strip() for line in record if line.strip()]
    return sorted({n for n in names if n.split(":", 1)[0].startswith(DRIVER_PACKAGE_PREFIXES)})


def release_command(names: list[str]) -> str:
    """apt-mark unhold `names`, then drop them from the record the uninstall releases by."""
    words = " ".join(q(n) for n in names)
    keep = " ".join(f"-e {q(n)}" for n in names)
    tmp, put = via_tmp(HOLDS_RECORD, ".new")
    return (apt_free(f"apt-mark unhold {words}") + " && "
            f"{{ grep -vxF {keep} {q(HOLDS_RECORD)} > {tmp} || true; }} && {put}")


@operation()
def kit_driver_holds_released():
    """
    Release the holds an earlier beekeeper set on the driver's packages: the branch's
    pinning package (nvidia-driver-pinning-<branch>) keeps the driver on its branch, and a
    hold would also keep out the branch's own updates, security fixes among them.
    """
    names = kit_driver_holds(host.get_fact(FileContents, path=HOLDS_RECORD) or [])
    if not names:
        host.noop("no hold of the kit's on the driver packages")
        return
    yield StringCommand(release_command(names))


@operation()
def nvidia_runtime_registered():
    """
    Register the nvidia runtime with Docker (`nvidia-ctk runtime configure`, which merges its
    keys into daemon.json), only when `docker info` does not list it.
    """
    if host.get_fact(DockerEngine).nvidia_runtime:
        host.noop("Docker already knows the nvidia runtime")
        return
    yield "nvidia-ctk runtime configure --runtime=docker"


NO_GPU_FIX = ("beekeeper: no GPU inside a container: check the NVIDIA Container Toolkit and "
              "`docker info | grep -i runtime`")
NO_GPU_FIX_DESKTOP = ("beekeeper: no GPU inside a Docker Desktop container: Desktop runs "
                      "`--gpus all` on the Windows NVIDIA driver through WSL2; update that "
                      "driver and Docker Desktop, check that nvidia-smi works in this distro, "
                      "then restart Docker Desktop")


@operation()
def gpu_checked_in_container(image: str, after_change: bool, desktop: bool = False):
    """
    Prove the GPU is visible inside a container before the server starts.

    + image: the server image (its runtime base carries the CUDA runtime)
    + after_change: whether this run changed the image or the toolkit
    + desktop: the engine is Docker Desktop's (its own GPU support, no Container Toolkit)
    """
    if not after_change and host.get_fact(GpuInContainer, image=image):
        host.noop("the GPU is visible inside a container of the server image")
        return
    fix = NO_GPU_FIX_DESKTOP if desktop else NO_GPU_FIX
    yield StringCommand(gpu_in_container_command(image) +
                        f" || {{ echo {q(fix)} >&2; exit 1; }}")


# The packages of an NVIDIA driver, whoever installed them, by name (dpkg's
# ${binary:Package}: i386 copies too); which stay: docs/hosts-as-you-find-them.md,
# upgrade_driver. Every library of the driver is a libnvidia-* but KEEP_PATTERN's.
PURGE_NAMES = (
    "cuda-drivers(-[0-9]+)?",
    "nvidia-driver-pinning-.+",
    "nvidia-open(-[0-9]+)?",
    "nvidia-driver(-[0-9]+)?(-server)?(-open)?",
    "nvidia-dkms(-[0-9]+)?(-server)?(-open)?",
    "nvidia-(open-)?kernel(-open)?-(common|source|dkms|support)(-[0-9]+)?(-server)?(-open)?",
    "nvidia-(compute-)?utils(-[0-9]+)?(-server)?",
    "nvidia-headless(-no-dkms)?(-[0-9]+)?(-server)?(-open)?",
    "nvidia-firmware(-[0-9]+)?(-server)?(-[0-9.]+)?",
    "xserver-xorg-video-nvidia(-.+)?",
    "linux-(modules|objects|signatures)-nvidia-.+",
    "libnvidia-.+",
    # Debian's names
    "nvidia-driver-(bin|libs|full|cuda)",
    "nvidia-(smi|alternative|persistenced|modprobe|vdpau-driver|cuda-mps|suspend-common)",
    "nvidia-(egl|vulkan|opencl)-(icd|common)",
    "nvidia-(tesla|legacy)-.+",
    "lib(cuda1|cudadebugger1|nvcuvid1|nvoptix1)",
    "lib(egl|gl1|gles|glx|gldispatch0)-nvidia.*",
    "firmware-nvidia-gsp(-.+)?",
    "firmware-nvidia-tesla-.+",
)
# whole names, each with an optional architecture (`libnvidia-compute-570:i386`)
PURGE_PATTERN = "^(" + "|".join(PURGE_NAMES) + ")(:[a-z0-9]+)?$"
KEEP_PATTERN = "^libnvidia-(container|egl-(wayland|gbm|xcb|xlib)|nscq)"


def purge_pick(branch: int | None = None) -> str:
    """The shell pipeline that prints the installed driver packages, one a line; `branch`:
    the branch the kit installs next, whose lock (nvidia-driver-pinning-<branch>) stays."""
    keep = KEEP_PATTERN + (f"|^nvidia-driver-pinning-{int(branch)}(:|$)" if branch else "")
    return ("dpkg-query -W -f '${binary:Package} ${Status}\\n' | awk '$NF == \"installed\" "
            f"{{print $1}}' | grep -E {q(PURGE_PATTERN)} | "
            f"grep -vE {q(keep)}")


# the other packages purging $pkgs would take along
PURGE_EXTRA = purge_simulated(
    "$pkgs", "-v want=\" $(echo $pkgs | sed 's/:[a-z0-9]*//g') \" ",
    "n = $2; sub(/:.*/, \"\", n); if (index(want, \" \" n \" \") == 0) print $2")


def purge_command(branch: int | None = None) -> str:
    """Unhold, then purge, every driver package the host has (names read on the host); none
    where apt would take along anything else (Ubuntu's nvidia-cuda-dev needs
    libnvidia-compute): the deploy stops naming those packages."""
    stop = ("beekeeper: purging the installed NVIDIA driver would also remove packages "
            "that depend on it; nothing was purged: remove them yourself (reinstall them "
            "after the new driver), or update the driver by hand; apt would remove:")
    return (apt_free(f"pkgs=$({purge_pick(branch)})") + "; "
            f"[ -z \"$pkgs\" ] || {{ extra=$({PURGE_EXTRA}); "
            f"if [ -n \"$extra\" ]; then echo {q(stop)} $extra >&2; exit 1; fi; "
            "apt-mark unhold $pkgs >/dev/null && "
            f"{APT_GET} purge -y $pkgs; }}")


@operation()
def driver_purged(branch: int | None = None):
    """
    Purge the installed NVIDIA driver (host data upgrade_driver) before the kit installs its
    pinned branch: two drivers' packages side by side conflict or split module and libraries.
    """
    if not host.get_fact(LinuxDriverPackages):
        host.noop("no NVIDIA driver packages are installed")
        return
    yield StringCommand(purge_command(branch))


@operation()
def driver_installed(package: str, after_purge: bool = False):
    """
    Install the driver's meta-package from NVIDIA's repository, within the branch its
    pinning package locks.

    + package: nvidia-open or cuda-drivers
    + after_purge: this run purged the driver first, so the packages read at the start of the
      run (which may name this very package, at the old branch) say nothing
    """
    if not after_purge and package in host.get_fact(LinuxDriverPackages):
        host.noop(f"{package} is installed")
        return
    yield StreamedCommand(apt_wait())
    yield StringCommand(f"{APT_GET} install -y --no-install-recommends {q(package)}")


@operation()
def driver_installable(packages: list[str], branch: int, older: str, replacing: bool = False):
    """
    Debian 12: ask apt, installing nothing, whether NVIDIA's driver packages install with
    Debian 12's dkms; stop with the fix where they cannot (docs/hosts-as-you-find-them.md).

    + packages: the pinning and driver meta-packages
    + older: the way with an older branch, as preflight's rule allows it for cuda_version
      (tasks/driver_preflight.older_branch_advice: never a branch below 580 for CUDA 13)
    + replacing: the driver installed now is purged first (upgrade_driver)
    """
    if not replacing and all(p in host.get_fact(LinuxDriverPackages) for p in packages):
        host.noop("the driver packages are installed")
        return
    fix = (f"beekeeper: NVIDIA's branch {branch} driver packages cannot be installed on "
           "Debian 12 (apt says why above; the dkms Debian 12 ships is 3.0.10 and "
           f"bookworm-backports has no newer one): {older}; or use Debian 13, or install the "
           "driver yourself; the driver and the boot were not touched (NVIDIA's repository "
           "and Debian's contrib area were added, and Docker's engine where the host had none)")
    yield StringCommand(installable_command(packages[0], packages[1:], fix,
                                            replacing=branch if replacing else None))


def installable_command(pinning: str, packages: list[str], fix: str,
                        replacing: int | None = None) -> str:
    """apt's simulation of installing `pinning` and `packages` with the pins the pinning
    package ships (unpacked, not installed), so apt picks the branch's versions; `fix` on
    failure. `replacing`: the branch an upgrade installs; apt is given dpkg's status without
    the packages the purge removes (purge_pick). Not marked for removal instead: NVIDIA's
    Debian packages reuse Debian's names (libcuda1), so the install needs some back. Where
    the purge would take others along, the purge step stops first (purge_command)."""
    names = " ".join(q(p) for p in [pinning, *packages])
    simulate = ("out=$(apt-get install -s --no-install-recommends STATE"
                f"-o Dir::Etc::Preferences=\"$tmp/preferences\" {names} 2>&1) || "
                f"{{ echo \"$out\" | tail -n 8 >&2; echo {q(fix)} >&2; exit 1; }}")
    head = (apt_free("apt-get update -qq") + " && tmp=$(mktemp -d) && "
            "trap 'rm -rf \"$tmp\"' EXIT && "
            f"(cd \"$tmp\" && apt-get download -qq {q(pinning)} 2>/dev/null) && "
            "dpkg-deb -x \"$tmp\"/*.deb \"$tmp/root\" && "
            "{ cat /etc/apt/preferences \"$tmp\"/root/etc/apt/preferences.d/* "
            "> \"$tmp/preferences\" 2>/dev/null; true; } && ")
    if replacing is None:
        return head + simulate.replace("STATE", "")
    keep_others = ("BEGIN { RS = \"\"; ORS = \"\\n\\n\" } { name = $0; "
                   "sub(/^Package: /, \"\", name); sub(/\\n.*/, \"\", name); "
                   "if (index(drop, \" \" name \" \") == 0) print }")
    wait = ("beekeeper: Debian 12's dkms check is left to after the purge's own check, which "
            "stops first: purging the installed driver would take other packages along")
    return (head + f"pkgs=$({purge_pick(replacing)} | tr '\\n' ' ') && "
            f"extra=$({PURGE_EXTRA}) && if [ -n \"$extra\" ]; then echo {q(wait)} >&2; "
            "else drop=\" $(echo $pkgs | sed 's/:[a-z0-9]*//g') \" && "
            f"awk -v drop=\"$drop\" {q(keep_others)} /var/lib/dpkg/status "
            "> \"$tmp/status\" && "
            + simulate.replace("STATE", '-o Dir::State::status="$tmp/status" ')
            + f"; fi || {{ echo {q(fix)} >&2; exit 1; }}")
