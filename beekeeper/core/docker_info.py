"""
What `docker info` says of the engine that answers: the top-level fields of its Server
section, and whether that engine is Docker Desktop's. The deploy reads it through the
DockerEngine fact (facts/docker.py), the post-deploy checks on the host (verify/test_host.py)
through testinfra; both go by the engine's own words, never by /mnt/wsl/docker-desktop, which
every WSL2 distro sees whether or not it uses Desktop.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping


def parse_docker_info(lines: Iterable[str]) -> dict[str, str]:
    """The top-level `Key: value` fields of `docker info`'s Server section, as the engine
    reports them: {"Operating System": "Docker Desktop", "Name": "docker-desktop", ...}."""
    out: dict[str, str] = {}
    server = False
    for line in lines:
        if line.rstrip() == "Server:":
            server = True
        elif server and line.startswith(" ") and not line.startswith("  ") and ":" in line:
            key, _, value = line.strip().partition(":")
            out.setdefault(key.strip(), value.strip())
    return out


def is_docker_desktop(info: Mapping[str, str] | None) -> bool:
    """The engine that answers is Docker Desktop's: it calls its OS "Docker Desktop" and
    itself "docker-desktop" (a distro's own engine names the distro and the host). None (no
    engine answered) is not Desktop."""
    return info is not None and (info.get("Operating System") == "Docker Desktop"
                                 or info.get("Name") == "docker-desktop")
