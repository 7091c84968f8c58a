"""
The four ways the kit runs a server (a systemd unit around `docker run`, around a compose
project or around the native binary, or a supervisord program), each written once. Preflight
picks one per host (HostFacts.runtime); tasks ask it instead of `mode` and `runtime`.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass

from .container import IMAGE, model_path
from .deployed import DeployedService
from .distro import compose_package, engine_packages
from .paths import SUPERVISORCTL, SUPERVISORD_LOG, ServicePaths
from .profiles import ModelFile

ACTIONS = ("start", "stop", "restart")


@dataclass(frozen=True)
class Runtime:
    name: str  # as the docs say it (the record keeps `recorded`)
    mode: str  # host data `mode`: "container" or "native"
    runtime: str  # host data `runtime`: "systemd", "compose" or "supervisor"
    template: str  # the unit or program file's template (templates/)
    compose: bool = False  # a compose file beside the unit (its project is the container)
    ctl: str = "systemctl"  # what starts, stops and restarts it

    @property
    def supervised(self) -> bool:
        """supervisord runs it (no systemd: GPU containers, rented pods)."""
        return self.runtime == "supervisor"

    @property
    def native(self) -> bool:
        """The server is built on the host and runs there (no container)."""
        return self.mode == "native"

    @property
    def container(self) -> bool:
        """The server runs in a container the kit built (Docker on the host)."""
        return self.mode == "container"

    @property
    def needs_docker(self) -> bool:
        """Docker's engine runs the server's container (docker_packages, docker_services)."""
        return self.container

    @property
    def needs_compose_plugin(self) -> bool:
        """Docker's compose v2 plugin (`docker compose`) runs the project."""
        return self.compose

    @property
    def builds_image(self) -> bool:
        """The build stage builds the server's image (docker build on the host)."""
        return self.container

    @property
    def builds_on_host(self) -> bool:
        """The build stage compiles the server on the host itself (cmake, a compiler, CUDA)."""
        return self.native

    @property
    def checks_require_cuda(self) -> bool:
        """The NVIDIA container runtime judges the image's NVIDIA_REQUIRE_CUDA against the
        driver; natively minor version compatibility applies instead."""
        return self.container

    @property
    def follows_driver(self) -> bool:
        """Host data cuda_follows_driver applies (a native build has no such check to pass)."""
        return self.checks_require_cuda

    @property
    def protects_home(self) -> bool:
        """Its unit runs the server with ProtectHome=yes: a model file in /home, /root or
        /run/user could never be opened."""
        return self.native and not self.supervised

    @property
    def under_systemd(self) -> bool:
        """systemd runs it as a unit (no systemd unit, a gateway's HAProxy, runs beside the
        kit's supervisord)."""
        return not self.supervised

    @property
    def restarts_with_host(self) -> bool:
        """The host starts the server again after it restarts (supervisord: only the pod's
        start command running the start script, host data persistent_root)."""
        return not self.supervised

    @property
    def without_systemd(self) -> Runtime | None:
        """The way this one runs where PID 1 is not systemd: supervisor for the native server;
        None for a container (Docker's engine needs systemd)."""
        return next((r for r in RUNTIMES if r.mode == self.mode and r.supervised), None)

    def runs_process(self, under_supervisord: bool, in_unit: bool) -> bool:
        """Whether a process is the service's server: under supervisord, or in the unit."""
        return under_supervisord if self.supervised else in_unit

    @property
    def env_quoted(self) -> bool:
        """compose parses env files (quotes, `$`); `docker run --env-file` takes them as they
        are (secrets_env)."""
        return self.compose

    def env_carries(self, value: str) -> bool:
        """Whether this way's env file carries `value` literally: compose's single quotes hold
        no ' or \\; the native unit's EnvironmentFile (systemd reads it unquoted) takes a
        \\ as an escape and a leading quote as quoting. supervisord's launcher reads the key
        file itself (`read -r`), `docker run --env-file` takes the line as it is."""
        if self.env_quoted:
            return not any(c in value for c in "'\\")
        if self.native and self.under_systemd:
            return "\\" not in value and not value.startswith(("'", '"'))
        return True

    @property
    def runs(self) -> str:
        """What it runs, in words."""
        return "a container" if self.container else "the native server"

    @property
    def recorded(self) -> str | None:
        """The runtime as the deployment record names it (None: a native systemd unit)."""
        return self.runtime if self.mode == "container" or self.supervised else None

    def model_arg(self, m: ModelFile, model_dir: str) -> str:
        """Where the server finds model file `m`: on the host, or in the container's mount."""
        return m.host_path(model_dir) if self.native else model_path(m.filename)

    def serves_from(self, folder: str, model_dir: str) -> bool:
        """Whether the server opens a model file in the host's `folder` (a container: model_dir)."""
        return self.native or folder == model_dir

    def server_at(self, artifact: str) -> tuple[str, str | None]:
        """The built server (`artifact`: a binary or an image tag) as (binary, image or None)."""
        return (artifact, None) if self.native else (IMAGE.entrypoint[0], artifact)

    def docker_packages(self, os_release: Mapping[str, str], engine_present: bool,
                        flavour: str | None, compose_version: str | None) -> list[str]:
        """The distro packages of Docker this way needs that the host lacks: the engine (and
        its client), compose's plugin where `docker compose` answers no version."""
        engine = engine_packages(os_release) if self.needs_docker and not engine_present else []
        plugin = ([str(compose_package(os_release, flavour))]
                  if self.needs_compose_plugin and compose_version is None else [])
        return engine + plugin

    def docker_services(self, flavour: str | None) -> list[str]:
        """The host's systemd services this way needs running (none under Docker Desktop)."""
        return ["docker.service"] if self.needs_docker and flavour != "docker-desktop" else []

    def dropins(self, p: ServicePaths) -> list[str]:
        """The user's drop-in folder beside the unit: created, never written."""
        return [p.dropin_dir] if self.under_systemd else []

    def overrides(self, p: ServicePaths) -> list[str]:
        """The user's override beside the compose file: created empty, never written."""
        return [p.compose_override] if self.compose else []

    def unit_file(self, p: ServicePaths) -> str:
        """The file that runs the service: the systemd unit, or the supervisord program."""
        return p.program_conf if self.supervised else p.unit

    def known_by(self, p: ServicePaths) -> str:
        """What the runtime knows the service by: a systemd unit, or a supervisord program."""
        return p.program if self.supervised else p.unit_name

    def described(self, p: ServicePaths) -> str:
        return (f"supervisord program {p.program}" if self.supervised
                else f"systemd unit {p.unit_name}")

    def log(self, p: ServicePaths) -> str | None:
        """The server's own log file (supervisord writes it); None: the journal."""
        return p.server_log if self.supervised else None

    def compose_file(self, p: ServicePaths) -> str | None:
        return p.compose_file if self.compose else None

    def tell(self, name: str, action: str) -> str:
        """The shell line that does `action` to what this runtime knows as `name`."""
        if action not in ACTIONS:
            raise ValueError(f"not an action: {action!r}")
        return f"{shlex.quote(self.ctl)} {action} {shlex.quote(name)}"

    def log_said(self, p: ServicePaths) -> str:
        """Where the server's own output is, as a person is told it."""
        log = self.log(p)
        return (f"{log} (and {SUPERVISORCTL} status {p.program})" if log is not None
                else f"journalctl -u {p.unit_name}")

    def log_lines(self, p: ServicePaths, n: int) -> str:
        """The shell line that prints the server's last `n` log lines."""
        log = self.log(p)
        return (f"tail -n {n} {shlex.quote(log)}" if log is not None
                else f"journalctl -u {shlex.quote(p.unit_name)} -n {n} --no-pager")

    def owner_args(self, p: ServicePaths) -> list[str]:
        """hostside/hostcheck.py's arguments naming the process that must answer on the port."""
        if self.supervised:
            return ["--program", p.program, "--supervisorctl", SUPERVISORCTL,
                    "--supervisord-log", SUPERVISORD_LOG]
        return ["--unit", p.unit_name, *(["--container", p.container] if self.container else [])]


RUNTIMES: tuple[Runtime, ...] = (
    Runtime("docker unit", "container", "systemd", "beekeeper-server.service.j2"),
    Runtime("compose", "container", "compose", "beekeeper-compose.service.j2", compose=True),
    Runtime("native unit", "native", "systemd", "beekeeper-native.service.j2"),
    Runtime("supervisor", "native", "supervisor", "supervisor-program.conf.j2",
            ctl=SUPERVISORCTL),
)


def runtime_of(mode: str, runtime: str) -> Runtime:
    """The way a host of this `mode` and `runtime` runs its server."""
    for r in RUNTIMES:
        if (r.mode, r.runtime) == (mode, runtime):
            return r
    raise ValueError(f"no way to run a server with mode {mode!r} and runtime {runtime!r}")


def requested(mode: str, runtime: str | None, docker_desktop: bool = False) -> Runtime:
    """The way host data asks for; with no `runtime`, compose for a container under Docker
    Desktop (which always has compose v2), else systemd. ValueError: no such way."""
    if runtime is None:
        runtime = "compose" if docker_desktop and mode == "container" else "systemd"
    return runtime_of(mode, runtime)


def ways_named(runtime: str) -> tuple[Runtime, ...]:
    """The ways host data's `runtime` names."""
    return tuple(r for r in RUNTIMES if r.runtime == runtime)


def recorded_runtime(dep: DeployedService) -> Runtime:
    """The way a deployment record's service runs (its `runtime` None: a systemd unit)."""
    return runtime_of(dep.mode, dep.runtime or "systemd")
