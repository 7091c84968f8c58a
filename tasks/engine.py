"""
Engine check: the server built takes every service's profile flags, read from its own `--help`
(core/engine_flags.py), before any service changes (docs/lifecycle.md).
"""

from __future__ import annotations

from collections.abc import Callable

import click
from pyinfra import host
from pyinfra.api.host import Host
from pyinfra.api.operation import OperationMeta
from pyinfra.operations import python

from beekeeper.core.config import HostConfig
from beekeeper.core.engine_flags import extra_warning, parse_help, refusal, unaccepted
from beekeeper.core.errors import PreflightError
from beekeeper.facts.engine import ServerHelp
from beekeeper.facts.hostfacts import HostFacts

from .hostfail import failures
from .say import warn
from .service import server_args


def reader(facts: HostFacts, artifact: str, gpu: bool) -> dict[str, object]:
    """ServerHelp's arguments for the artifact built: the binary (native), or the image's."""
    binary, image = facts.runtime.server_at(artifact)
    return {"binary": binary, "image": image, "gpu": gpu}


def judged(cfg: HostConfig, facts: HostFacts, text: str | None,
           warned: Callable[[str], None]) -> PreflightError | None:
    """The first service whose profile flags the server's `--help` text refuses, as its one
    line (None: all taken, or no options listed); what else to tell goes to `warned`."""
    offered = parse_help(text) if text else None
    if offered is None:
        # a server whose --help lists no option (or hangs, or is gone)
        warned("the built server's --help listed no options, so its flags are not checked "
               "(the smoke check judges the server)")
        return None
    built = f"source.ref {cfg.source.ref[:12]}"
    for svc in cfg.services:
        # what a refusal names: the profile, and the service where the host has several
        who = f"profile `{svc.profile.name}`"
        who = f"service `{svc.name}` ({who})" if len(cfg.services) > 1 else who
        args = server_args(cfg, facts.runtime, svc)
        kit = args[:len(args) - len(svc.data.server_extra_args)]
        told = extra_warning(who, built,
                             unaccepted(svc.data.server_extra_args, offered, check_values=False))
        if told:
            warned(told)
        refused = refusal(who, built, svc.profile.name,
                          svc.profile.engine_refs, unaccepted(kit, offered))
        if refused is not None:
            return refused
    return None


def ensure(cfg: HostConfig, facts: HostFacts, artifact: str,
           build_ops: list[OperationMeta]) -> None:
    """A server built before this run is read now, before any change (a refusal stops the
    host here, and a dry run says it); one this run builds is read after its build, by an
    operation that fails the host before any service changes."""
    gpu = any(s.profile.backend == "cuda" for s in cfg.services)
    reads = reader(facts, artifact, gpu)
    if not any(op.will_change for op in build_ops):
        refused = judged(cfg, facts, host.get_fact(ServerHelp, **reads), warn)
        if refused is not None:
            raise refused
        return
    names = ", ".join(sorted({s.profile.name for s in cfg.services}))
    python.call(
        name=f"Check that the server built from {cfg.source.ref[:12]} takes the flags of "
             f"{names} (its --help, before any service changes)",
        function=after_build(cfg, facts, reads))


def after_build(cfg: HostConfig, facts: HostFacts,
                reads: dict[str, object]) -> Callable[[object, Host], bool]:
    """What pyinfra runs once the build is done (a closure, so the command pyinfra shows is its
    name, not the host's data): a refusal is the red line naming the host, and it fails."""

    def check_flags(state: object, host: Host) -> bool:
        refused = judged(cfg, facts, host.get_fact(ServerHelp, **reads),
                         lambda line: warn(line, host.name))
        if refused is None:
            return True
        failures()[host.name] = f"host facts: {refused}"
        click.echo(click.style(f"host {host.name}: {refused}", fg="red"), err=True)
        return False

    return check_flags
