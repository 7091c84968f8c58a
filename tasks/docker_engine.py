"""
Docker engine: install the distro package where missing and keep it running.
Never writes /etc/docker/daemon.json.
"""

from __future__ import annotations

from pyinfra import host
from pyinfra.api.operation import OperationMeta
from pyinfra.facts.deb import DebPackages
from pyinfra.operations import apt, systemd

from beekeeper.config import HostConfig

from .preflight import HostFacts

HOST_PACKAGES = ["python3", "ca-certificates"]


def _cli_split(os_release: dict[str, str]) -> bool:
    version = (os_release or {}).get("version_id", "").split(".")[0]
    return (os_release or {}).get("id") == "debian" and version.isdigit() and int(version) >= 13


def ensure(cfg: HostConfig, facts: HostFacts) -> list[OperationMeta]:
    ops: list[OperationMeta] = []
    installed = host.get_fact(DebPackages) or {}
    wanted = list(HOST_PACKAGES)
    if cfg.mode == "container" and not facts.docker["present"]:
        wanted.append("docker.io")
        # Debian 13's docker.io only recommends its client, now a package of its own. A
        # fresh host has no apt lists yet (apt-cache knows no docker-cli before the update
        # that this install runs), so Debian 13 and later ask for it by their version too
        if facts.docker.get("cli_package") or _cli_split(facts.os):
            wanted.append("docker-cli")
    missing = [p for p in wanted if p not in installed]
    if missing:
        ops.append(apt.packages(
            name=f"Install host packages: {', '.join(missing)}",
            packages=missing, update=True, no_recommends=True,
        ))
    if cfg.mode == "container" and facts.docker["flavour"] != "docker-desktop":
        ops.append(systemd.service(
            name="Enable and start the Docker engine",
            service="docker.service", running=True, enabled=True,
        ))
    return ops
