"""
NVIDIA's apt repositories: each with its own keyring (signed-by), deb822 sources files.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

from pyinfra import host
from pyinfra.api.operation import OperationMeta
from pyinfra.operations import apt, files

from beekeeper.core.config import HostConfig
from beekeeper.core.cpu import baseline_or_refuse
from beekeeper.core.errors import PreflightError
from beekeeper.core.hostdata import NvidiaRepos
from beekeeper.core.paths import CUDA_APT, TOOLKIT_APT, AptRepo
from beekeeper.facts.host import AptSourcesFor
from beekeeper.facts.hostfacts import HostFacts
from beekeeper.operations.apt import packages as apt_packages
from beekeeper.operations.lifecycle import left_in_place
from beekeeper.operations.nvidia import repo_key

CUDA_REPO = "https://developer.download.nvidia.com/compute/cuda/repos/{distro}/{arch}/"
CUDA_KEY = CUDA_REPO + "{key}"
# NVIDIA's names for the host's architecture (`uname -m`) in the CUDA repository's path and
# the Container Toolkit's: server-class Arm (Grace, GH200) is the CUDA repository's `sbsa`,
# published for Ubuntu only (its `arm64` folders are Jetson's)
ARCH_DIRS = {"x86_64": ("x86_64", "amd64"), "aarch64": ("sbsa", "arm64")}
SBSA_DISTROS = ("ubuntu2204", "ubuntu2404")
# The key each repository is signed with: 3bf863cc (cudatools@nvidia.com) for the older
# ones; debian13 is signed by 8793F200 ("Kitmaker (Debian 13 Trixie)", fingerprint
# 02182E60104FCDC26EAE1B8597A5D4CB8793F200), published beside it as 8793F200.pub.
CUDA_KEYS = {"debian13": "8793F200.pub"}
TOOLKIT_REPO = "https://nvidia.github.io/libnvidia-container/stable/deb/{arch}"
TOOLKIT_KEY = "https://nvidia.github.io/libnvidia-container/gpgkey"

# Older guides leave these; with the keyring source they make apt fail with
# "Conflicting values set for option Signed-By".
LEGACY_LISTS = ("libnvidia-container.list", "nvidia-docker.list",
                "nvidia-container-runtime.list", "nvidia-container-toolkit.list")


@dataclass(frozen=True)
class Repos:
    cuda: str
    cuda_key: str
    toolkit: str
    toolkit_key: str


def cuda_distro(facts: HostFacts) -> str:
    """NVIDIA's name for the host's distro: ubuntu2404, ubuntu2204, debian12, debian13,
    wsl-ubuntu."""
    os_id, version = facts.os.id or None, facts.os.version_id
    if facts.wsl.is_wsl2 and os_id == "ubuntu":
        return "wsl-ubuntu"
    if os_id == "ubuntu" and version in ("22.04", "24.04"):
        return "ubuntu" + version.replace(".", "")
    if os_id == "debian" and version in ("12", "13"):
        return "debian" + version
    raise PreflightError("no NVIDIA CUDA repository", f"for {os_id} {version}", "use Ubuntu "
                         "22.04/24.04 or Debian 12/13 (WSL2: Ubuntu)", lead=" ", then=": ")


def repos(cfg: HostConfig, facts: HostFacts) -> Repos:
    """NVIDIA's URLs for the host's distro and architecture, or mirrors from host data
    `nvidia_repos` (air-gapped hosts, tests)."""
    given = cfg.data.nvidia_repos or NvidiaRepos()
    distro = cuda_distro(facts)
    machine = baseline_or_refuse(facts.machine).machine  # preflight refused any other
    cuda_arch, deb_arch = ARCH_DIRS[machine]
    if machine == "aarch64" and distro not in SBSA_DISTROS and not given.cuda:
        raise PreflightError("no NVIDIA CUDA repository", f"for {distro} on aarch64 (NVIDIA "
                             "publishes its sbsa repository for Ubuntu only)", "use Ubuntu "
                             "22.04/24.04, or give a mirror in host data nvidia_repos",
                             lead=" ", then=": ")
    return Repos(
        cuda=(given.cuda or CUDA_REPO).format(distro=distro, arch=cuda_arch),
        cuda_key=(given.cuda_key or CUDA_KEY).format(
            distro=distro, arch=cuda_arch, key=CUDA_KEYS.get(distro, "3bf863cc.pub")),
        toolkit=given.toolkit or TOOLKIT_REPO.format(arch=deb_arch),
        toolkit_key=given.toolkit_key or TOOLKIT_KEY,
    )


def _prereqs() -> OperationMeta:
    return apt_packages(name="Install what adding a signed repository needs (gnupg, wget)",
                        packages=["gnupg", "wget", "ca-certificates"], no_recommends=True)


def cuda_repo(r: Repos) -> list[OperationMeta]:
    """NVIDIA's CUDA repository, once. A host set up NVIDIA's documented way (cuda-keyring)
    has a source for the same URL already, and a second one with another Signed-By makes apt
    refuse every source list ("Conflicting values set for option Signed-By"): that source is
    used as it is, and the kit's own removed."""
    found = next((s for s in host.get_fact(AptSourcesFor, url=r.cuda)
                  if s.path != CUDA_APT.sources), None)
    if found is not None:
        name = found.path.rsplit("/", 1)[-1]
        return [
            left_in_place(name=f"Use the CUDA repository already configured ({name})",
                          why=f"{found.path} already provides this repository (signed by "
                              f"{found.signed_by or 'apt'})"),
            files.file(name="Remove the kit's own CUDA source (the host has one)",
                       path=CUDA_APT.sources, present=False),
        ]
    return [_prereqs(), *_signed_repo(CUDA_APT, r.cuda, r.cuda_key,
                                      "Add NVIDIA's CUDA repository key (own keyring)",
                                      "Add NVIDIA's CUDA repository (signed-by its keyring)")]


def _signed_repo(repo: AptRepo, url: str, key_url: str, key_name: str,
                 name: str) -> list[OperationMeta]:
    return [repo_key(name=key_name, repo=repo, src=key_url),
            apt.sources_file(name=name, uris=url, suites="/", signed_by=repo.keyring,
                             filename=posixpath.basename(repo.sources).removesuffix(".sources"))]


def toolkit_repo(r: Repos) -> list[OperationMeta]:
    ops = [_prereqs()]
    ops += [files.file(name=f"Remove legacy list file {name}",
                       path=f"/etc/apt/sources.list.d/{name}", present=False)
            for name in LEGACY_LISTS]
    return ops + _signed_repo(TOOLKIT_APT, r.toolkit, r.toolkit_key,
                              "Add the NVIDIA Container Toolkit key (own keyring)",
                              "Add the NVIDIA Container Toolkit repository (signed-by)")
