"""
Smoke: after every deploy, wait for /health and check the API answers, on the host; a new
server that fails is rolled back to the previous unit.
"""

from __future__ import annotations

from pyinfra.api.operation import OperationMeta
from pyinfra.operations import files

from beekeeper import hostside
from beekeeper.core.config import HostConfig, ServiceConfig
from beekeeper.core.paths import HOSTSIDE_DIR, ServicePaths, hostside_script
from beekeeper.core.runtime import Runtime
from beekeeper.operations.persist import kit_folder
from beekeeper.operations.smoke import smoke_checked


def install() -> list[OperationMeta]:
    """The host-side smoke check and rollback (beekeeper/hostside)."""
    ops = [kit_folder(name=f"Create {HOSTSIDE_DIR}", path=HOSTSIDE_DIR)]
    for name, what in (("hostcheck.py", "smoke check"), ("rollback.py", "rollback")):
        ops.append(files.put(name=f"Install the host-side {what}", src=str(hostside.script(name)),
                             dest=hostside_script(name), mode="0755"))
    return ops


def check(cfg: HostConfig, rt: Runtime, svc: ServiceConfig, changed: bool) -> OperationMeta:
    """The smoke check of `svc`, run by `rt` (HostFacts.runtime)."""
    paths = ServicePaths(svc.name)
    return smoke_checked(
        name=f"Wait for /health on port {svc.port} and smoke-check the API",
        port=svc.port, paths=paths, timeout_s=cfg.data.health_timeout_s, after_change=changed,
        api_key_file=paths.api_key if svc.api_key_file else None,
        profile=svc.profile.name, bind_address=svc.bind_address, runtime=rt, model=svc.alias,
    )
