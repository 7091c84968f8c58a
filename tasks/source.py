"""
Source: the server's source tree on the host, fetched once per commit and handed to both
the image build (as its build context: the Docker build needs no network) and native mode.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from pyinfra import host
from pyinfra.api import operation
from pyinfra.api.operation import OperationMeta
from pyinfra.operations import apt, files

from beekeeper.core.cache import sha256_file
from beekeeper.core.config import HostConfig
from beekeeper.core.errors import ConfigError
from beekeeper.core.paths import LOG_DIR
from beekeeper.facts.source import SourceTreeId
from beekeeper.operations.shell import StreamedCommand, with_heartbeat

q = shlex.quote
# The image build sends the tree to the engine; git's own folder is not needed there.
DOCKERIGNORE = ".git\n"


def tree_dir(cfg: HostConfig) -> str:
    return f"{cfg.state_dir}/src/{cfg.source.ref}"


@operation()
def git_fetched(url: str, commit: str, dest: str):
    """
    Check out `commit` of the repository at `url` into `dest` (a shallow fetch by full
    commit hash, as GitHub allows), unless `git rev-parse HEAD` there already says it.

    + url: repository URL
    + commit: 40-hex commit hash
    + dest: folder on the host (replaced only once the new checkout is verified)
    """
    if host.get_fact(SourceTreeId, path=dest) == commit:
        host.noop(f"{dest} is at {commit[:12]}")
        return
    tmp = dest + ".tmp"
    script = (
        f"rm -rf {q(tmp)} && git init -q {q(tmp)} && "
        f"git -C {q(tmp)} fetch -q --depth 1 {q(url)} {q(commit)} && "
        f"git -C {q(tmp)} -c advice.detachedHead=false checkout -q FETCH_HEAD && "
        f"test \"$(git -C {q(tmp)} rev-parse HEAD)\" = {q(commit)} && "
        f"printf %s {q(DOCKERIGNORE)} > {q(tmp)}/.dockerignore && "
        f"rm -rf {q(dest)} && mv {q(tmp)} {q(dest)}"
    )
    log = f"{LOG_DIR}/fetch-{commit[:12]}.log"
    yield StreamedCommand(with_heartbeat(f"bash -c {q(script)}", log,
                                        f"fetching {url} at {commit[:12]}"))


@operation()
def tarball_unpacked(tarball: str, tree_id: str, dest: str):
    """
    Unpack a source tarball (uploaded from the controller) into `dest`, unless `dest`
    already holds the tree with that id.

    + tarball: the .tar.gz on the host (one top folder)
    + tree_id: the tarball's sha256, recorded in `dest` as what it holds
    + dest: folder on the host
    """
    if host.get_fact(SourceTreeId, path=dest) == tree_id:
        host.noop(f"{dest} holds {tree_id[:12]}")
        return
    tmp = dest + ".tmp"
    yield (f"rm -rf {q(tmp)} && mkdir -p {q(tmp)} && "
           f"tar -C {q(tmp)} --strip-components=1 -xzf {q(tarball)} && "
           f"echo {q(tree_id)} > {q(tmp)}/.beekeeper-source && "
           f"rm -rf {q(dest)} && mv {q(tmp)} {q(dest)}")


def ensure(cfg: HostConfig) -> tuple[str, list[OperationMeta]]:
    """Returns the source tree's folder on the host, and the operations that place it."""
    dest = tree_dir(cfg)
    result = [files.directory(name=f"Create the source folder {cfg.state_dir}/src",
                              path=f"{cfg.state_dir}/src", mode="0755")]
    if cfg.source.kind == "git":
        result.append(apt.packages(name="Install git to fetch the server source",
                                   packages=["git", "ca-certificates"], no_recommends=True,
                                   cache_time=24 * 3600))
        result.append(git_fetched(
            name=f"Fetch the server source {cfg.source.url} at {cfg.source.ref[:12]}",
            url=cfg.source.url or "", commit=cfg.source.ref, dest=dest))
        return dest, result
    tarball = Path(cfg.source.path or "")
    if not tarball.is_file():
        raise ConfigError(f"host data `source.path`: {tarball} is not a file; fix: run "
                          "`beekeeper sandbox up` (it packs the CPU source tree) or point "
                          "it at a .tar.gz of a llama.cpp-family tree")
    remote_tar = f"{cfg.state_dir}/src/{tarball.name}"
    result.append(files.put(name=f"Upload source tree {cfg.source.ref}", src=str(tarball),
                            dest=remote_tar, mode="0644"))
    result.append(tarball_unpacked(name=f"Unpack source tree {cfg.source.ref}",
                                   tarball=remote_tar, tree_id=sha256_file(tarball),
                                   dest=dest))
    return dest, result
