"""
Native build operations: llama-server built on the host into a versioned folder.
"""

from __future__ import annotations

from pyinfra import host
from pyinfra.api import operation
from pyinfra.facts.files import File

from beekeeper.core.build import TARGETS

from .shell import StreamedCommand, q, with_heartbeat


def installed(dest: str) -> bool:
    """Every target of the build is in the versioned folder (an older install that lacks
    llama-bench is built again)."""
    return all(host.get_fact(File, path=f"{dest}/{t}") for t in TARGETS)


@operation()
def native_built(dest: str, script: str, log_path: str):
    """
    Build llama-server and llama-bench on the host unless `dest` already holds both.

    + dest: versioned install folder (its name carries every build input)
    + script: the build commands (kit's native build: cmake configure, build, install)
    """
    if installed(dest):
        host.noop(f"{dest}: {', '.join(TARGETS)} already built")
        return
    yield StreamedCommand(with_heartbeat(f"bash -c {q(script)}", log_path,
                                        f"building {dest}"))
