"""
Runtime "supervisor": supervisord on a host whose PID 1 is not systemd, from the controller's
own `supervisor` package (beekeeper/core/supervisor.py): uploaded, unpacked, launched with the
host's python3. Nothing comes from a package index.
"""

from __future__ import annotations

import io

from pyinfra import host
from pyinfra.api.operation import OperationMeta
from pyinfra.facts.files import File
from pyinfra.operations import files, server

from beekeeper.core import supervisor as sv
from beekeeper.core.paths import (
    LOG_DIR,
    SUPERVISOR_CONF,
    SUPERVISOR_CONF_DIR,
    SUPERVISOR_HOME,
    SUPERVISOR_PIDFILE,
    SUPERVISOR_PROGRAMS,
    SUPERVISOR_SOCKET,
    SUPERVISORCTL,
    SUPERVISORD,
)
from beekeeper.core.render import render
from beekeeper.facts.hostfacts import HostFacts
from beekeeper.operations.supervisor import supervisord_running

LIB = f"{SUPERVISOR_HOME}/lib"


def config() -> str:
    return render("supervisord.conf.j2", socket=SUPERVISOR_SOCKET, pidfile=SUPERVISOR_PIDFILE,
                  log_dir=LOG_DIR, programs=SUPERVISOR_PROGRAMS)


def ensure(facts: HostFacts) -> list[OperationMeta]:
    """supervisord installed, configured and running (preflight found python3 >= 3.8)."""
    python = facts.tools.python3 if facts.tools else None
    assert python, "preflight refuses runtime supervisor without python3"
    tarball = sv.package_tarball()
    version = tarball.name.removeprefix("supervisor-").removesuffix(".tar.gz")
    ops: list[OperationMeta] = [
        files.directory(name=f"Create {d}", path=d, mode="0755")
        for d in (SUPERVISOR_HOME, SUPERVISOR_CONF_DIR, SUPERVISOR_PROGRAMS, LOG_DIR)
    ]
    upload = files.put(name=f"Upload supervisor {version} (the controller's package, no index)",
                       src=str(tarball), dest=f"{SUPERVISOR_HOME}/{tarball.name}", mode="0644")
    ops.append(upload)
    if upload.will_change or not host.get_fact(File, path=f"{LIB}/supervisor/version.txt"):
        ops.append(server.shell(
            name=f"Unpack supervisor {version} into {LIB}",
            commands=[f"rm -rf {LIB}.new && mkdir -p {LIB}.new && tar -xzf "
                      f"{SUPERVISOR_HOME}/{tarball.name} -C {LIB}.new && rm -rf {LIB} && "
                      f"mv {LIB}.new {LIB}"]))
    conf = files.put(name=f"Render {SUPERVISOR_CONF}", src=io.StringIO(config()),
                     dest=SUPERVISOR_CONF, mode="0644")
    ops.append(conf)
    for tool, dest in (("supervisord", SUPERVISORD), ("supervisorctl", SUPERVISORCTL)):
        ops.append(files.put(name=f"Install the launcher {dest} ({python})",
                             src=io.StringIO(sv.launcher(tool, python, LIB)), dest=dest,
                             mode="0755"))
    ops.append(supervisord_running(
        name="Start supervisord (what the container's start command runs after a restart: "
             f"{SUPERVISORD})",
        config_changed=conf.will_change or upload.will_change))
    return ops
