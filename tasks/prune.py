"""
Prune: the inventory is the truth. A model service the kit deployed on this host that the
inventory no longer names (or marks `state = "absent"`) is stopped, and its unit, its env
file and key, its container and its rollback copy are removed. Its model stays in
model_dir (deploys never delete models), and your drop-in folder stays if it has files.
"""

from __future__ import annotations

import shlex

from pyinfra import host
from pyinfra.api.operation import OperationMeta

from beekeeper.core.config import HostConfig
from beekeeper.core.machines import leaving
from beekeeper.core.paths import ServicePaths
from beekeeper.facts.services import DeployedServices, deployed_manifest
from beekeeper.operations.services import service_removed

q = shlex.quote


def held_port(name: str) -> int | None:
    """The port a deployed service's manifest names (None when it cannot be read)."""
    port = (deployed_manifest(ServicePaths(name).manifest) or {}).get("port")
    return port if isinstance(port, int) else None


def ensure(cfg: HostConfig, phase: str = "after") -> list[OperationMeta]:
    """Queue the removals of one phase. "before" (ahead of the kept services' start): the
    stale services whose port a kept service takes, or whose port cannot be read. "after"
    (once every kept service passed its smoke check, so a failed deploy stops before and
    what ran keeps running): all the others."""
    ops = []
    if cfg.kept_by_neighbours is None and phase == "before":
        host.noop("removing services left out: skipped, another inventory host on this "
                  "machine has bad host data and what it keeps is unknown")
    wanted_ports = {s.port for s in cfg.services}
    for name in leaving(cfg, host.get_fact(DeployedServices)):
        port = held_port(name)
        first = port is None or port in wanted_ports
        if first != (phase == "before"):
            continue
        why = "marked absent" if name in cfg.absent else "gone from the inventory"
        if first:
            why += f", its port {port} goes to a kept service" if port else ""
        ops.append(service_removed(
            name=f"Remove service {name} ({why}): stop it, remove its unit, env file and "
                 "container; keep its model", service=name))
    return ops
