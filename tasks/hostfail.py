"""
One host's failure, for deploy.py and uninstall.py alike: any error while pyinfra prepares a
host's operations fails that host alone, redacted, and is named again in the run's summary
(docs/architecture.md, "One host's problem stops only that host").
"""

from __future__ import annotations

import atexit
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from pyinfra import state
from pyinfra.api.arguments import pop_global_arguments
from pyinfra.api.exceptions import DeployError
from pyinfra.context import ctx_host
from pyinfra.facts.server import Command, Which

from beekeeper.core.errors import BeekeeperError, ConfigError, PreflightError, Refusal, rebuilt
from beekeeper.core.redact import redact

# the entry points whose frames are named in a bug's line, beside the kit's own modules
ENTRY_POINTS = ("deploy.py", "uninstall.py")


def on_this_host(prepare: Callable[[], None]) -> None:
    """Prepare this host's operations; any error fails this host alone: the kit's own as it
    is, any other as KitBug."""
    try:
        root_is_there()
        prepare()
    except BeekeeperError as e:
        fail_this_host(e)
    except Exception as e:  # noqa: BLE001 - any other error is the kit's bug, on this host only
        fail_this_host(KitBug.of(e))


class HostCommandFailed(Refusal):
    """pyinfra failed the host itself: a fact's command failed there, printed above."""


# the login's name, nothing where its uid has none (a container run with --user 12345): a
# fact whose command failed would fail the host before the one line that says why
LOGIN_NAME = "id -un 2>/dev/null; true"


def root_is_there() -> None:
    """The kit's commands run as root (asked before any other command, without sudo): where
    pyinfra is told to reach root through sudo, sudo is there, else every command would fail
    with `sudo: not found`; where nothing asks for sudo (or su, doas), the login is root,
    else the dry run would list every change and the run fail on its first (`groupadd:
    Permission denied`)."""
    this = ctx_host.get()
    wanted, _ = pop_global_arguments(state, this, {})
    if wanted.get("_su_user") or wanted.get("_doas"):
        return
    if not wanted.get("_sudo"):
        uid = (this.get_fact(Command, command="id -u", _sudo=False) or "").strip()
        if uid.isdigit() and uid != "0":
            user = (this.get_fact(Command, command=LOGIN_NAME, _sudo=False) or "").strip()
            who = f"{user} (uid {uid})" if user else f"uid {uid}"
            raise PreflightError("login", f"{who} is not root, and nothing "
                                 "asks for sudo: the kit's commands need root", "run pyinfra "
                                 "with --sudo, or log in as root", lead=" ")
        return
    if this.get_fact(Which, command="sudo", _sudo=False):
        return
    uid = (this.get_fact(Command, command="id -u", _sudo=False) or "").strip()
    by = "`--sudo`" if state.config.SUDO else "host data `_sudo`"
    drop = ("run pyinfra without --sudo" if state.config.SUDO
            else "remove `_sudo` from its host data")
    if uid == "0":
        raise PreflightError("sudo", f"is not installed on {this.name}, and {by} asks for it: "
                             "you are root there already", drop, lead=" ")
    user = (this.get_fact(Command, command=LOGIN_NAME, _sudo=False) or "").strip() or \
        f"uid {uid or '?'}"
    raise PreflightError("sudo", f"is not installed on {this.name}, and {by} asks for it to "
                         f"become root ({user} is not root)", "install sudo there, or log "
                         f"in as root and {drop}", lead=" ")


def in_the_pyinfra_command() -> bool:
    """This run is the pyinfra command, not a caller of pyinfra's API (a test preparing hosts)."""
    return "pyinfra_cli" in sys.modules


def failures() -> dict[str, str]:
    """Why each host failed while its operations were prepared (kept on this run's State)."""
    found: dict[str, str] | None = getattr(state, "beekeeper_failures", None)
    if found is None:
        found = {}
        setattr(state, "beekeeper_failures", found)  # noqa: B010 - pyinfra's State, one run
        if in_the_pyinfra_command():
            atexit.register(print_summary, state, found)
    return found


def print_summary(run: Any, found: dict[str, str]) -> None:
    """The run's last lines: each failed host and why (host data, host facts, a bug,
    unreachable, or an operation that failed, as pyinfra printed above)."""
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
    """Fail this host only, as pyinfra fails an unreachable one; the last host left ends the
    run instead (the pyinfra command: exit 1, the summary says why; pyinfra's API: the line
    raised)."""
    this = ctx_host.get()  # the Host itself: `host` is only pyinfra's proxy to it
    if isinstance(error, KitBug) and this in state.failed_hosts:
        # pyinfra failed the host first (a fact's command failed there, its error printed
        # above; on the last host left it then raised 'No hosts remaining!'): not the kit's bug
        error = HostCommandFailed(
            "a command pyinfra ran on the host", "failed (pyinfra's error above names it; "
            "`-vv` shows the command)", "what that error says, then run again", lead=" ")
    said = redact(str(error))
    message = f"host {this.name}: {said}"
    # the summary's line says what kind of failure it was (a bug's line says so itself)
    kind = "host data" if isinstance(error, ConfigError) else "host facts"
    failures()[this.name] = said if isinstance(error, KitBug) or said.startswith(kind) \
        else f"{kind}: {said}"
    if not state.active_hosts - {this}:  # the last host left: the run ends
        if in_the_pyinfra_command():  # the summary at its exit says why, once (an error
            # raised here, pyinfra would print first, after "pyinfra error in" this file's path)
            raise SystemExit(1)
        # a caller of pyinfra's API gets the line as pyinfra's DeployError, its type and what
        # it holds (a refusal's subject, problem and fix) kept
        both: type[BeekeeperError] = type(type(error).__name__, (type(error), DeployError), {})
        raise rebuilt(both, message, vars(error)) from None
    going_on = " (the other hosts go on)" if isinstance(error, KitBug) else ""
    click.echo(click.style(message + going_on, fg="red"), err=True)
    state.fail_hosts({this})


class KitBug(BeekeeperError):
    """An error that is not one of the kit's own refusals, raised while this host's
    operations were prepared: a bug in beekeeper."""

    @classmethod
    def of(cls, error: Exception) -> KitBug:
        """The one line: the error, where in the kit it was raised, and what it is."""
        frames = [f for f in traceback.extract_tb(error.__traceback__)
                  if "beekeeper" in f.filename or f.filename.endswith(ENTRY_POINTS)]
        where = f" (at {Path(frames[-1].filename).name}:{frames[-1].lineno})" if frames else ""
        text = str(error).strip().splitlines()
        said = text[0][:200] + ("..." if len(text) > 1 or len(text[0]) > 200 else "") \
            if text else ""
        return cls(redact(f"{type(error).__name__}: {said}{where}; this is a bug in "
                          "beekeeper: please report it with this line"))
