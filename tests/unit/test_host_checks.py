"""verify/test_host.py's Docker engine check, on the engines `docker info` describes (issue 23,
point 7; issue 25, point 6): Docker Desktop is read from the engine that answers, never from
/mnt/wsl/docker-desktop, which a WSL2 distro sees whether or not it uses Desktop. The host is a
stand-in for testinfra's `host` that answers `docker info` with the real captures in
tests/unit/data (README-host-states.md says where they come from); its docker.service and
/mnt/wsl are as each case says."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from beekeeper.core.deployed import DeployedService
from beekeeper.verify import test_host as checks

from .harness import Out

DATA = Path(__file__).parent / "data"
DESKTOP = (DATA / "docker-info-desktop-wsl2.txt").read_text()
OWN_ENGINE = (DATA / "docker-info-own-engine-wsl2.txt").read_text()
CONTAINER = [DeployedService(mode="container", unit="beekeeper-llm.service")]


@dataclass
class Service:
    is_running: bool
    is_enabled: bool


@dataclass
class Dir:
    is_directory: bool


@dataclass
class Host:
    """`docker info` answers `info` (None: no engine answers, exit 1 as docker does);
    docker.service runs/is enabled as told; /mnt/wsl/docker-desktop there or not."""

    info: str | None
    docker_running: bool = False
    docker_enabled: bool = False
    mnt_wsl_desktop: bool = True
    commands: list[str] = field(default_factory=list)

    def run(self, command: str) -> Out:
        self.commands.append(command)
        if command.startswith("docker info"):
            if self.info is None:
                return Out(1, "Client:\n Context:    default\n", "Cannot connect to the "
                           "Docker daemon at unix:///var/run/docker.sock. Is the docker "
                           "daemon running?")
            return Out(0, self.info)
        raise AssertionError(f"unexpected command {command!r}")

    def service(self, name: str) -> Service:
        assert name == "docker"
        return Service(self.docker_running, self.docker_enabled)

    def file(self, path: str) -> Dir:
        return Dir(path == "/mnt/wsl/docker-desktop" and self.mnt_wsl_desktop)


def engine_check(host: Host) -> None:
    checks.test_docker_engine_running_and_enabled(host, CONTAINER)


def test_docker_desktops_engine_passes_without_a_docker_service():
    # whether or not this distro sees /mnt/wsl/docker-desktop
    for mnt in (True, False):
        engine_check(Host(DESKTOP, mnt_wsl_desktop=mnt))


def test_the_distros_own_engine_needs_docker_service_even_beside_docker_desktop():
    """A WSL2 distro running its own docker-ce, Docker Desktop installed on Windows (so
    /mnt/wsl/docker-desktop is there): docker.service must run and be enabled."""
    engine_check(Host(OWN_ENGINE, docker_running=True, docker_enabled=True))
    with pytest.raises(AssertionError, match="not enabled"):
        engine_check(Host(OWN_ENGINE, docker_running=True, docker_enabled=False))


def test_no_engine_answering_names_both_fixes():
    with pytest.raises(AssertionError) as e:
        engine_check(Host(None))
    text = str(e.value)
    assert "no Docker engine answers" in text and "systemctl enable --now docker" in text
    assert "Docker Desktop" in text


def test_the_check_reads_the_engines_own_words():
    assert checks.docker_info(Host(DESKTOP))["Server Version"] == "20.10.22"
    assert checks.is_docker_desktop(checks.docker_info(Host(DESKTOP)))
    assert not checks.is_docker_desktop(checks.docker_info(Host(OWN_ENGINE)))
    assert checks.docker_info(Host(None)) is None


def test_native_services_skip_the_engine_check():
    with pytest.raises(pytest.skip.Exception, match="no container-mode service"):
        checks.test_docker_engine_running_and_enabled(Host(None), [DeployedService(mode="native")])
