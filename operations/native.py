"""
Native build operations: llama-server built on the host into a versioned folder.
"""

from __future__ import annotations

from pyinfra import host
from pyinfra.api import operation
from pyinfra.facts.files import File

from beekeeper.core.build import TARGETS
from beekeeper.core.paths import kept_at

from .shell import StreamedCommand, q, with_heartbeat


def installed(dest: str, persistent_root: str | None = None) -> bool:
    """Every target of the build is in the versioned folder (an older install that lacks
    llama-bench is built again), or in its place on a pod's persistent root: after the pod's
    restart, until its start command or this deploy links the kit's folders again, the
    build is there only."""
    return any(all(host.get_fact(File, path=f"{d}/{t}") for t in TARGETS)
               for d in dict.fromkeys((dest, kept_at(dest, persistent_root))))


@operation()
def native_built(dest: str, script: str, log_path: str, persistent_root: str | None = None):
    """
    Build llama-server and llama-bench on the host unless `dest` already holds both.

    + dest: versioned install folder (its name carries every build input)
    + script: the build commands (kit's native build: cmake configure, build, install)
    + persistent_root: a pod's persistent root, where `dest` is kept (installed)
    """
    if installed(dest, persistent_root):
        host.noop(f"{dest}: {', '.join(TARGETS)} already built")
        return
    yield StreamedCommand(with_heartbeat(f"bash -c {q(script)}", log_path,
                                        f"building {dest}"))
