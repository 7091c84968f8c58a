"""
Smoke: after every deploy, wait for /health and check the API answers, on the host.
"""

from __future__ import annotations

from pathlib import Path

from pyinfra.api.operation import OperationMeta
from pyinfra.operations import files

from beekeeper.config import HostConfig, ServiceConfig

from . import ops
from .service import unit_name

HOSTCHECK = "/usr/local/lib/beekeeper/hostcheck.py"


def install() -> list[OperationMeta]:
    src = Path(__file__).resolve().parent.parent / "verify" / "hostcheck.py"
    return [
        files.directory(name="Create /usr/local/lib/beekeeper",
                        path="/usr/local/lib/beekeeper", mode="0755"),
        files.put(name="Install the host-side smoke check", src=str(src), dest=HOSTCHECK,
                  mode="0755"),
    ]


def check(cfg: HostConfig, svc: ServiceConfig, changed: bool) -> OperationMeta:
    return ops.smoke_checked(
        name=f"Wait for /health on port {svc.port} and smoke-check the API",
        # result: /var/lib/beekeeper/reports/beekeeper-<name>-smoke.json on the host
        port=svc.port, unit=unit_name(svc), script=HOSTCHECK,
        timeout_s=cfg.health_timeout_s, after_change=changed,
        api_key_file=svc.api_key_file and f"/etc/beekeeper/{svc.name}/api_key",
        profile=svc.profile.name, bind_address=svc.bind_address,
    )
