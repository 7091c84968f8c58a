"""
Prune: the inventory is the truth. A model service the kit deployed on this host that the
inventory no longer names (or marks `state = "absent"`) is stopped, and its unit, its env
file and key, its container and its rollback copy are removed. Its model stays in
model_dir (deploys never delete models), and your drop-in folder stays if it has files.
"""

from __future__ import annotations

import json
import shlex

from pyinfra import host
from pyinfra.api import operation
from pyinfra.api.operation import OperationMeta
from pyinfra.facts.files import FileContents

from beekeeper.core.config import HostConfig
from beekeeper.core.machines import leaving
from beekeeper.core.paths import ServicePaths, prev
from beekeeper.facts.services import DeployedServices
from beekeeper.operations.shell import StreamedCommand

q = shlex.quote


def removal_script(name: str) -> str:
    """Shell lines that remove service `name` (and only it); each step tolerates what an
    earlier, partial removal left."""
    p = ServicePaths(name)
    unit, path = p.unit_name, p.unit
    return " ; ".join([
        f"systemctl disable --now {q(unit)} 2>/dev/null || systemctl stop {q(unit)} "
        "2>/dev/null || true",
        f"if command -v docker >/dev/null 2>&1; then docker rm -f {q(p.container)} "
        ">/dev/null 2>&1 || true; fi",
        f"rm -f {q(path)} {q(prev(path))}",
        f"rmdir {q(p.dropin_dir)} 2>/dev/null || true",  # kept when it holds your files
        f"rm -rf {q(p.conf_dir)}",
        f"rm -f {q(p.smoke_result)}",
        "systemctl daemon-reload",
        f"systemctl reset-failed {q(unit)} 2>/dev/null || true",
        f"echo {q(f'beekeeper: removed service {name} (its model stays in model_dir)')}",
    ])


@operation()
def service_removed(service: str):
    """
    Stop and remove a model service the kit deployed (unit, env file, key, container,
    rollback copy, manifest); its model file is kept. No change when it is not there.

    + service: the service's name (beekeeper-<service>.service)
    """
    if service not in host.get_fact(DeployedServices):
        host.noop(f"service {service} is not deployed here")
        return
    yield StreamedCommand(removal_script(service))  # its last line says what went


def held_port(name: str) -> int | None:
    """The port a deployed service's manifest names (None when it cannot be read)."""
    text = host.get_fact(FileContents, path=ServicePaths(name).manifest)
    try:
        port = json.loads("\n".join(text))["port"] if text else None
    except (ValueError, KeyError, TypeError):
        return None
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
