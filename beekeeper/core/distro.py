"""
What each distro ships for the Docker engine and compose v2 (from its own archive), and
the NVIDIA CUDA repository that serves it. Pure functions of /etc/os-release facts.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

# apt-get as the kit runs it unattended (on hosts, in containers): no debconf question
# waits for an answer. A shell fragment (an assignment before the command): it starts a shell
# command line, never an argv or a word after sudo, exec or xargs
APT_GET = "DEBIAN_FRONTEND=noninteractive apt-get"

# the locks apt and dpkg take (fcntl locks: /proc/locks lists each by its file's inode)
APT_LOCKS = ("/var/lib/dpkg/lock-frontend", "/var/lib/dpkg/lock", "/var/lib/apt/lists/lock",
             "/var/cache/apt/archives/lock")
APT_WAIT_S = 900  # unattended-upgrades' first run on a fresh box can take minutes
APT_SAY_EVERY_S = 30


def apt_free(command: str) -> str:
    """`command` (an apt-get or apt-mark line) run once apt's and dpkg's locks are free
    (apt_wait); past the wait it runs anyway and apt names the holder."""
    return f"{apt_wait()}; {command}"


def apt_wait(locks: tuple[str, ...] = APT_LOCKS, limit_s: int = APT_WAIT_S,
             step_s: int = 3) -> str:
    """A shell command that returns once no other process holds one of apt's or dpkg's
    locks: apt-get fails at once on a held lock, and unattended-upgrades holds them for
    minutes after a fresh box boots (`apt-get update` has no wait of its own). It names the
    holder on stderr every APT_SAY_EVERY_S seconds and, after `limit_s`, fails (exit 75)
    naming it and the fix. It reads /proc/locks, takes no lock itself, and counts a lock as
    apt's only by its kind and its file's device and inode (apt and dpkg take POSIX fcntl
    locks; the kernel lists a file as MAJOR:MINOR:INODE, MAJOR and MINOR in hex, from the
    device number stat gives: a lock on another file is never waited for)."""
    files = " ".join(f"'{f}'" for f in locks)
    key = ("bk_d=$(stat -c %d \"$bk_f\" 2>/dev/null) && bk_i=$(stat -c %i \"$bk_f\") || "
           "continue; bk_k=$(printf '%02x:%02x:%s' $(( (bk_d >> 8) & 0xfff )) "
           "$(( (bk_d & 0xff) | ((bk_d >> 12) & 0xfff00) )) \"$bk_i\")")
    find = (f"bk_h=; for bk_f in {files}; do {key}; bk_h=$(awk -v k=\"$bk_k\" "
            "'$2 == \"POSIX\" && $6 == k { print $5; exit }' /proc/locks); "
            "[ -n \"$bk_h\" ] && break; done")
    who = "bk_c=$(cat /proc/$bk_h/comm 2>/dev/null || echo '?')"
    return (f"bk_w=0; while :; do {find}; [ -z \"$bk_h\" ] && break; {who}; "
            f"if [ $bk_w -ge {limit_s} ]; then echo \"process $bk_h ($bk_c) has held $bk_f for "
            f"{limit_s} s: let it finish (or stop it), then deploy again\" >&2; exit 75; fi; "
            f"[ $((bk_w % {APT_SAY_EVERY_S})) -eq 0 ] && echo \"waiting for process $bk_h "
            f"($bk_c) to release $bk_f (apt or unattended-upgrades at work)\" >&2; "
            f"sleep {step_s}; bk_w=$((bk_w + {step_s})); done")


def _version(os_release: Mapping[str, str]) -> tuple[int, ...]:
    try:
        return tuple(int(p) for p in os_release.get("version_id", "").split("."))
    except ValueError:
        return ()


def engine_packages(os_release: Mapping[str, str]) -> list[str]:
    """The distro packages that give a host a Docker engine and its `docker` CLI. Debian 13
    split the CLI out of docker.io (docker.io 26.1 only recommends docker-cli, and the kit
    installs without recommends); Debian 12 and Ubuntu ship both in docker.io."""
    if os_release.get("id") == "debian" and _version(os_release)[:1] >= (13,):
        return ["docker.io", "docker-cli"]
    return ["docker.io"]


def compose_package(os_release: Mapping[str, str], flavour: str | None) -> str | None:
    """The package that brings the compose v2 CLI plugin (`docker compose`) to this host, or
    None where none can be had from the host's sources:

    - Docker's own packages (docker-ce): docker-compose-plugin, from the same repository;
    - Debian 13 (trixie): docker-compose 2.26 (the v2 plugin; Debian 12's is 1.29, v1);
    - Ubuntu 22.04 and 24.04: docker-compose-v2 (universe; in jammy-updates for 22.04).
    Docker Desktop brings compose itself (and nothing can be installed into it).
    """
    if flavour == "docker-ce":
        return "docker-compose-plugin"
    if flavour not in (None, "distro"):
        return None
    os_id, version = os_release.get("id"), _version(os_release)
    if os_id == "debian" and version[:1] >= (13,):
        return "docker-compose"
    if os_id == "ubuntu" and version[:2] >= (22, 4):
        return "docker-compose-v2"
    return None


def no_compose_fix(os_release: Mapping[str, str], flavour: str | None) -> str:
    """Why compose v2 cannot be installed here, and what to do instead."""
    name = f"{os_release.get('id', '?')} {os_release.get('version_id', '?')}"
    if flavour == "docker-desktop":
        return ("Docker Desktop's compose is not reachable in this distro: turn on WSL "
                "integration for it (Settings > Resources > WSL integration) or update "
                "Docker Desktop, then deploy again; or set runtime = 'systemd'")
    if flavour in ("snap", "unknown"):
        return ("this Docker engine was not installed from a package the kit knows: install "
                "its compose v2 plugin by hand (`docker compose version` must answer), or set "
                "runtime = 'systemd'")
    return (f"{name} ships no compose v2 (Debian 12 has docker-compose 1.29, the v1 tool): "
            "set runtime = 'systemd' (the default), or install Docker's own packages "
            "(docker-ce and docker-compose-plugin from Docker's apt repository), or use "
            "Debian 13 / Ubuntu 22.04 or newer")


# Ubuntu LTS releases and the kernel series they shipped with (the GA kernel): a newer
# series on that release is the hardware enablement (HWE) kernel, whose headers come with
# linux-headers-generic-hwe-<release> (linux-headers-generic follows the GA series only)
_UBUNTU_GA_KERNEL = {"20.04": (5, 4), "22.04": (5, 15), "24.04": (6, 8)}


def headers_meta(os_release: Mapping[str, str], kernel_release: str) -> str | None:
    """The meta-package that brings the headers of every future kernel of the running
    kernel's flavour (so DKMS rebuilds the NVIDIA module): `linux-headers-amd64` for
    `6.1.0-18-amd64`, `linux-headers-generic-hwe-22.04` for 6.8 on Ubuntu 22.04."""
    m = re.match(r"^(\d+)\.(\d+)\.\d+(?:-\d+(?:\.\d+)*|\+[a-z0-9~.]+)-([a-z][a-z0-9-]*)$",
                 kernel_release)
    os_id = os_release.get("id")
    if not m or os_id not in ("debian", "ubuntu"):
        return None
    flavour = m.group(3)
    version = os_release.get("version_id", "")
    ga = _UBUNTU_GA_KERNEL.get(version)
    if (os_id == "ubuntu" and flavour == "generic" and ga
            and (int(m.group(1)), int(m.group(2))) > ga):
        return f"linux-headers-generic-hwe-{version}"
    return f"linux-headers-{flavour}"


# Debian's own kernel series in each release (bookworm: linux 6.1, trixie: linux 6.12) and
# its codename: a newer series on that release is a backports kernel, named `6.12.x+bpo-amd64`
# on bookworm-backports, `+deb12` from 2025 on (the kernel team's "Generate unique ABI names"
# change, kernel-team/linux merge request 1524)
DEBIAN_KERNEL: dict[str, tuple[tuple[int, int], str]] = {
    "12": ((6, 1), "bookworm"), "13": ((6, 12), "trixie")}
_SERIES = re.compile(r"^(\d+)\.(\d+)")


def series(version: str | None) -> tuple[int, int] | None:
    """The upstream major.minor a kernel release or a kernel package version starts with:
    '6.12.48+bpo-amd64' and '6.12.48-1~bpo12+1' -> (6, 12); None for anything else."""
    m = _SERIES.match(version or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def debian_kernel(kernel_release: str) -> bool:
    """A kernel release as Debian's kernel packages name it: its flavour is the architecture
    (`6.1.0-18-amd64`, `6.12.48+bpo-cloud-amd64`, `6.12.57+deb13-rt-arm64`)."""
    return re.match(r"^\d+\.\d+\.\d+\S*-(?:(?:cloud|rt)-)?(?:amd64|arm64)$",
                    kernel_release) is not None


def backports_suite(os_release: Mapping[str, str], kernel_release: str) -> str | None:
    """The backports suite a Debian kernel of a newer series than its release's own comes
    from (`bookworm-backports` for 6.12 on Debian 12), else None."""
    own = DEBIAN_KERNEL.get(os_release.get("version_id", ""))
    running = series(kernel_release)
    if (os_release.get("id") != "debian" or own is None or running is None
            or not debian_kernel(kernel_release) or running <= own[0]):
        return None
    return f"{own[1]}-backports"


def image_meta(headers: str) -> str:
    """The kernel image meta-package beside a headers one: linux-headers-amd64 ->
    linux-image-amd64, linux-headers-generic-hwe-22.04 -> linux-image-generic-hwe-22.04."""
    return headers.replace("linux-headers-", "linux-image-", 1)


def driver_package(flavour: str) -> str:
    """The meta-package of NVIDIA's CUDA repository (Ubuntu and Debian) for a full driver
    of the branch that nvidia-driver-pinning-<branch> locks: `nvidia-open` for the open
    kernel modules (NVIDIA's default from 560, required for Blackwell), `cuda-drivers` for
    the proprietary ones (needed before Turing)."""
    return "nvidia-open" if flavour == "open" else "cuda-drivers"
