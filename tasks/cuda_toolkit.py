"""
CUDA toolkit 13.2 from NVIDIA's repository: `cuda-toolkit-13-2` only (never `cuda` or
`cuda-drivers`, which would pull a Linux driver into WSL2), with PATH and library path.
"""

from __future__ import annotations

import io

from pyinfra.api.operation import OperationMeta
from pyinfra.operations import files, server

from beekeeper.core.config import HostConfig
from beekeeper.core.native import keeps_toolkit_libs
from beekeeper.core.paths import CUDA_LOADER_FILE, CUDA_PATH_FILE
from beekeeper.facts.hostfacts import HostFacts
from beekeeper.operations.apt import missing_packages, packages as apt_packages

from . import nvidia_repos


def ensure(cfg: HostConfig, facts: HostFacts) -> list[OperationMeta]:
    # native builds need it; container mode only when host data asks
    wanted = cfg.service.profile.backend == "cuda" and (
        facts.runtime.native or cfg.data.install_cuda_toolkit)
    if not wanted or facts.host_nvcc:  # the host's own toolkit builds (preflight)
        return []
    if facts.built and keeps_toolkit_libs(cfg.service.profile.backend, facts.persistent_root):
        # a pod's build on its volume loads the toolkit libraries it keeps: after the pod's
        # restart cleared the toolkit, several GB are not installed again for nothing
        return []
    # the release the image follows the driver to (cuda_follows_driver), else cuda_version
    major, minor = facts.cuda_version.split(".")[:2]
    package = f"cuda-toolkit-{major}-{minor}"
    ops = nvidia_repos.cuda_repo(nvidia_repos.repos(cfg, facts))
    release = f"{major}.{minor}"
    loader = files.put(name="Add the CUDA libraries to the loader path",
                       src=io.StringIO(CUDA_LOADER_FILE.text.format(release=release)),
                       dest=CUDA_LOADER_FILE.path, mode="0644")
    ops += [
        apt_packages(name=f"Install the CUDA toolkit ({package} only)", packages=[package],
                     update=bool(missing_packages([package])), no_recommends=True),
        files.put(name=f"Put the CUDA toolkit on PATH ({CUDA_PATH_FILE.path})",
                  src=io.StringIO(CUDA_PATH_FILE.text.format(release=release)),
                  dest=CUDA_PATH_FILE.path, mode="0644"),
        loader,
    ]
    if loader.will_change:
        ops.append(server.shell(name="Refresh the loader cache (ldconfig)", commands=["ldconfig"]))
    return ops
