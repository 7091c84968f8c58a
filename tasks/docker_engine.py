"""
Docker engine: install the distro package where missing and keep it running.
Never writes /etc/docker/daemon.json.
"""

from __future__ import annotations

from pyinfra.operations import systemd

from beekeeper.core.config import HostConfig
from beekeeper.core.profiles import HfSource
from beekeeper.facts.hostfacts import HostFacts
from beekeeper.operations.apt import missing_packages, packages as apt_packages


def ensure(cfg: HostConfig, facts: HostFacts) -> None:
    # python3 where the host has none (the host-side checks run with it), ca-certificates
    # where the deploy downloads over HTTPS (a Hub model, a git source, Docker's images): a
    # host that has what it needs (an offline GPU container) gets no apt transaction
    wanted = [] if facts.tools and facts.tools.python3 else ["python3"]
    downloads = facts.runtime.container or cfg.source.kind == "git" or any(
        isinstance(m.source, HfSource) for s in cfg.services for m in s.models())
    wanted += ["ca-certificates"] if downloads else []
    # the engine (and on Debian 13 its client, a package of its own there: docker.io only
    # recommends it) and compose's plugin, as far as the way the server runs needs them
    wanted += facts.runtime.docker_packages(facts.os.as_mapping(), facts.docker.present,
                                            facts.docker.flavour, facts.compose_version)
    missing = missing_packages(wanted)
    if missing:
        apt_packages(name=f"Install host packages: {', '.join(missing)}",
                     packages=missing, update=True, no_recommends=True)
    for service in facts.runtime.docker_services(facts.docker.flavour):
        systemd.service(name="Enable and start the Docker engine",
                        service=service, running=True, enabled=True)
