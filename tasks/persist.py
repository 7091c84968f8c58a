"""
A GPU pod's persistent root (docs/gpu-containers.md): the kit's folders (core/paths.py,
PERSISTED) become links into it before anything is written there.
"""

from __future__ import annotations

from pyinfra import host
from pyinfra.operations import server

from beekeeper.core import supervisor as sv
from beekeeper.core.paths import persisted_links
from beekeeper.facts.hostfacts import HostFacts
from beekeeper.facts.persist import PathKinds
from beekeeper.facts.toolchain import SupervisorPrograms
from beekeeper.operations.persist import linked, unsupervised_ended
from beekeeper.operations.supervisor import supervisord_running


def ensure(facts: HostFacts) -> bool:
    """The kit's folders linked into the persistent root; whether folders moved (then
    supervisord, which had its files open there, is stopped for the move and started again
    at once, so its service serves on while the build runs)."""
    root = facts.persistent_root
    if not root:
        return False
    # a kit folder that is a real folder now: its contents move into the root
    links = persisted_links(root)
    kinds = host.get_fact(PathKinds, paths=[path for path, _ in links])
    moved = any(k.kind == "dir" for k in kinds.values())
    stopped = moved and host.get_fact(SupervisorPrograms) is not None
    if stopped:
        server.shell(
            name="Stop the kit's supervisord while its folders move onto the persistent root",
            commands=[sv.shutdown_line()])
    for path, target in links:
        linked(name=f"Keep {path} on the persistent root ({target})", path=path,
               target=target)
    if stopped:
        supervisord_running(
            name="Start the kit's supervisord again, its folders on the persistent root",
            config_changed=True)
    return moved


def unsupervised(facts: HostFacts) -> None:
    """End the kit's servers preflight found on the services' ports with no supervisor of
    the kit's (a killed supervisord left them, or they were started by hand)."""
    pids = sorted(facts.port_orphans)
    if pids:
        unsupervised_ended(name=f"End the kit's unsupervised server on a service's port (pid "
                                f"{', '.join(map(str, pids))}) so the service's own takes the "
                                "port", pids=pids)
