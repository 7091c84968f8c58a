"""
beekeeper: provision a GPU host, build the server, place the model, start the service
and smoke-check it.

    pyinfra inventories/home.py deploy.py
"""

import shlex
from collections.abc import Callable
from typing import Any

from pyinfra import host, state
from pyinfra.api.operation import OperationMeta
from pyinfra.context import ctx_host

from beekeeper.core.config import HostConfig, load_host_config, run_loader
from beekeeper.core.errors import ConfigError, host_data
from beekeeper.core.gateway import Plan, plan
from beekeeper.core.machines import gateway_kept_by_neighbours, kept_by_neighbours, neighbours
from beekeeper.facts.secrets import SecretFile
from beekeeper.pins import pin_model
from beekeeper.tasks import (
    container_toolkit,
    cuda_toolkit,
    docker_engine,
    engine,
    gateway,
    model,
    native,
    nvidia_driver,
    persist,
    preflight,
    prune,
    server_image,
    service,
    smoke,
    supervisor,
)
from beekeeper.tasks.hostfail import on_this_host


def deploy_host() -> None:
    """Everything for this host. Operations are only queued here (they run once every host is
    prepared), so a BeekeeperError from here means none of this host's has run."""
    artifact = ""
    model_ops: list[OperationMeta] = []
    load = run_loader(state)  # each host's data validated once a run
    cfg = load(host.data)
    hosts = [(h.name, h.data) for h in state.inventory]
    # other inventory hosts on this machine keep their services (tasks/prune.py)
    kept = kept_by_neighbours(ctx_host.get().name, hosts, load)
    gw_plan = gateway_plan(cfg, hosts, load)
    if not cfg.services:  # services = []: a gateway-only host, or one to empty
        if "service" in cfg.data.stages:
            prune.ensure(cfg, "before", kept=kept)
            prune.ensure(cfg, "after", kept=kept)
        gateway_role(cfg, gw_plan, hosts, load)
        return
    # Hub models named by a branch or without a sha256 are pinned on the controller
    if "model" in cfg.data.stages:
        cfg = load_host_config(host.data, pin=pin_model)
    # refused before any change; the tasks read what preflight resolved (runtime, CUDA, archs)
    facts = preflight.check(cfg, kept)
    check_token_file(cfg)

    # a GPU pod's persistent root: linked before anything is written there
    moved = persist.ensure(facts)
    docker_engine.ensure(cfg, facts)
    reboot_pending = nvidia_driver.ensure(cfg, facts)
    # a new driver needs a reboot before anything can use the GPU
    gpu_ops = [] if reboot_pending else (cuda_toolkit.ensure(cfg, facts)
                                         + container_toolkit.ensure(cfg, facts))

    if not reboot_pending and "build" in cfg.data.stages:
        if facts.runtime.native:
            artifact, build_ops = native.ensure(cfg, facts)  # the server binary
        else:
            artifact, build_ops = server_image.ensure(cfg, facts)  # the image tag
            container_toolkit.check_in_container(cfg, facts, artifact, gpu_ops + build_ops)
        # the built server takes every service's flags, or one line before any service changes
        engine.ensure(cfg, facts, artifact, build_ops)

    if not reboot_pending and "model" in cfg.data.stages:
        smoke.install(cfg)  # the host-side scripts: the model downloader, smoke check, rollback
        model_ops = model.ensure(cfg)

    # the services: those the inventory dropped are removed (tasks/prune.py), the kept ones
    # deployed and smoke-checked (a failed check stops the deploy, and what ran keeps running)
    if not reboot_pending and "service" in cfg.data.stages:
        prune.ensure(cfg, "before", kept=kept)
        if facts.runtime.supervised:  # `moved`: persist.ensure stopped supervisord
            supervisor.ensure(cfg, facts, restart=moved)
        persist.unsupervised(facts)
        for svc in cfg.services:
            changed = service.ensure(cfg, facts.runtime, svc, artifact, upstream=model_ops)
            smoke.check(cfg, facts.runtime, svc, changed)
        # what no rollback needs goes, once every kept service passed its smoke check
        prune.ensure(cfg, "after", artifact, kept,
                     neighbours(ctx_host.get().name, hosts, load) or [])
    gateway_role(cfg, gw_plan, hosts, load)


def check_token_file(cfg: HostConfig) -> None:
    """Host data `hf_token_file` is a non-empty file on the host readable by root alone (read
    by stat and a count of characters: the token stays on the host)."""
    path = cfg.data.hf_token_file
    if path is None or "model" not in cfg.data.stages:
        return
    info = host.get_fact(SecretFile, path=path)
    q = shlex.quote(path)
    make = (f"on the host as root (or with sudo), `install -m 600 /dev/null {q}`, then write "
            "the token into it (or remove hf_token_file)")
    if info is None:
        problem, fix = (f"{path} could not be read on the host", "connect as root, or let "
                        "the login run `sudo -n true`")
    elif info.kind == "missing":
        problem, fix = f"{path} is not on the host (the model download reads it there)", make
    elif info.kind != "file":
        problem, fix = (f"{path} on the host is a folder" if info.kind == "folder" else
                        f"{path} on the host is not a regular file"), \
            "point it at the file that holds the token"
    elif not info.readable:  # the token may be there: never the empty file `make` writes
        problem, fix = (f"{path} on the host is unreadable",
                        f"on the host as root, `chown root {q} && chmod 600 {q}`")
    elif info.chars == 0:
        problem, fix = f"{path} on the host is empty", make
    elif info.mode & 0o077:
        problem, fix = (f"{path} on the host is readable by others (mode {info.mode:o})",
                        f"on the host as root (or with sudo), `chmod 600 {q}`")
    else:
        return
    raise ConfigError(host_data("hf_token_file"), problem, fix)


def gateway_role(cfg: HostConfig, gw_plan: Plan | None, hosts: list[tuple[str, Any]],
                 load: Callable[[Any], HostConfig]) -> None:
    """The gateway (host data `gateway`, routing `gw_plan`); where host data has none, one an
    earlier deploy put there goes, unless another inventory host on this machine has one."""
    if "service" not in cfg.data.stages:
        return
    if gw_plan is not None:
        gateway.ensure(cfg, gw_plan)
    elif gateway_kept_by_neighbours(ctx_host.get().name, hosts, load) is False:
        gateway.removed()


def gateway_plan(cfg: HostConfig, hosts: list[tuple[str, Any]],
                 load: Callable[[Any], HostConfig]) -> Plan | None:
    """The routes of this host's gateway (host data `gateway`), None where it has none. One
    with no service to route on any inventory host is refused before anything of this host
    runs: it would answer every request with 503."""
    if cfg.data.gateway is None or "service" not in cfg.data.stages:
        return None
    gw_plan = plan(ctx_host.get().name, hosts, load)
    if not gw_plan.routes:
        left = f" (left out, with bad data: {'; '.join(gw_plan.left_out)})" \
            if gw_plan.left_out else ""
        raise ConfigError(
            host_data("gateway"),
            f"no inventory host has a service for this gateway to route{left}",
            "give this or another inventory host a service, or remove `gateway`")
    return gw_plan


on_this_host(deploy_host)
