"""
Native mode: build llama-server on the host into a versioned folder with a `current`
link; rebuild only when source ref, CUDA version, arch or flags change.
"""

from __future__ import annotations

import shlex

from pyinfra import host
from pyinfra.api import operation
from pyinfra.api.operation import OperationMeta
from pyinfra.facts.files import File
from pyinfra.operations import apt, files, server

from beekeeper.core.build import TARGETS, build_spec
from beekeeper.core.config import HostConfig
from beekeeper.core.native import install_dir, shell_script
from beekeeper.core.paths import LOG_DIR, NATIVE_PREFIX
from beekeeper.facts.hostfacts import HostFacts
from beekeeper.operations.shell import StreamedCommand, with_heartbeat

from . import source

PREFIX = NATIVE_PREFIX


def _installed(dest: str) -> bool:
    """Every target of the build is in the versioned folder (an older install that lacks
    llama-bench is built again)."""
    return all(host.get_fact(File, path=f"{dest}/{t}") for t in TARGETS)


@operation()
def native_built(dest: str, script: str, log_path: str):
    """
    Build llama-server and llama-bench on the host unless `dest` already holds both.

    + dest: versioned install folder (its name carries every build input)
    + script: the build commands (kit's native build: cmake configure, build, install)
    + log_path: where the compiler output goes; a line every 30 s says it is alive
    """
    if _installed(dest):
        host.noop(f"{dest}: {', '.join(TARGETS)} already built")
        return
    yield StreamedCommand(with_heartbeat(f"bash -c {shlex.quote(script)}", log_path,
                                        f"building {dest}"))


def ensure(cfg: HostConfig, facts: HostFacts) -> tuple[str, list[OperationMeta]]:
    """Returns the path of the server binary the unit should run, and the operations."""
    spec = build_spec(cfg, facts.compute_cap, facts.cpus, facts.mem_total_bytes)
    tag = spec.tag()
    dest = install_dir(PREFIX, tag)
    slug = tag.split(":", 1)[1]
    ops: list[OperationMeta] = [
        apt.packages(name="Install the build toolchain (cmake, g++, make)",
                     packages=["cmake", "g++", "make"], no_recommends=True,
                     cache_time=24 * 3600),
        server.group(name="Create the beekeeper group", group="beekeeper", system=True),
        server.user(name="Create the beekeeper user", user="beekeeper", group="beekeeper",
                    system=True, home="/nonexistent", create_home=False,
                    shell="/usr/sbin/nologin"),
        files.directory(name=f"Create {PREFIX}", path=PREFIX, mode="0755"),
    ]
    if _installed(dest):
        ops.append(native_built(name=f"Build llama-server {slug}", dest=dest, script="",
                                log_path=""))
        return f"{dest}/llama-server", ops
    src, src_ops = source.ensure(cfg)
    ops += src_ops
    jobs = spec.jobs
    script = shell_script(spec, src, f"{cfg.state_dir}/native/{slug}/build", jobs, dest,
                          PREFIX)
    log = f"{LOG_DIR}/native-{slug}.log"
    ops.append(native_built(name=f"Build llama-server {slug} natively (log: {log})",
                            dest=dest, script=script, log_path=log))
    return f"{dest}/llama-server", ops
