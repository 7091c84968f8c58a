"""
Facts about the Docker engine and images.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from pyinfra.api import FactBase

from beekeeper.core.container import SERVICE_LABEL, gpu_in_container_command
from beekeeper.core.docker_info import is_docker_desktop, parse_docker_info

from . import ListFact


@dataclass(frozen=True)
class DockerEngineInfo:
    """
    The Docker engine on the host. `flavour`: "docker-ce", "distro" (docker.io),
    "docker-desktop", "snap", "unknown", or None when there is no docker CLI.
    """

    present: bool = False
    path: str | None = None
    flavour: str | None = None
    server_version: str | None = None  # None: no engine answered `docker info`
    root_dir: str | None = None  # `Docker Root Dir`: where images and build layers go
    proxy: bool = False  # the engine pulls through a proxy (`HTTP Proxy`/`HTTPS Proxy`)
    nvidia_runtime: bool = False
    # a docker link on PATH whose target is not there (Docker Desktop's WSL integration's link
    # into its cli-tools, left dangling): the link's own path
    dangling_link: str | None = None


def parse_docker_engine(output: list[str]) -> DockerEngineInfo:
    """`info=` lines are `docker info` as printed (core/docker_info.py reads them); the
    others are `key=value`."""
    v = dict(line.split("=", 1) for line in output if "=" in line and not line.startswith("info="))
    info = parse_docker_info([line[5:] for line in output if line.startswith("info=")])
    path = v.get("path", "")
    # Docker Desktop's WSL integration links the distro's docker CLI into its own tools
    # (/mnt/wsl/docker-desktop/cli-tools/...): the CLI, not the mount every distro sees; a
    # dangling link there (Desktop not running) is Desktop too, never an engine to install
    desktop_cli = "docker-desktop" in v.get("link", "")
    if is_docker_desktop(info) or (desktop_cli and not info):
        flavour = "docker-desktop"
    elif path.startswith("/snap/") or v.get("snap") == "1":
        flavour = "snap"
    elif v.get("pkg_ce") == "1":
        flavour = "docker-ce"
    elif v.get("pkg_io") == "1":
        flavour = "distro"
    elif path:
        flavour = "unknown"
    else:
        flavour = None
    return DockerEngineInfo(
        present=bool(path),
        path=path or None,
        flavour=flavour,
        server_version=info.get("Server Version") or None,
        nvidia_runtime="nvidia" in info.get("Runtimes", "").split(),
        root_dir=info.get("Docker Root Dir") or None,
        proxy=bool(info.get("HTTP Proxy") or info.get("HTTPS Proxy")),
        dangling_link=v.get("dangling") or None,
    )


class DockerEngine(FactBase[DockerEngineInfo]):
    def command(self) -> str:
        # Docker Desktop is read from the engine that answers (`docker info`), not from
        # /mnt/wsl/docker-desktop, which every distro sees whether or not it uses Desktop
        return (
            'echo "path=$(command -v docker || true)"; '
            'command -v docker >/dev/null && echo "link=$(readlink -f "$(command -v docker)")"; '
            # a link on PATH to a CLI that is not there (Docker Desktop asleep or quit: its
            # WSL integration's link into cli-tools left dangling), which `command -v` skips
            "command -v docker >/dev/null || (IFS=:; for d in $PATH; do "
            '[ -L "$d/docker" ] && echo "link=$(readlink "$d/docker")" '
            '&& echo "dangling=$d/docker" && break; done); '
            "if [ -e /snap/bin/docker ]; then echo snap=1; fi; "
            "dpkg-query -W -f='${Status}' docker-ce 2>/dev/null | grep -q 'ok installed' "
            "&& echo pkg_ce=1; "
            "dpkg-query -W -f='${Status}' docker.io 2>/dev/null | grep -q 'ok installed' "
            "&& echo pkg_io=1; "
            "if command -v docker >/dev/null; then "
            "docker info 2>/dev/null | sed 's/^/info=/'; fi; true"
        )

    process = staticmethod(parse_docker_engine)


class DockerImageId(FactBase[str | None]):
    """Returns the id of a local image tag, or ``None``: ``"sha256:7a3c..."``."""

    def command(self, tag: str) -> str:
        return (
            f"docker image inspect --format '{{{{.Id}}}}' {shlex.quote(tag)} 2>/dev/null || true"
        )

    def process(self, output: list[str]) -> str | None:
        line = output[0].strip() if output else ""
        return line if line.startswith("sha256:") else None


class GpuInContainer(FactBase[str | None]):
    """
    Runs ``nvidia-smi`` in a throwaway container of ``image`` and returns the GPU line, or
    ``None`` when the image is missing or no GPU is visible: ``"NVIDIA GeForce RTX 4090, 8.9"``.
    """

    def command(self, image: str) -> str:
        return (f"docker image inspect {shlex.quote(image)} >/dev/null 2>&1 && "
                f"{gpu_in_container_command(image)} 2>/dev/null | head -n1; true")

    def process(self, output: list[str]) -> str | None:
        line = output[0].strip() if output else ""
        return line or None


class ImageTags(ListFact[str]):
    """Returns the tags of one image repository, newest first: ``["repo:b", "repo:a"]``."""

    def command(self, repo: str) -> str:
        return (f"docker images {shlex.quote(repo)} --format "
                "'{{.CreatedAt}}\t{{.Repository}}:{{.Tag}}' 2>/dev/null | sort -r | cut -f2; true")

    def process(self, output: list[str]) -> list[str]:
        return [line.strip() for line in output if line.strip() and "<none>" not in line]


@dataclass(frozen=True)
class PortContainer:
    """A running container; `service` is its io.beekeeper.service label ("" if none)."""

    name: str
    service: str
    image: str


def parse_port_containers(output: list[str]) -> list[PortContainer]:
    """`docker ps` lines `<name>\\t<io.beekeeper.service label>\\t<image>` -> containers."""
    out = []
    for line in output:
        parts = line.rstrip("\n").split("\t")
        if parts and parts[0].strip():
            parts += [""] * (3 - len(parts))
            out.append(PortContainer(name=parts[0].strip(), service=parts[1].strip(),
                                     image=parts[2].strip()))
    return out


class PortContainers(ListFact[PortContainer]):
    """Returns the running containers that publish a host port, with the kit's service
    label (empty on a container the kit did not start)."""

    def command(self, port: int) -> str:
        fmt = "{{.Names}}\t{{.Label \"" + SERVICE_LABEL + "\"}}\t{{.Image}}"
        return (f"command -v docker >/dev/null 2>&1 && docker ps --filter "
                f"publish={int(port)} --format {shlex.quote(fmt)} 2>/dev/null; true")

    process = staticmethod(parse_port_containers)


def parse_compose_version(output: list[str]) -> str | None:
    """`docker compose version --short` -> "2.26.1" (a leading "v" dropped), or None when the
    CLI has no compose v2 plugin (the v1 `docker-compose` Python tool is not one)."""
    m = re.match(r"^v?((\d+)\.\d+\S*)", output[0].strip() if output else "")
    return m.group(1) if m and int(m.group(2)) >= 2 else None


class ComposeVersion(FactBase[str | None]):
    def command(self) -> str:
        return ("command -v docker >/dev/null 2>&1 && "
                "docker compose version --short 2>/dev/null | head -n1; true")

    process = staticmethod(parse_compose_version)
