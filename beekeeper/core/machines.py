"""
Several inventory hosts can land on one machine (two entries with one SSH address and
port, e.g. one per model). What that machine keeps is what all of them name: a deploy of
one of them must not remove the services another one deploys there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from .config import HostConfig, load_host_config
from .errors import ConfigError


def machine_of(name: str, data: Any) -> str:
    """Where an inventory host's operations land: `@local`, a connector's target such as
    `@docker/<id>`, or the SSH address and port (pyinfra's defaults: the host's name, 22).
    Names are compared as written: `localhost` and `127.0.0.1` count as two machines."""
    if name.startswith("@"):
        return "@local" if name.startswith("@local") else name
    return f"{ssh_address(name, data)}:{data.get('ssh_port') or 22}"


def ssh_address(name: str, data: Any) -> str:
    """The address pyinfra's SSH connector reaches a host at: `ssh_hostname`, else its name."""
    return str(data.get("ssh_hostname") or name)


def neighbours(this: str, hosts: Iterable[tuple[str, Any]],
               load: Callable[[Any], HostConfig] = load_host_config) -> list[HostConfig] | None:
    """The configurations of the other inventory hosts on `this` host's machine, or None
    when one of them has bad host data (what it keeps is unknown: nothing may be removed);
    `load`: how host data becomes a HostConfig (deploy.py's, once per host a run)."""
    by_name = dict(hosts)
    where = machine_of(this, by_name[this]) if this in by_name else None
    found = []
    for name, data in by_name.items():
        if name == this or machine_of(name, data) != where:
            continue
        try:
            found.append(load(data))
        except ConfigError:
            return None
    return found


def kept_by_neighbours(this: str, hosts: Iterable[tuple[str, Any]],
                       load: Callable[[Any], HostConfig] = load_host_config
                       ) -> frozenset[str] | None:
    """Service names the other inventory hosts on `this` host's machine keep, or None when
    one of them has bad host data (neighbours)."""
    others = neighbours(this, hosts, load)
    return None if others is None else frozenset(s.name for c in others for s in c.services)


def gateway_kept_by_neighbours(this: str, hosts: Iterable[tuple[str, Any]],
                               load: Callable[[Any], HostConfig] = load_host_config
                               ) -> bool | None:
    """Whether another inventory host on `this` host's machine has a gateway (host data
    `gateway`): then a deploy of `this` one, which has none, leaves the machine's gateway
    alone; None when one of them has bad host data (neighbours)."""
    others = neighbours(this, hosts, load)
    return None if others is None else any(c.data.gateway is not None for c in others)


def leaving(cfg: HostConfig, deployed: list[str],
            kept: frozenset[str] | None = frozenset()) -> list[str]:
    """Deployed services a deploy of `cfg` removes: gone or absent, and not `kept` by another
    inventory host on this machine (None: unknown, nothing removed)."""
    if kept is None:
        return []
    keep = {s.name for s in cfg.services} | kept
    return sorted(n for n in deployed if n not in keep)
