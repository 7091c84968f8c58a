"""
Native build operations: llama-server built on the host into a versioned folder.
"""

from __future__ import annotations

from pyinfra import host
from pyinfra.api import operation
from pyinfra.facts.files import File

from beekeeper.core.paths import kept_at

from .shell import StreamedCommand, q, with_heartbeat


def installed(dest: str, files: tuple[str, ...], persistent_root: str | None = None) -> bool:
    """Every file of a complete install (core/native.install_files: the targets, on a pod
    the list of its kept toolkit libraries) is in the versioned folder (an older install
    that lacks one is built again), or in its place on a pod's persistent root: after the
    pod's restart, until its start command or this deploy links the kit's folders again,
    the build is there only."""
    return any(all(host.get_fact(File, path=f"{d}/{f}") for f in files)
               for d in dict.fromkeys((dest, kept_at(dest, persistent_root))))


@operation()
def native_built(dest: str, script: str, log_path: str, files: tuple[str, ...],
                 persistent_root: str | None = None):
    """
    Build llama-server and llama-bench on the host unless `dest` already holds them.

    + dest: versioned install folder (its name carries every build input)
    + script: the build commands (kit's native build: cmake configure, build, install)
    + files: what a complete install holds (core/native.install_files)
    + persistent_root: a pod's persistent root, where `dest` is kept (installed)
    """
    if installed(dest, files, persistent_root):
        host.noop(f"{dest}: {', '.join(files)} already there")
        return
    yield StreamedCommand(with_heartbeat(f"bash -c {q(script)}", log_path,
                                        f"building {dest}"))
