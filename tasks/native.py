"""
Native mode: build llama-server on the host into a versioned folder with a `current`
link; rebuild only when source ref, CUDA version, arch or flags change.
"""

from __future__ import annotations

import posixpath

from pyinfra.api.operation import OperationMeta
from pyinfra.operations import files, server

from beekeeper.core.config import HostConfig
from beekeeper.core.native import install_dir, install_files, shell_script
from beekeeper.core.paths import LOG_DIR, NATIVE_PREFIX, SERVER_USER, build_folders
from beekeeper.facts.hostfacts import HostFacts
from beekeeper.operations import native as native_ops
from beekeeper.operations.apt import packages as apt_packages

from . import source
from .server_image import spec_for


def ensure(cfg: HostConfig, facts: HostFacts) -> tuple[str, list[OperationMeta]]:
    """Returns the path of the server binary the unit should run, and the operations."""
    spec, _, slug = spec_for(cfg, facts)
    dest = install_dir(NATIVE_PREFIX, slug)
    ops: list[OperationMeta] = []
    if facts.install_tools:  # only what the host lacks (preflight: apt can bring it)
        ops.append(apt_packages(
            name=f"Install the build tools the host lacks ({', '.join(facts.install_tools)})",
            packages=list(facts.install_tools), no_recommends=True, cache_time=24 * 3600))
    ops += [
        server.group(name="Create the beekeeper group", group=SERVER_USER, system=True),
        server.user(name="Create the beekeeper user", user=SERVER_USER, group=SERVER_USER,
                    system=True, home="/nonexistent", create_home=False, ensure_home=False,
                    shell="/usr/sbin/nologin"),
        files.directory(name=f"Create {NATIVE_PREFIX}", path=NATIVE_PREFIX, mode="0755"),
    ]
    # The source tree is placed only for a build; native_built itself says when the
    # versioned folder already holds every file of a complete install (install_files).
    complete = install_files(spec, facts.persistent_root)
    if not native_ops.installed(dest, complete, facts.persistent_root):
        ops += source.ensure(cfg)
    script = shell_script(spec, source.tree_dir(cfg),
                          f"{build_folders(cfg.data.state_dir).native_builds}/{slug}/build",
                          spec.jobs, dest, NATIVE_PREFIX,
                          cuda_bin=posixpath.dirname(facts.host_nvcc) if facts.host_nvcc
                          else "/usr/local/cuda/bin", persistent_root=facts.persistent_root)
    log = f"{LOG_DIR}/native-{slug}.log"
    ops.append(native_ops.native_built(name=f"Build llama-server {slug} natively (log: {log})",
                                       dest=dest, script=script, log_path=log, files=complete,
                                       persistent_root=facts.persistent_root))
    return f"{dest}/llama-server", ops
