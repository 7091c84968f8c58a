"""
Docker operations: build, preload and prune server images on the host.
"""

from __future__ import annotations

from pyinfra import host
from pyinfra.api import StringCommand, operation
from pyinfra.operations import files

from beekeeper.facts.docker import DockerImageId, ImageTags

from .shell import StreamedCommand, q, with_heartbeat


def proxy_build(names: tuple[str, ...], environment: str = "/etc/environment") -> tuple[str, str]:
    """(shell prefix, build arguments) that hand the host's proxy variables to `docker build`.

    The prefix exports the proxy lines of /etc/environment into the docker CLI's own
    environment; `--build-arg NAME` without a value makes the CLI take each from there. So a
    proxy URL, which may carry a password, never reaches a command line, a log or the kit.
    http_proxy, https_proxy, no_proxy and their upper-case forms are Docker's predefined build
    arguments: RUN steps (the Dockerfile's apt-get) see them without an ARG line, and they
    stay out of the image's ENV and of `docker history`; nor do they change the Dockerfile,
    so the image tag stays as it is.
    """
    if not names:
        return "", ""
    pattern = "^ *(export +)?(" + "|".join(names) + ")="
    prefix = (f"eval \"$(grep -E {q(pattern)} {q(environment)} | "
              "sed -E 's/^ *(export +)?/export /')\"; ")
    args = "".join(f" --build-arg {q(n)}" for n in names)
    return prefix, args


@operation()
def image_built(tag: str, dockerfile: str, context_dir: str, log_path: str, jobs: int = 1,
                proxy_vars: tuple[str, ...] = ()):
    """
    Build a Docker image on the host, unless the tag exists.

    + tag: image tag; it encodes every build input, so an existing tag is up to date
    + context_dir: the build context: the server's source tree on the host
    + jobs: parallel compile jobs (the Dockerfile's BUILD_JOBS argument; not in the tag)
    """
    if host.get_fact(DockerImageId, tag=tag):
        host.noop(f"image {tag} is already built")
        return
    prefix, args = proxy_build(tuple(proxy_vars))
    cmd = (f"{prefix}docker build --pull=false --build-arg BUILD_JOBS={int(jobs)}{args} "
           f"-f {q(dockerfile)} -t {q(tag)} {q(context_dir)}")
    yield StreamedCommand(with_heartbeat(cmd, log_path, f"building {tag}"))

@operation()
def image_preloaded(image: str, local_tar: str, remote_dir: str):
    """
    Load a base image saved on the controller into the host's engine, unless present.
    For hosts that cannot pull from a registry (air-gapped hosts, the sandbox).

    + local_tar: `docker save` archive on the controller
    + remote_dir: folder on the host for the upload (the archive is removed after load)
    """
    if host.get_fact(DockerImageId, tag=image):
        host.noop(f"base image {image} is present")
        return
    remote = f"{remote_dir}/{image.replace('/', '_').replace(':', '_')}.tar"
    yield from files.put._inner(src=local_tar, dest=remote)
    yield StringCommand(f"docker load -i {q(remote)} && rm -f {q(remote)}")

@operation()
def images_pruned(repo: str, keep: list[str]):
    """
    Remove server images beyond the newest two, never one in `keep` (the image the unit runs
    and the one its rollback copy runs).
    """
    tags = host.get_fact(ImageTags, repo=repo)
    stale = [t for t in tags[2:] if t not in keep]
    if not stale:
        host.noop(f"no {repo} image beyond the newest 2 to remove")
        return
    yield "docker rmi " + " ".join(q(t) for t in stale)
