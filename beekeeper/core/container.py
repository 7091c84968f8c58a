"""
The server's container, written once: the image's constants (templates/Dockerfile.j2), one
service's ContainerSpec, and its two renderings, `docker_run` and `compose_service`.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass

from .paths import bracketed

UID = GID = 10001  # the image's user `llama`: never root
PORT = 8083  # the server's port inside the container (the entry point's --port)
MODELS = "/models"  # where the model folder is mounted, read-only
SERVICE_LABEL = "io.beekeeper.service"
PROFILE_LABEL = "io.beekeeper.profile"
# /health answers 503 while the model loads and 200 when it is ready; bash's /dev/tcp keeps
# curl out of the image (`\\r\\n`: printf's escapes, written as they reach bash)
HEALTH_PROBE = (f"exec 3<>/dev/tcp/127.0.0.1/{PORT} && printf 'GET /health HTTP/1.0\\r\\n"
                "\\r\\n' >&3 && head -n1 <&3 | grep -q ' 200 '")


@dataclass(frozen=True)
class Healthcheck:
    """The container's health check, in the exec form (no shell around `test`)."""

    test: tuple[str, ...] = ("bash", "-c", HEALTH_PROBE)
    interval_s: int = 10
    timeout_s: int = 5
    start_period_s: int = 300  # a model takes minutes to load
    retries: int = 3


@dataclass(frozen=True)
class Image:
    """What the server image itself declares (the Dockerfile's USER, EXPOSE, HEALTHCHECK,
    ENTRYPOINT): a plain `docker run` takes the user and health check from here."""

    uid: int = UID
    gid: int = GID
    port: int = PORT
    healthcheck: Healthcheck = Healthcheck()
    entrypoint: tuple[str, ...] = ("/usr/local/bin/llama-server", "--host", "0.0.0.0",
                                   "--port", str(PORT))


IMAGE = Image()
# the hardening of every container of the image, the service's and verify's llama-bench
# (`confined`); its user is the image's (IMAGE)
TMPFS = "/tmp"  # noqa: S108 (a tmpfs of the container's own)
SECURITY_OPT = "no-new-privileges"
CAP_DROP = "ALL"


def published_on(bind_address: str) -> str | None:
    """The host address Docker publishes the port on: the bind address, but none for `::`
    (Docker then publishes on every address, IPv4 and IPv6, as `::` means for the kit's
    other listeners: Docker's `[::]` alone takes IPv6 only)."""
    return None if bind_address == "::" else bind_address


@dataclass(frozen=True)
class ContainerSpec:
    """One service's container, as both runtimes run it."""

    name: str  # the container's name (and the compose project's)
    image: str  # the tag built on the host
    args: tuple[str, ...]  # the server's arguments, after the image's entry point
    model_dir: str  # the host folder mounted read-only at MODELS
    bind_address: str  # where the port is published on the host
    port: int  # the published port on the host
    service: str
    profile: str
    env_file: str | None = None  # root-only file with the API key (LLAMA_API_KEY)
    gpu: bool = False  # every NVIDIA GPU of the host
    stop_timeout_s: int = 20  # SIGTERM, then SIGKILL after this

    @property
    def labels(self) -> tuple[tuple[str, str], ...]:
        return ((SERVICE_LABEL, self.service), (PROFILE_LABEL, self.profile))


def model_path(filename: str) -> str:
    """A model file of the model folder, as the server in the container sees it."""
    return f"{MODELS}/{filename}"


def confined(model_dir: str, gpus: str | None = None,
             quote: Callable[[str], str] = str) -> list[list[str]]:
    """`docker run`'s hardening of a container of the image, the model folder mounted and
    `gpus` (docker's --gpus value) when given; a group of words a line, quoted."""
    return [["--init"], ["--volume", quote(f"{model_dir}:{MODELS}:ro")],
            ["--read-only", "--tmpfs", quote(TMPFS)],
            ["--security-opt", quote(SECURITY_OPT), "--cap-drop", quote(CAP_DROP)],
            *([["--gpus", gpus]] if gpus else [])]


def docker_run(spec: ContainerSpec, quote: Callable[[str], str] = str) -> list[list[str]]:
    """The arguments of `docker run` for this container, a group of words a line, each value
    through `quote` (systemd's, for a unit). User and health check are the image's."""
    init, *rest = confined(spec.model_dir, "all" if spec.gpu else None, quote)
    on = published_on(spec.bind_address)
    lines = [["--rm", "--name", quote(spec.name), *init],
             ["--publish", f"{quote(bracketed(on)) + ':' if on else ''}{spec.port}:{PORT}"],
             *rest]
    if spec.env_file:
        lines.append(["--env-file", quote(spec.env_file)])
    lines += [["--label", quote(f"{k}={v}")] for k, v in spec.labels]
    return [*lines, [quote(spec.image)], [quote(a) for a in spec.args]]


def compose_service(spec: ContainerSpec) -> dict:
    """The compose file's service for this container: the plain unit's container in
    compose's words, with the image's user and health check said again. Built on the host,
    never pulled; systemd owns restarts (one owner), so compose's restart is "no"."""
    service: dict = {
        "image": spec.image, "pull_policy": "never", "container_name": spec.name,
        "command": list(spec.args), "init": True, "user": f"{IMAGE.uid}:{IMAGE.gid}",
        "read_only": True, "tmpfs": [TMPFS], "security_opt": [SECURITY_OPT],
        "cap_drop": [CAP_DROP],
        "ports": [{"target": PORT, "published": str(spec.port), "protocol": "tcp",
                   **({"host_ip": on} if (on := published_on(spec.bind_address)) else {})}],
        "volumes": [{"type": "bind", "source": spec.model_dir, "target": MODELS,
                     "read_only": True}],
    }
    if spec.env_file:
        service["env_file"] = [spec.env_file]
    if spec.gpu:
        service["deploy"] = {"resources": {"reservations": {"devices": [
            {"driver": "nvidia", "count": "all", "capabilities": ["gpu"]}]}}}
    hc = IMAGE.healthcheck
    return {**service, "labels": dict(spec.labels),
            "healthcheck": {"test": ["CMD", *hc.test], "interval": f"{hc.interval_s}s",
                            "timeout": f"{hc.timeout_s}s",
                            "start_period": f"{hc.start_period_s}s", "retries": hc.retries},
            "restart": "no", "stop_grace_period": f"{spec.stop_timeout_s}s"}


def gpu_in_container_command(image: str) -> str:
    """nvidia-smi in a throwaway container of `image`, with the GPUs the server's container
    gets (`--gpus all`): the deploy's check (facts/docker.GpuInContainer, operations/nvidia)
    and verify's (verify/host_checks)."""
    return (f"docker run --rm --gpus all --entrypoint nvidia-smi {shlex.quote(image)} "
            "--query-gpu=name,compute_cap --format=csv,noheader")
