"""
beekeeper: provision a GPU host, build the server, place the model, start the service
and smoke-check it.

    pyinfra inventories/home.py deploy.py
"""

import atexit
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import click
from pyinfra import host, state
from pyinfra.api.exceptions import DeployError
from pyinfra.api.operation import OperationMeta
from pyinfra.context import ctx_host

from beekeeper.core.config import HostConfig, load_host_config
from beekeeper.core.errors import BeekeeperError, ConfigError
from beekeeper.core.gateway import plan
from beekeeper.core.hostdata import redact
from beekeeper.core.machines import kept_by_neighbours
from beekeeper.facts.hostfacts import HostFacts
from beekeeper.facts.secrets import SecretFile
from beekeeper.pins import pin_all
from beekeeper.tasks import (
    container_toolkit,
    cuda_toolkit,
    docker_engine,
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
from beekeeper.tasks.driver_preflight import archs_of_cards


def deploy_host() -> None:
    """Everything for this host. A BeekeeperError from here means no operation of this host
    has run yet: operations are only queued now, and run once every host is prepared."""
    artifact = ""
    model_ops: list[OperationMeta] = []
    # Bad host data stops here, with one line naming the key and the fix: nothing has run yet.
    cfg = load_host_config(host.data)
    hosts = [(h.name, h.data) for h in state.inventory]
    # other inventory hosts on this machine keep their services (tasks/prune.py)
    cfg = replace(cfg, kept_by_neighbours=kept_by_neighbours(ctx_host.get().name, hosts))
    gateway_has_backends(cfg, hosts)
    if not cfg.services:  # services = []: a gateway-only host, or one to empty
        if "service" in cfg.stages:
            prune.ensure(cfg, "before")
            prune.ensure(cfg, "after")
        gateway_role(cfg, hosts)
        return
    # Hub models named by a branch or without a sha256 are pinned once, on the controller.
    if "model" in cfg.stages:
        cfg = pin_all(cfg)
    # Host facts that rule the deploy out stop here too, before any change.
    facts = preflight.check(cfg)
    check_token_file(cfg)
    # what preflight chose from the host: the runtime (supervisor where PID 1 is not
    # systemd), and the host's own CUDA toolkit where it builds for the card
    # and, on a host of cards of more than one arch (a 4090 and a 3090), a build for each
    cfg = replace(cfg, runtime=facts.runtime, cuda_version=facts.cuda_version or cfg.cuda_version,
                  cuda_arch=archs_of_cards(cfg, facts.gpu))

    # a GPU pod's persistent root: the kit's folders are links into it before anything is
    # written there (tasks/persist.py)
    moved, _ = persist.ensure(facts)
    docker_engine.ensure(cfg, facts)
    reboot_pending, _ = nvidia_driver.ensure(cfg, facts)
    # a new driver needs a reboot before anything can use the GPU
    gpu_ops = [] if reboot_pending else (cuda_toolkit.ensure(cfg, facts)
                                         + container_toolkit.ensure(cfg, facts))

    if not reboot_pending and "build" in cfg.stages:
        if cfg.mode == "native":
            artifact, build_ops = native.ensure(cfg, facts)  # the server binary
        else:
            artifact, build_ops = server_image.ensure(cfg, facts)  # the image tag
            container_toolkit.check_in_container(cfg, facts, artifact, gpu_ops + build_ops)

    if not reboot_pending and "model" in cfg.stages:
        model_ops = model.ensure(cfg)

    if not reboot_pending and "service" in cfg.stages:
        services(cfg, facts, artifact, model_ops, moved)
    gateway_role(cfg, hosts)


def services(cfg: HostConfig, facts: HostFacts, artifact: str, model_ops: list[OperationMeta],
             supervisord_stopped: bool) -> None:
    """The inventory is the truth: services it dropped are removed, those whose port a kept
    service takes before it starts, the others once every kept one passed its smoke check
    (a failed check stops the deploy there, and what ran keeps running)."""
    prune.ensure(cfg, "before")
    if cfg.runtime == "supervisor":
        supervisor.ensure(facts, restart=supervisord_stopped)
    smoke.install()
    persist.unsupervised(facts)
    for svc in cfg.services:
        changed, _ = service.ensure(cfg, svc, artifact, upstream=model_ops)
        smoke.check(cfg, svc, changed)
    # what no rollback needs goes, once every kept service passed its smoke check
    prune.ensure(cfg, "after", artifact)


def check_token_file(cfg: HostConfig) -> None:
    """Host data `hf_token_file`, a root-only file on the host that the model download reads:
    there, a file, not empty and readable by root alone, or one line before any change
    (read by stat and a count of characters: the token stays on the host)."""
    path = cfg.hf_token_file
    if path is None or "model" not in cfg.stages:
        return
    info = host.get_fact(SecretFile, path=path)
    make = (f"on the host, `sudo install -m 600 /dev/null {path}`, then write the token into "
            "it (or remove hf_token_file)")
    if info is None:
        problem, fix = (f"{path} could not be read on the host", "connect as root, or let "
                        "the login run `sudo -n true`")
    elif info.kind == "missing":
        problem, fix = f"{path} is not on the host (the model download reads it there)", make
    elif info.kind != "file":
        problem, fix = (f"{path} on the host is a folder" if info.kind == "folder" else
                        f"{path} on the host is not a regular file"), \
            "point it at the file that holds the token"
    elif not info.readable or info.chars == 0:
        problem, fix = f"{path} on the host is {'empty' if info.readable else 'unreadable'}", make
    elif info.mode & 0o077:
        problem, fix = (f"{path} on the host is readable by others (mode {info.mode:o})",
                        f"on the host, `sudo chmod 600 {path}`")
    else:
        return
    raise ConfigError(f"host data `hf_token_file`: {problem}; fix: {fix}")


def gateway_role(cfg: HostConfig, hosts: list[tuple[str, Any]]) -> None:
    """The gateway (host data `gateway`): every service of every inventory host, by model."""
    if cfg.gateway is not None and "service" in cfg.stages:
        gateway.ensure(cfg, ctx_host.get().name, hosts)


def gateway_has_backends(cfg: HostConfig, hosts: list[tuple[str, Any]]) -> None:
    """A gateway (host data `gateway`) with no service to route on any inventory host is
    refused before anything of this host runs: it would answer every request with 503."""
    if cfg.gateway is None or "service" not in cfg.stages:
        return
    gw_plan = plan(ctx_host.get().name, hosts)
    if not gw_plan.routes:
        left = f" (left out, with bad data: {'; '.join(gw_plan.left_out)})" \
            if gw_plan.left_out else ""
        raise ConfigError(
            "host data `gateway`: no inventory host has a service for this gateway to route"
            f"{left}; fix: give this or another inventory host a service, or remove `gateway`")


def failures() -> dict[str, str]:
    """Why each host failed while its operations were prepared (this run's State keeps it),
    printed as one line a host when the run ends."""
    found: dict[str, str] | None = getattr(state, "beekeeper_failures", None)
    if found is None:
        found = {}
        setattr(state, "beekeeper_failures", found)  # noqa: B010 - pyinfra's State, one run
        if "pyinfra_cli" in sys.modules:  # the pyinfra command, not a test preparing hosts
            atexit.register(print_summary, state, found)
    return found


def print_summary(run: Any, found: dict[str, str]) -> None:
    """The run's last lines: each failed host and why (host data, host facts, unreachable,
    or an operation that failed, as pyinfra printed above)."""
    failed = sorted({*run.failed_hosts, *(h for h in run.inventory if h.name in found)},
                    key=lambda h: h.name)
    if not failed:
        return
    total = len(run.inventory)
    click.echo(click.style(f"beekeeper: {len(failed)} of {total} hosts failed:", fg="red"),
               err=True)
    for h in failed:
        why = found.get(h.name) or ("unreachable: pyinfra could not connect to it"
                                    if h not in run.activated_hosts or not h.connected
                                    else "an operation failed (its error is above)")
        click.echo(click.style(f"  host {h.name}: {why}", fg="red"), err=True)


def fail_this_host(error: BeekeeperError) -> None:
    """One host's bad data or preflight refusal fails that host only, as an unreachable
    host does: the line names it, pyinfra marks it failed (no operation of it runs, the exit
    status is 1), and the other hosts go on. pyinfra 3.10 has no per-host failure while it
    prepares operations (an exception there stops every host), so deploy.py marks it with
    state.fail_hosts, the call pyinfra itself uses for a host that cannot connect."""
    this = ctx_host.get()  # the Host itself: `host` is only pyinfra's proxy to it
    message = redact(f"host {this.name}: {error}")
    kind = "host data" if isinstance(error, ConfigError) else \
        "a bug in beekeeper" if isinstance(error, KitBug) else "host facts"
    failures()[this.name] = f"{kind}: {error}"
    if not state.active_hosts - {this}:  # the last host left: fail the run with the line
        # the same error, also a DeployError: pyinfra prints it as one red line
        raise type(type(error).__name__, (type(error), DeployError), {})(message) from None
    click.echo(click.style(message, fg="red"), err=True)
    state.fail_hosts({this})


class KitBug(BeekeeperError):
    """An error that is not one of the kit's own refusals, raised while this host's
    operations were prepared (a ValueError from a parser, a fact value nobody expected): a
    bug in beekeeper. It fails this host alone, as a refusal does, with one line."""

    @classmethod
    def of(cls, error: Exception) -> "KitBug":
        """The one line: the error, where in the kit it was raised, and what it is."""
        import traceback

        frames = [f for f in traceback.extract_tb(error.__traceback__)
                  if "beekeeper" in f.filename or f.filename.endswith("deploy.py")]
        where = f" (at {Path(frames[-1].filename).name}:{frames[-1].lineno})" if frames else ""
        text = str(error).strip().splitlines()
        said = text[0][:200] + ("..." if len(text) > 1 or len(text[0]) > 200 else "") \
            if text else ""
        return cls(redact(f"{type(error).__name__}: {said}{where}; this is a bug in "
                          "beekeeper: please report it with this line (the other hosts go on)"))


try:
    deploy_host()
except BeekeeperError as e:
    fail_this_host(e)
except Exception as e:  # noqa: BLE001 - any other error is the kit's bug, on this host only
    fail_this_host(KitBug.of(e))
