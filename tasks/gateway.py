"""
Gateway: one OpenAI endpoint for every model service of every inventory host, on the distro's
HAProxy (docs/gateway.md); its config is checked with `haproxy -c` before it is put in place,
and applied by a reload. Keys are root-only files, never on a command line or in the config.
"""

from __future__ import annotations

import io

import click
from pyinfra import host
from pyinfra.api.operation import OperationMeta
from pyinfra.operations import files, systemd

from beekeeper.core import gateway as gw
from beekeeper.core.config import HostConfig
from beekeeper.core.deployed import DeployedService
from beekeeper.core.hostdata import GatewayData
from beekeeper.core.paths import bracketed
from beekeeper.facts.host import AptPolicy, InitSystem
from beekeeper.facts.lifecycle import PresentPaths
from beekeeper.operations.apt import packages as apt_packages
from beekeeper.operations.gateway import (
    config_installed,
    files_pruned,
    gateway_checked,
    keys_map_built,
)
from beekeeper.operations.lifecycle import unit_removed
from beekeeper.operations.secrets import put_secret, secret_content, sha1_text

GP = gw.PATHS  # the gateway's host files


def _keys(cfg_gw: GatewayData, routes: list[gw.Route]) -> list[OperationMeta]:
    """The gateway's key, each backend's key, and the map HAProxy reads them from (a change to
    any means a reload); stale key files go."""
    changes = [put_secret(name="Store the gateway's API key (root-only file)",
                          src=cfg_gw.api_key_file, dest=GP.client_key) if cfg_gw.api_key_file
               else files.file(name="No gateway API key: remove a stored one",
                               path=GP.client_key, present=False)]
    entries = gw.upstream_keys_map(routes)
    changes += [put_secret(name=f"Store the API key of model {b} (root-only file)", src=src,
                           dest=GP.backend_key(b)) for b, src in entries]
    files_pruned(name="Remove keys of models the gateway no longer routes",
                 folder=GP.keys_dir, keep=[GP.backend_key(b) for b, _ in entries])
    changes.append(keys_map_built(
        name="Build the backends' key map (root-only)", map_path=GP.upstream_keys,
        entries=[(b, GP.backend_key(b)) for b, _ in entries],
        expected_sha1=sha1_text("".join(f"{b} {secret_content(src)}" for b, src in entries))))
    return changes


def ensure(cfg: HostConfig, plan: gw.Plan) -> None:
    """The gateway on this host, for every service `plan` routes (deploy.py's, of every
    inventory host)."""
    gcfg = cfg.data.gateway
    assert gcfg is not None
    # HAProxy runs as a systemd unit: a host without systemd stops here (preflight's check,
    # which a gateway-only host does not run)
    init = host.get_fact(InitSystem)
    if init is not None and not init.systemd:
        raise gw.systemd_refusal(init.pid1)
    # an HAProxy too old for the config stops here, before any change: the one installed,
    # else the one apt offers (unknown on a host with no package lists: `haproxy -c` then)
    policy = host.get_fact(AptPolicy, package="haproxy")
    version = policy.installed or policy.candidate
    refusal = gw.haproxy_refusal(version) if version else None
    if refusal:
        raise refusal
    for line in plan.left_out:
        click.echo(click.style(f"host {host.name}: gateway: left out host {line}", fg="yellow"),
                   err=True)
    if policy.installed is None:  # apt's update only when missing
        apt_packages(name="Install HAProxy from the distro", packages=["haproxy"], update=True,
                     no_recommends=True)
    files.directory(name=f"Create {GP.conf_dir}", path=GP.conf_dir, mode="0755")
    files.directory(name=f"Create {GP.keys_dir} (root-only)", path=GP.keys_dir, mode="0700",
                    user="root", group="root")
    files.directory(name=f"Create the drop-in folder {GP.unit_name}.d (yours; never written)",
                    path=GP.dropin_dir, mode="0755")
    changes = _keys(gcfg, plan.routes)
    changes.append(files.put(name="List the gateway's models (GET /v1/models)",
                             src=io.StringIO(gw.models_json(plan.routes)),
                             dest=GP.models_json, mode="0644"))
    config, staged = gw.render_config(gcfg, plan.routes), f"{GP.config}.new"
    files.put(name="Stage the gateway's HAProxy config (from the inventory)",
              src=io.StringIO(config), dest=staged, mode="0644")
    changes.append(config_installed(name="Check the config with haproxy -c and put it in place",
                                    staged=staged, dest=GP.config, expected_sha1=sha1_text(config)))
    unit_op = files.put(name=f"Render systemd unit {GP.unit_name}",
                        src=io.StringIO(gw.render_unit()), dest=GP.unit, mode="0644")
    changed = any(op.will_change for op in changes)
    systemd.service(
        name=f"Start and enable {GP.unit_name}" + (" (reload: config changed)" if changed else ""),
        service=GP.unit_name, running=True, enabled=True, daemon_reload=unit_op.will_change,
        restarted=unit_op.will_change, reloaded=changed and not unit_op.will_change)
    models = ", ".join(f"{r.model} ({len(r.upstreams)} server"
                       f"{'s' if len(r.upstreams) != 1 else ''})" for r in plan.routes) or "none"
    gateway_checked(
        name="Wait for the gateway's /health",
        address=DeployedService.reached_at(gcfg.bind_address), port=gcfg.port,
        after_change=changed or unit_op.will_change,
        summary=f"gateway on {bracketed(gcfg.bind_address)}:{gcfg.port} routes {models}")


def removed() -> None:
    """A gateway an earlier deploy put on a host whose data now has none: its unit and folder
    go; HAProxy stays installed (the uninstall removes it)."""
    if host.get_fact(PresentPaths, paths=[GP.unit, GP.conf_dir]):
        unit_removed(name=f"Remove the gateway {GP.unit_name} (host data has no `gateway`)",
                     unit_name=GP.unit_name, unit_path=GP.unit, dropin_dir=GP.dropin_dir)
        files.directory(name=f"Remove the gateway's folder {GP.conf_dir} (its config and keys)",
                        path=GP.conf_dir, present=False)
