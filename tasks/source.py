"""
Source: the server's source tree on the host, fetched once per commit and handed to both
the image build (as its build context: the Docker build needs no network) and native mode.
"""

from __future__ import annotations

from pathlib import Path

from pyinfra.api.operation import OperationMeta
from pyinfra.operations import files

from beekeeper.core.cache import sha256_file
from beekeeper.core.config import HostConfig
from beekeeper.core.errors import ConfigError, host_data
from beekeeper.core.paths import build_folders
from beekeeper.operations.apt import packages as apt_packages
from beekeeper.operations.source import git_fetched, tarball_unpacked


def tree_dir(cfg: HostConfig) -> str:
    return f"{build_folders(cfg.data.state_dir).sources}/{cfg.source.ref}"


def ensure(cfg: HostConfig) -> list[OperationMeta]:
    """The operations that place the source tree in `tree_dir(cfg)` on the host."""
    dest, sources = tree_dir(cfg), build_folders(cfg.data.state_dir).sources
    result = [files.directory(name=f"Create the source folder {sources}", path=sources,
                              mode="0755")]
    if cfg.source.kind == "git":
        result.append(apt_packages(name="Install git to fetch the server source",
                                   packages=["git", "ca-certificates"], no_recommends=True,
                                   cache_time=24 * 3600))
        result.append(git_fetched(
            name=f"Fetch the server source {cfg.source.git} at {cfg.source.ref[:12]}",
            url=cfg.source.git or "", commit=cfg.source.ref, dest=dest))
        return result
    tarball = Path(cfg.source.path or "")
    if not tarball.is_file():
        raise ConfigError(host_data("source.path"), f"{tarball} is not a file", "run "
                          "`beekeeper sandbox up` (it packs the CPU source tree) or point "
                          "it at a .tar.gz of a llama.cpp-family tree")
    remote_tar = f"{sources}/{tarball.name}"
    result.append(files.put(name=f"Upload source tree {cfg.source.ref}", src=str(tarball),
                            dest=remote_tar, mode="0644"))
    result.append(tarball_unpacked(name=f"Unpack source tree {cfg.source.ref}",
                                   tarball=remote_tar, tree_id=sha256_file(tarball),
                                   dest=dest))
    return result
