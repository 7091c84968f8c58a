"""
Smoke: after every deploy, wait for /health and check the API answers, on the host; a new
server that fails is rolled back to the previous unit. The host-side scripts a deploy runs
(the downloader, the smoke check, the rollback) are installed here, once.
"""

from __future__ import annotations

import io

from pyinfra.operations import files

from beekeeper import hostside
from beekeeper.core.config import HostConfig, ServiceConfig
from beekeeper.core.paths import HOSTSIDE_DIR, ServicePaths, hostside_script
from beekeeper.core.runtime import Runtime
from beekeeper.operations.persist import kit_folder
from beekeeper.operations.smoke import smoke_checked

from . import model


def install(cfg: HostConfig) -> None:
    """The host-side scripts (beekeeper/hostside) this deploy runs, in their one folder: the
    model downloader where a model comes from the Hub, the smoke check and the rollback where
    the service stage runs. Each upload has its own line: pyinfra's command line names an
    operation by where it is called, so one call in a loop over a list that differs between
    hosts would give two hosts' different uploads one merged name."""
    hub, service = model.from_hub(cfg), "service" in cfg.data.stages
    if hub or service:
        kit_folder(name=f"Create {HOSTSIDE_DIR}", path=HOSTSIDE_DIR)
    if hub:
        _put("fetch_model.py", "Upload the model downloader")
    if service:
        _put("hostcheck.py", "Install the host-side smoke check")
        _put("rollback.py", "Install the host-side rollback")


def _put(script: str, name: str) -> None:
    files.put(name=name, src=io.StringIO(hostside.text(script)), dest=hostside_script(script),
              mode="0755")


def check(cfg: HostConfig, rt: Runtime, svc: ServiceConfig, changed: bool) -> None:
    """The smoke check of `svc`, run by `rt` (HostFacts.runtime)."""
    paths = ServicePaths(svc.name)
    smoke_checked(
        name=f"Wait for /health on port {svc.data.port} and smoke-check the API",
        port=svc.data.port, paths=paths, timeout_s=cfg.data.health_timeout_s, after_change=changed,
        api_key_file=paths.api_key if svc.data.api_key_file else None,
        profile=svc.profile.name, bind_address=svc.data.bind_address, runtime=rt, model=svc.alias,
    )
