"""
Runtime "supervisor" operations: the kit's supervisord running, and one program (a model
service) started, or restarted when its inputs changed.
"""

from __future__ import annotations

from pyinfra import host
from pyinfra.api import operation

from beekeeper.core import supervisor as sv
from beekeeper.core.paths import SUPERVISORCTL, SUPERVISORD, SUPERVISORD_LOG
from beekeeper.facts.lifecycle import PresentPaths
from beekeeper.facts.toolchain import SupervisorPrograms

from .shell import q

CTL = q(SUPERVISORCTL)


@operation()
def supervisord_running(config_changed: bool = False):
    """
    Start the kit's supervisord where it does not answer; where it runs and its own
    config changed, make it read the config again (its programs keep running unless theirs
    changed too).

    + config_changed: whether this run rewrote supervisord.conf or the package
    """
    programs = host.get_fact(SupervisorPrograms)
    if programs is not None and not config_changed:
        host.noop("supervisord is running")
        return
    # read again when it runs (an earlier operation may have stopped it); else started: it
    # daemonizes, then answers on its socket (a few seconds at most)
    yield (f"if {CTL} pid >/dev/null 2>&1; then {CTL} reread && {CTL} update; exit; fi; "
           f"{q(SUPERVISORD)} && for i in $(seq 50); do {CTL} pid >/dev/null 2>&1 && "
           "exit 0; sleep 0.2; done; echo 'beekeeper: supervisord did not answer on its "
           f"socket within 10 s (log: {SUPERVISORD_LOG})' >&2; exit 1")


@operation()
def program_running(program: str, conf_changed: bool, restarted: bool):
    """
    The service's program added to supervisord and running: a new or changed program file
    is read (`update` starts a new program and restarts a changed one); inputs that changed
    outside it (a replaced model) restart it; a stopped or failed one is started.

    + conf_changed: whether this run writes its program file
    + restarted: whether an input of the server changed in this run
    """
    programs = host.get_fact(SupervisorPrograms) or {}
    state = programs.get(program)
    # STARTING: supervisord (just started by this run) is starting it, as the last command
    # below would leave it: no change either way
    if state in ("RUNNING", "STARTING") and not conf_changed and not restarted:
        host.noop(f"{program} is {state.lower()}")
        return
    p = q(program)
    if conf_changed or state is None:
        yield f"{CTL} reread >/dev/null && {CTL} update {p}"
    if restarted and state is not None and not conf_changed:
        yield f"{CTL} restart {p}"
    # whatever state it is in now (a first start, a FATAL one), it is started
    yield (f"st=$({CTL} status {p} | awk '{{print $2}}'); case \"$st\" in RUNNING|STARTING) ;; "
           f"*) {CTL} start {p} || true;; esac")


@operation()
def supervisord_removed(paths: list[str]):
    """
    The kit's supervisord stopped (its programs with it) and its files removed: the
    package, the launchers, the socket and pid file. No change where none of it is there.
    """
    running = host.get_fact(SupervisorPrograms) is not None
    present = host.get_fact(PresentPaths, paths=paths)
    if not running and not present:
        host.noop("the kit's supervisord is not here")
        return
    if running:
        # shutdown stops every program, then supervisord exits: wait for its socket to go
        yield sv.shutdown_line()
    yield "rm -rf " + " ".join(q(p) for p in paths)
