"""
Model service operations: remove a service the kit deployed (unit, env file, key, container,
rollback copy, manifest), keeping its model.
"""

from __future__ import annotations

from pyinfra import host
from pyinfra.api import operation

from beekeeper.core.paths import SUPERVISORCTL, ServicePaths, prev
from beekeeper.facts.services import DeployedServices

from .lifecycle import unit_removal
from .shell import StreamedCommand, q


def removal_script(name: str) -> str:
    """Shell lines that remove service `name` (and only it); each step tolerates what an
    earlier, partial removal left."""
    p = ServicePaths(name)
    ctl, conf = q(SUPERVISORCTL), q(p.program_conf)
    return " ; ".join([
        *unit_removal(p.unit_name, p.unit, p.dropin_dir),  # its drop-in folder kept if yours
        # runtime supervisor: the program stopped, its file gone, supervisord told
        f"if [ -f {conf} ]; then {ctl} stop {q(p.program)} >/dev/null 2>&1; rm -f {conf}; "
        f"{ctl} update >/dev/null 2>&1 || true; fi",
        f"rm -f {q(prev(p.program_conf))}",
        f"if command -v docker >/dev/null 2>&1; then docker rm -f {q(p.container)} "
        ">/dev/null 2>&1 || true; fi",
        f"rm -rf {q(p.conf_dir)}",
        f"rm -f {q(p.smoke_result)}",
        f"echo {q(f'beekeeper: removed service {name} (its model stays in model_dir)')}",
    ])


@operation()
def service_removed(service: str):
    """
    Stop and remove a model service the kit deployed, keeping its model file. No change
    when it is not there.

    + service: the service's name (beekeeper-<service>.service)
    """
    if service not in host.get_fact(DeployedServices):
        host.noop(f"service {service} is not deployed here")
        return
    yield StreamedCommand(removal_script(service))  # its last line says what went
