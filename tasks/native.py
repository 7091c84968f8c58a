"""
Native mode: build llama-server on the host into a versioned folder with a `current`
link; rebuild only when source ref, CUDA version, arch or flags change.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from pyinfra import host
from pyinfra.api import StringCommand, operation
from pyinfra.api.operation import OperationMeta
from pyinfra.facts.files import File
from pyinfra.operations import apt, files, server

from beekeeper.build import build_spec
from beekeeper.config import HostConfig
from beekeeper.errors import ConfigError
from beekeeper.native import install_dir, shell_script

from .ops import _with_heartbeat
from .preflight import HostFacts

PREFIX = "/opt/beekeeper/llama-server"


@operation()
def native_built(dest: str, script: str, log_path: str):
    """
    Build llama-server on the host unless `dest` already holds it.

    + dest: versioned install folder (its name carries every build input)
    + script: the build commands (kit's native build: cmake configure, build, install)
    + log_path: where the compiler output goes; a line every 30 s says it is alive
    """
    if host.get_fact(File, path=f"{dest}/llama-server"):
        host.noop(f"{dest}/llama-server is already built")
        return
    yield StringCommand(_with_heartbeat(f"bash -c {shlex.quote(script)}", log_path,
                                        f"building {dest}"))


def ensure(cfg: HostConfig, facts: HostFacts) -> tuple[str, list[OperationMeta]]:
    """Returns the path of the server binary the unit should run, and the operations."""
    spec = build_spec(cfg, facts.compute_cap)
    tag = spec.tag()
    dest = install_dir(PREFIX, tag)
    slug = tag.split(":", 1)[1]
    ops: list[OperationMeta] = [
        apt.packages(name="Install the build toolchain (cmake, g++, make)",
                     packages=["cmake", "g++", "make"] + (["git"] if cfg.source.kind == "git"
                                                          else []),
                     no_recommends=True, cache_time=24 * 3600),
        server.group(name="Create the beekeeper group", group="beekeeper", system=True),
        server.user(name="Create the beekeeper user", user="beekeeper", group="beekeeper",
                    system=True, home="/nonexistent", create_home=False,
                    shell="/usr/sbin/nologin"),
        files.directory(name=f"Create {PREFIX}", path=PREFIX, mode="0755"),
    ]
    if host.get_fact(File, path=f"{dest}/llama-server"):
        ops.append(native_built(name=f"Build llama-server {slug}", dest=dest, script="",
                                log_path=""))
        return f"{dest}/llama-server", ops
    src = f"{cfg.state_dir}/native/{slug}/src"
    if cfg.source.kind == "local":
        tarball = Path(cfg.source.path or "")
        if not tarball.is_file():
            raise ConfigError(f"host data `source.path`: {tarball} is not a file; fix: point "
                              "it at a .tar.gz of a llama.cpp-family tree")
        remote_tar = f"{cfg.state_dir}/src/{tarball.name}"
        ops += [
            files.directory(name="Create the source folder", path=f"{cfg.state_dir}/src"),
            files.put(name=f"Upload source tree {cfg.source.ref}", src=str(tarball),
                      dest=remote_tar, mode="0644"),
            server.shell(name=f"Unpack source tree {cfg.source.ref}", commands=[
                f"mkdir -p {shlex.quote(src)} && tar -C {shlex.quote(src)} "
                f"--strip-components=1 -xzf {shlex.quote(remote_tar)}"]),
        ]
    else:
        ops.append(server.shell(name=f"Fetch {cfg.source.url} at {cfg.source.ref}", commands=[
            f"rm -rf {shlex.quote(src)} && git init -q {shlex.quote(src)} && "
            f"git -C {shlex.quote(src)} fetch -q {shlex.quote(cfg.source.url or '')} "
            f"{shlex.quote(cfg.source.ref)} && git -C {shlex.quote(src)} checkout -q "
            "FETCH_HEAD"]))
    jobs = cfg.build_jobs or 2
    script = shell_script(spec, src, f"{cfg.state_dir}/native/{slug}/build", jobs, dest,
                          PREFIX)
    log = f"/var/log/beekeeper/native-{slug}.log"
    ops.append(native_built(name=f"Build llama-server {slug} natively (log: {log})",
                            dest=dest, script=script, log_path=log))
    return f"{dest}/llama-server", ops
