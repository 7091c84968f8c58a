"""
Runtime "supervisor": supervisord on a host whose PID 1 is not systemd, from the controller's
own `supervisor` package, launched with the host's python3 (docs/gpu-containers.md).
"""

from __future__ import annotations

import io

from pyinfra import host
from pyinfra.facts.files import File
from pyinfra.operations import files, server

from beekeeper.core import supervisor as sv
from beekeeper.core.build import caps_run_on
from beekeeper.core.config import HostConfig
from beekeeper.core.paths import (
    LOG_DIR,
    SERVER_USER,
    SUPERVISOR_BIN,
    SUPERVISOR_CONF,
    SUPERVISOR_CONF_DIR,
    SUPERVISOR_HOME,
    SUPERVISOR_PIDFILE,
    SUPERVISOR_PROGRAMS,
    SUPERVISOR_SOCKET,
    SUPERVISORCTL,
    SUPERVISORD,
    SUPERVISORD_LOG,
    owner_mark,
    persisted_links,
    start_script,
)
from beekeeper.core.render import render
from beekeeper.facts.gpu import WSL_NVIDIA_SMI
from beekeeper.facts.hostfacts import HostFacts
from beekeeper.operations.persist import kit_folder, linked
from beekeeper.operations.supervisor import supervisord_running

from .server_image import spec_for

LIB = f"{SUPERVISOR_HOME}/lib"


def built_arch(cfg: HostConfig, facts: HostFacts) -> str | None:
    """The arch list of the host's CUDA build (None: a CPU build)."""
    spec = spec_for(cfg, facts)[0]
    return spec.cuda_arch if spec.backend == "cuda" else None


# where the kit and its users run supervisord and supervisorctl: links to the launchers
LAUNCHERS = ((SUPERVISORD, f"{SUPERVISOR_BIN}/beekeeper-supervisord", "supervisord"),
             (SUPERVISORCTL, f"{SUPERVISOR_BIN}/beekeeper-supervisorctl", "supervisorctl"))


def start(root: str | None, python: str, cuda_arch: str | None = None) -> str:
    """The start script: after a restart of the container, what brings the services back
    (the kit's links, launchers and user where the restart lost them, then supervisord);
    `python`: the launchers' python3, checked to be there; `cuda_arch`: a CUDA build's arch
    list, checked against the container's cards first."""
    return render("beekeeper-start.sh.j2", root=root, start=start_script(root), python=python,
                  arch=cuda_arch or "", caps=caps_run_on(cuda_arch) if cuda_arch else (),
                  wsl_smi=WSL_NVIDIA_SMI,
                  links=persisted_links(root) if root else [],
                  launchers=[(path, target) for path, target, _ in LAUNCHERS],
                  owner=owner_mark(root) if root else "", ctl=SUPERVISORCTL,
                  supervisord=LAUNCHERS[0][1], log=SUPERVISORD_LOG, user=SERVER_USER)


def ensure(cfg: HostConfig, facts: HostFacts, restart: bool = False) -> None:
    """supervisord installed, configured and running, and the start script a restarted
    container runs; `restart`: an earlier operation of this run stopped supervisord."""
    python = facts.tools.python3 if facts.tools else None
    assert python, "preflight refuses runtime supervisor without python3"
    tarball = sv.package_tarball()
    version = tarball.name.removeprefix("supervisor-").removesuffix(".tar.gz")
    for d in (SUPERVISOR_HOME, SUPERVISOR_BIN, SUPERVISOR_CONF_DIR, SUPERVISOR_PROGRAMS):
        files.directory(name=f"Create {d}", path=d, mode="0755")
    kit_folder(name=f"Create {LOG_DIR}", path=LOG_DIR)  # a link on a pod's root
    upload = files.put(name=f"Upload supervisor {version} (the controller's package, no index)",
                       src=str(tarball), dest=f"{SUPERVISOR_HOME}/{tarball.name}", mode="0644")
    if upload.will_change or not host.get_fact(File, path=f"{LIB}/supervisor/version.txt"):
        server.shell(name=f"Unpack supervisor {version} into {LIB}",
                     commands=[f"rm -rf {LIB}.new && mkdir -p {LIB}.new && tar -xzf "
                               f"{SUPERVISOR_HOME}/{tarball.name} -C {LIB}.new && rm -rf {LIB} && "
                               f"mv {LIB}.new {LIB}"])
    config = render("supervisord.conf.j2", socket=SUPERVISOR_SOCKET, pidfile=SUPERVISOR_PIDFILE,
                    log_dir=LOG_DIR, supervisord_log=SUPERVISORD_LOG,
                    programs=SUPERVISOR_PROGRAMS)
    conf = files.put(name=f"Render {SUPERVISOR_CONF}", src=io.StringIO(config),
                     dest=SUPERVISOR_CONF, mode="0644")
    for link, dest, tool in LAUNCHERS:
        files.put(name=f"Install the launcher {dest} ({python})",
                  src=io.StringIO(sv.launcher(tool, python, LIB)), dest=dest, mode="0755")
        linked(name=f"Link {link} to it", path=link, target=dest, keep_contents=False)
    root = facts.persistent_root
    if root:  # the server user's ids, for the start script where /etc/passwd was reset
        files.directory(
            name=f"Create {owner_mark(root)} (owned by the server's user: its ids for the "
                 "start script)", path=owner_mark(root), user=SERVER_USER, group=SERVER_USER,
            mode="0755")
    files.put(name=f"Install the start script {start_script(root)} (what the container's start "
                   "command runs after a restart)",
              src=io.StringIO(start(root, python, built_arch(cfg, facts))),
              dest=start_script(root), mode="0755")
    supervisord_running(name="Start supervisord",
                        config_changed=conf.will_change or upload.will_change or restart)
