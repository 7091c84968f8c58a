"""
The gateway's plan: every model service of every inventory host, grouped by model name,
with the address the gateway reaches each one at (pure: tasks/gateway.py renders it).
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .config import HostConfig, ServiceConfig, load_host_config
from .deployed import DeployedService
from .errors import ConfigError, PreflightError, host_data
from .hostdata import HOSTNAME, GatewayData, full, one_word
from .machines import machine_of, ssh_address
from .paths import GatewayPaths, bracketed
from .render import render

PATHS = GatewayPaths()
# a model name the gateway routes: a word HAProxy takes in a backend's name (model_<name>),
# in an ACL and in a path (/model/<name>/), with no quoting; model_alias may hold more
# (`/` and `+`), which the gateway refuses in one line
_ROUTE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]*$")


@dataclass(frozen=True)
class Upstream:
    """One model service as the gateway reaches it."""

    host: str
    service: str
    model: str
    address: str
    port: int
    api_key_file: str | None

    @property
    def server_name(self) -> str:
        return re.sub(r"[^A-Za-z0-9._-]", "_", f"{self.host}.{self.service}").lstrip("._-")

    @property
    def haproxy_address(self) -> str:
        return f"{bracketed(self.address)}:{self.port}"


@dataclass(frozen=True)
class Route:
    """One model name: its HAProxy backend and the servers that serve it."""

    model: str
    upstreams: tuple[Upstream, ...]
    key_file: str | None  # the key its servers want (one per model), or None

    @property
    def backend(self) -> str:
        return f"model_{self.model}"

    @property
    def keyed(self) -> bool:
        return self.key_file is not None


@dataclass
class Plan:
    routes: list[Route]
    left_out: list[str]  # hosts whose data is bad (they fail alone), and why


def _is_local_name(name: str) -> bool:
    return name.startswith("@local") or name in ("localhost",)


def upstream_address(gw_host: str, host: str, data: Any, cfg: HostConfig,
                     svc: ServiceConfig, same_machine: bool = False) -> str:
    """Where the gateway on `gw_host` reaches `svc` of `host`; ConfigError when it cannot.
    `same_machine`: `host` is another inventory entry on the gateway's machine (machines.py)."""
    if host == gw_host or same_machine:  # the same box
        return DeployedService.reached_at(svc.data.bind_address)
    bind = ipaddress.ip_address(svc.data.bind_address)
    if cfg.data.gateway_address:  # a private address, or an SSH forward on the gateway's side
        return cfg.data.gateway_address
    where = (f"on {host}: set gateway_address to the address the gateway reaches it at "
             "(a private address, or '127.0.0.1' with an SSH forward and gateway_port)")
    if bind.is_loopback:
        raise ConfigError(
            host_data("bind_address"), f"service {svc.name} on host {host} listens on "
            f"{svc.data.bind_address} only, which the gateway on {gw_host} cannot reach",
            "bind a private address (with api_key_file), or forward the port to the "
            f"gateway (ssh -L) and, {where}")
    if not bind.is_unspecified:
        return str(bind)
    ssh_host = ssh_address(host, data)
    try:
        loop = ipaddress.ip_address(ssh_host).is_loopback
    except ValueError:
        if not _is_local_name(ssh_host) and not (full(HOSTNAME, ssh_host)
                                                 and len(ssh_host) <= 253):
            # an SSH config alias, or a name with characters no resolver (or haproxy.cfg)
            # takes: the gateway could not reach it by that name
            raise ConfigError(
                host_data("gateway_address"), f"host {host} is reached at {ssh_host!r}, which "
                f"is not an address or a host name the gateway on {gw_host} can resolve",
                where) from None
        loop = _is_local_name(ssh_host)
    if loop:
        raise ConfigError(
            host_data("gateway_address"), f"host {host} is reached at {ssh_host}, which is "
            f"the gateway's own loopback from {gw_host}", where)
    return ssh_host


def route_name(host: str, svc: ServiceConfig) -> str:
    """The model name the gateway routes `svc` of `host` by: the name its server answers to
    (its --alias: host data model_alias, else the profile's name). ConfigError, one line,
    for a name HAProxy cannot take as written."""
    model = svc.alias
    if not _ROUTE_RE.match(model):
        said = f"{model!r} " if svc.data.model_alias else ""
        raise ConfigError(
            host_data("model_alias") if svc.data.model_alias else f"profile {model!r}",
            f"{said}of service {svc.name} on {host} is not a name the gateway can route (it "
            "writes the name into HAProxy's backend names and paths)", "set model_alias to a "
            "name of letters, digits and . _ - : only, starting with a letter or digit",
            lead=": " if svc.data.model_alias else " ")
    return model


def plan(gw_host: str, hosts: Iterable[tuple[str, Any]],
         load: Callable[[Any], HostConfig] = load_host_config) -> Plan:
    """Routes for the gateway on `gw_host` from every inventory host's (name, host data).
    A host whose data is bad is left out (it fails alone, with its own line); a service the
    gateway cannot reach, or a model whose servers want different keys, is an error here."""
    by_model: dict[str, list[Upstream]] = {}
    served: dict[str, tuple[object, str]] = {}  # model -> what its first server serves, where
    left_out: list[str] = []
    hosts = list(hosts)
    gw_data = dict(hosts).get(gw_host)
    gw_machine = None if gw_data is None else machine_of(gw_host, gw_data)
    for name, data in hosts:
        try:
            cfg = load(data)
        except ConfigError as e:
            left_out.append(f"{name}: {e}")
            continue
        for svc in cfg.services:
            model = route_name(name, svc)
            # balanced as one model: one file (name, sha256 or repo@revision), one set of flags
            what = (svc.model.filename, svc.model.contents(), svc.profile.server,
                    svc.data.server_extra_args)
            first = served.setdefault(model, (what, f"{name}/{svc.name}"))
            if first[0] != what:
                raise ConfigError(
                    host_data("model_alias" if svc.data.model_alias else "profile"),
                    f"service {svc.name} on {name} and {first[1]} both answer as model "
                    f"{model} but serve different models or server settings (model file, "
                    "its repository, revision or sha256, profile, ctx_size, slots or extra "
                    "args), and the gateway would balance them as one", "give them the same "
                    "model and settings, or give one of them another model_alias (the name "
                    "clients send)")
            by_model.setdefault(model, []).append(Upstream(
                host=name, service=svc.name, model=model,
                address=upstream_address(gw_host, name, data, cfg, svc,
                                         gw_machine is not None
                                         and machine_of(name, data) == gw_machine),
                port=svc.data.gateway_port or svc.data.port, api_key_file=svc.data.api_key_file))
    routes = []
    for model, ups in sorted(by_model.items()):
        keys = {Path(u.api_key_file).read_text().strip(): u for u in ups if u.api_key_file}
        if len(keys) > 1:
            who = ", ".join(f"{u.host}/{u.service}" for u in ups if u.api_key_file)
            raise ConfigError(
                host_data("api_key_file"), f"the servers of model {model} ({who}) want "
                "different API keys, and the gateway sends one key per model",
                "give them one key file")
        key_file = next(iter(keys.values())).api_key_file if keys else None
        for key in keys:
            if not one_word(key):
                raise ConfigError(host_data("api_key_file"), f"the key of model {model} holds "
                                  "a space or a control character", "use a key without "
                                  "them, e.g. `openssl rand -hex 32`")
        names = [u.server_name for u in ups]
        if len(set(names)) != len(names):
            raise ConfigError(f"model {model}", f"two servers share the name {names}",
                              "rename one of those hosts or services (HAProxy's name for a "
                              "server writes each character but letters, digits and . _ - as _)")
        routes.append(Route(model=model, upstreams=tuple(ups), key_file=key_file))
    return Plan(routes=routes, left_out=left_out)


# What the config needs of HAProxy, with a key or without (docs/gateway.md, "HAProxy 2.4 or
# newer"): json_query, req.fhdr and the word converter, all in 2.4.
HAPROXY_NEEDS = ((2, 4), "the json_query converter (reading the request's model)")


def haproxy_refusal(version: str) -> PreflightError | None:
    """Why this HAProxy (a Debian version such as "2.2.9-2+deb11u6") cannot run the gateway's
    config; None when it can or the version is unreadable."""
    m = re.match(r"(?:\d+:)?(\d+)\.(\d+)", version)
    if not m:
        return None
    have = (int(m.group(1)), int(m.group(2)))
    need, what = HAPROXY_NEEDS
    if have < need:
        return PreflightError(
            host_data("gateway"), f"this host's HAProxy is {version}, older than "
            f"{need[0]}.{need[1]}, which {what} needs", "put the gateway on a host "
            "whose distro has HAProxy 2.4 or newer (Ubuntu 22.04, Debian 12 or later)")
    return None


def systemd_refusal(pid1: str) -> PreflightError:
    """A gateway on a host whose PID 1 (`pid1`) is not systemd: HAProxy runs as a unit."""
    return PreflightError(
        host_data("gateway"), "the gateway runs HAProxy as a systemd unit, and PID 1 here "
        f"is {pid1!r}", "give `gateway` to an inventory host with systemd (it "
        "routes to this host's services over the network), or remove it")


def render_config(gw: GatewayData, routes: list[Route]) -> str:
    # on ::, IPv4 too whatever the host's net.ipv6.bindv6only (reached at 127.0.0.1)
    bind = f"{bracketed(gw.bind_address)}:{gw.port}" + \
        (" v4v6" if gw.bind_address == "::" else "")
    # HAProxy's buffer: the body limit plus room for the headers and their rewrites
    max_body = gw.max_body_kib * 1024
    return render("haproxy.cfg.j2", bind=bind, routes=routes,
                  client_key=PATHS.client_key if gw.api_key_file else None,
                  upstream_keys=PATHS.upstream_keys, models_json=PATHS.models_json,
                  bufsize=max_body + 16384, max_body=max_body,
                  max_body_kib=gw.max_body_kib, timeout_s=gw.timeout_s,
                  check_interval_s=gw.check_interval_s)


def models_json(routes: list[Route]) -> str:
    """GET /v1/models on the gateway: every model behind it (OpenAI's list format)."""
    return json.dumps({"object": "list", "data": [
        {"id": r.model, "object": "model", "created": 0, "owned_by": "beekeeper",
         "servers": len(r.upstreams)} for r in routes]}, indent=2) + "\n"


def upstream_keys_map(routes: list[Route]) -> list[tuple[str, str]]:
    """(backend name, key file on the controller) for each model whose servers want a key:
    the map HAProxy reads is built on the host from the root-only copies."""
    return [(r.backend, r.key_file) for r in routes if r.key_file]


def render_unit() -> str:
    return render("beekeeper-gateway.service.j2", unit=PATHS.unit_name, config=PATHS.config)
