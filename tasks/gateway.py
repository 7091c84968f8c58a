"""
Gateway: one OpenAI endpoint for every model service of every inventory host, on the
distro's HAProxy. Its config is rendered from the inventory (beekeeper/gateway.py), checked
with `haproxy -c` before it is put in place, and applied by a reload (open streams go on).
Keys: the gateway's own key and the backends' keys are root-only files; none is on a
command line, in the config, in pyinfra's output or in HAProxy's log.
"""

from __future__ import annotations

import io
import ipaddress
import shlex
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import click
from pyinfra import host
from pyinfra.api import StringCommand, operation
from pyinfra.api.operation import OperationMeta
from pyinfra.facts.deb import DebPackages
from pyinfra.facts.files import Sha1File
from pyinfra.operations import apt, files, systemd

from beekeeper.core import gateway as gw
from beekeeper.core.config import HostConfig
from beekeeper.core.paths import prev
from beekeeper.facts.services import FolderFiles
from beekeeper.operations.secrets import put_secret, sha1_text
from beekeeper.operations.shell import StreamedCommand

q = shlex.quote
GP = gw.PATHS  # the gateway's host files
KEYS_DIR = GP.keys_dir


@operation()
def config_installed(staged: str, dest: str, expected_sha1: str):
    """
    Put a staged HAProxy config in place once `haproxy -c` accepts it, keeping the one it
    replaces as `<dest>.prev` (gateway_checked puts that back when the new one does not
    serve); no change when the config in place is already the wanted one.

    + staged: the new config on the host
    + dest: the config HAProxy runs
    + expected_sha1: sha1 of the wanted config
    """
    if host.get_fact(Sha1File, path=dest) == expected_sha1:
        host.noop(f"{dest} is up to date")
        return
    old, tmp = q(prev(dest)), q(f"{dest}.tmp")
    yield StringCommand(f"haproxy -c -q -f {q(staged)} && "
                        f"{{ if [ -f {q(dest)} ]; then cp -p {q(dest)} {old}; "
                        f"else rm -f {old}; fi; }} && "
                        f"cp -p {q(staged)} {tmp} && mv -f {tmp} {q(dest)}")


@operation()
def keys_map_built(map_path: str, entries: list[tuple[str, str]], expected_sha1: str):
    """
    Build HAProxy's map `<backend> <key>` (root-only) on the host from root-only key files,
    so no key is on a command line or in pyinfra's output.

    + map_path: the map file to write (mode 0600)
    + entries: (backend name, key file on the host) pairs
    + expected_sha1: sha1 of the wanted map (computed on the controller)
    """
    if host.get_fact(Sha1File, path=map_path) == expected_sha1:
        host.noop(f"{map_path} is up to date")
        return
    lines = " ".join(f"printf '%s %s\\n' {q(backend)} \"$(cat {q(path)})\";"
                     for backend, path in entries)
    yield StringCommand(f"umask 077 && {{ {lines} true; }} > {q(map_path)}.tmp && "
                        f"mv -f {q(map_path)}.tmp {q(map_path)}")


@operation()
def files_pruned(folder: str, keep: list[str]):
    """
    Remove the files of a folder the kit owns that this deploy no longer writes.

    + folder: the folder
    + keep: file names that stay
    """
    stale = [f for f in host.get_fact(FolderFiles, path=folder) if f not in keep]
    if not stale:
        host.noop(f"nothing stale in {folder}")
        return
    yield StringCommand("rm -f " + " ".join(q(f"{folder}/{f}") for f in stale))


@operation()
def gateway_checked(address: str, port: int, after_change: bool, summary: str):
    """
    After a change, wait until the gateway answers /health. If it does not (a port
    `haproxy -c` cannot know is taken, say), show its log, put the previous config back
    (`<config>.prev`, kept by config_installed) and restart on it, so the gateway that
    worked before the deploy goes on working, and fail.

    + address, port: where the gateway listens
    + after_change: whether this run changed the gateway
    + summary: the last line: what the gateway routes
    """
    if not after_change:
        host.noop(f"beekeeper: {summary} (unchanged)")
        return
    script = (
        f"for i in $(seq 40); do "
        f"if ( exec 3<>/dev/tcp/{q(address)}/{int(port)} && "
        "printf 'GET /health HTTP/1.0\\r\\n\\r\\n' >&3 && head -n1 <&3 | grep -q ' 200 ' ) "
        "2>/dev/null; "
        f"then echo {q('beekeeper: ' + summary)}; exit 0; fi; sleep 0.5; done; "
        f"journalctl -u {q(GP.unit_name)} -n 30 --no-pager; "
        f"echo {q(f'beekeeper: the gateway does not answer on {address}:{port}')} >&2; "
        f"if [ -f {q(prev(GP.config))} ]; then "
        f"cp -p {q(prev(GP.config))} {q(GP.config)} && systemctl restart {q(GP.unit_name)} && "
        f"echo {q('beekeeper: put the previous gateway config back and restarted on it')} >&2; "
        "fi; exit 1")
    yield StreamedCommand(f"bash -c {q(script)}")  # /dev/tcp is bash's


def _summary(cfg_gw: Any, routes: list[gw.Route]) -> str:
    addr = f"[{cfg_gw.bind_address}]" if ":" in cfg_gw.bind_address else cfg_gw.bind_address
    models = ", ".join(f"{r.model} ({len(r.upstreams)} server"
                       f"{'s' if len(r.upstreams) != 1 else ''})" for r in routes) or "none"
    return f"gateway on {addr}:{cfg_gw.port} routes {models}"


def ensure(cfg: HostConfig, this_host: str, inventory: Iterable[tuple[str, Any]]
           ) -> list[OperationMeta]:
    """The gateway on this host, for every service of every host in `inventory`."""
    gcfg = cfg.gateway
    assert gcfg is not None
    plan = gw.plan(this_host, inventory)
    for line in plan.left_out:
        click.echo(click.style(f"host {this_host}: gateway: left out host {line}", fg="yellow"),
                   err=True)
    ops: list[OperationMeta] = []
    if "haproxy" not in (host.get_fact(DebPackages) or {}):
        ops.append(apt.packages(name="Install HAProxy from the distro", packages=["haproxy"],
                                update=True, no_recommends=True))
    ops += [
        files.directory(name=f"Create {GP.conf_dir}", path=GP.conf_dir, mode="0755"),
        files.directory(name=f"Create {KEYS_DIR} (root-only)", path=KEYS_DIR, mode="0700",
                        user="root", group="root"),
        files.directory(name=f"Create the drop-in folder {GP.unit_name}.d (yours; never written)",
                        path=GP.dropin_dir, mode="0755"),
    ]
    changes: list[OperationMeta] = []
    if gcfg.api_key_file:
        changes.append(put_secret(name="Store the gateway's API key (root-only file)",
                                  src=gcfg.api_key_file, dest=GP.client_key))
    else:
        changes.append(files.file(name="No gateway API key: remove a stored one",
                                  path=GP.client_key, present=False))
    entries = gw.upstream_keys_map(plan.routes)
    key_names = [f"{backend}.key" for backend, _ in entries]
    for (backend, src), key_name in zip(entries, key_names, strict=True):
        changes.append(put_secret(name=f"Store the API key of model {backend} (root-only file)",
                                  src=src, dest=f"{KEYS_DIR}/{key_name}"))
    ops.append(files_pruned(name="Remove keys of models the gateway no longer routes",
                            folder=KEYS_DIR, keep=key_names))
    wanted_map = "".join(f"{b} {Path(src).read_text().strip()}\n" for b, src in entries)
    changes.append(keys_map_built(
        name="Build the backends' key map (root-only)", map_path=GP.upstream_keys,
        entries=[(b, f"{KEYS_DIR}/{k}") for (b, _), k in zip(entries, key_names, strict=True)],
        expected_sha1=sha1_text(wanted_map)))
    changes.append(files.put(name="List the gateway's models (GET /v1/models)",
                             src=io.StringIO(gw.models_json(plan.routes)),
                             dest=GP.models_json, mode="0644"))
    config = gw.render_config(gcfg, plan.routes)
    ops += changes
    ops.append(files.put(name="Stage the gateway's HAProxy config (from the inventory)",
                         src=io.StringIO(config), dest=f"{GP.config}.new", mode="0644"))
    config_op = config_installed(name="Check the config with haproxy -c and put it in place",
                                 staged=f"{GP.config}.new", dest=GP.config,
                                 expected_sha1=sha1_text(config))
    ops.append(config_op)
    unit_op = files.put(name=f"Render systemd unit {GP.unit_name}",
                        src=io.StringIO(gw.render_unit()), dest=GP.unit, mode="0644")
    ops.append(unit_op)
    changed = any(op.will_change for op in changes + [config_op])
    ops.append(systemd.service(
        name=f"Start and enable {GP.unit_name}" + (" (reload: config changed)" if changed else ""),
        service=GP.unit_name, running=True, enabled=True, daemon_reload=unit_op.will_change,
        restarted=unit_op.will_change, reloaded=changed and not unit_op.will_change))
    bind = ipaddress.ip_address(gcfg.bind_address)
    address = ("::1" if bind.version == 6 else "127.0.0.1") if bind.is_unspecified \
        else gcfg.bind_address
    ops.append(gateway_checked(
        name="Wait for the gateway's /health", address=address, port=gcfg.port,
        after_change=changed or unit_op.will_change, summary=_summary(gcfg, plan.routes)))
    return ops
