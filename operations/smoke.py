"""
The deploy gate: wait for /health and smoke-check the API on the host, roll back when the new
server fails.
"""

from __future__ import annotations

from pyinfra import host
from pyinfra.api import operation

from beekeeper.core.deployed import DeployedService
from beekeeper.core.paths import ServicePaths, bracketed, hostside_script
from beekeeper.core.runtime import Runtime
from beekeeper.facts.server import ServerSmoke, hostcheck
from beekeeper.hostside import rollback_command

from .shell import StreamedCommand, q


@operation()
def smoke_checked(port: int, paths: ServicePaths, timeout_s: int, after_change: bool,
                  runtime: Runtime, api_key_file: str | None, profile: str, bind_address: str,
                  model: str):
    """
    Wait for /health and smoke-check the API on the host. When nothing changed in this
    run, the check runs as a read-only fact and reports no change. A new server that fails
    is rolled back to the previous unit (hostside/rollback.py --restore). The last line says
    which server is serving.

    + paths: the service's host files (its unit's log is shown when a check fails)
    + timeout_s: deadline for /health to answer 200
    + after_change: whether an earlier operation of this run changes the service
    + profile, bind_address: what this deploy serves, for the last line
    + runtime: what runs the server (HostFacts.runtime: the process that must answer, and
      where its log is)
    + model: the name the server must list on /v1/models (ServiceConfig.alias)
    """
    script = hostside_script("hostcheck.py")
    now = f"{profile} on {bracketed(bind_address)}:{port}"
    # the process that must answer on the port (Runtime.owner_args) and the model it must
    # list: a server the kit did not start never passes the gate; asked where it listens (a
    # server bound to one address of the host is not on 127.0.0.1, hostcheck's default)
    owner = " ".join(q(a) for a in [*runtime.owner_args(paths), "--model", model,
                                     *DeployedService.hostcheck_host(bind_address)])
    if not after_change:
        result = host.get_fact(ServerSmoke, script=script, port=port,
                               api_key_file=api_key_file, owner=owner)
        if result and result.get("ok"):
            host.noop(f"beekeeper: serving {now}: healthy, smoke passed "
                      f"({result.get('completion_tokens')} tokens)")
            return
    check = hostcheck(script, port, timeout_s, api_key_file, owner)
    unit, log = runtime.known_by(paths), runtime.log_lines(paths, 30)
    # a server this run did not change is not rolled back: its unit is what host data asks
    # for and passed the gate when it was deployed, so the previous one is no remedy
    unchanged_failed = (f"beekeeper: deploy failed: {unit}, which this deploy did not change, "
                        "did not pass /health and smoke checks (log above); nothing rolled back")
    fail = (f"echo 'beekeeper: deploy failed: the new server did not pass /health and smoke "
            f"checks (log above)' >&2; "
            f"{rollback_command(paths, restore=True, timeout_s=timeout_s)}; exit 1"
            if after_change else
            f"echo {q(unchanged_failed)} >&2; exit 1")
    yield StreamedCommand(
        f"if {check} --out {q(paths.smoke_result)}; then "
        f"echo {q(f'beekeeper: serving {now}')}; exit 0; fi; "
        f"echo '--- last server log lines ({unit}) ---'; "
        f"{log}; {fail}"
    )

