"""
Server image: render the Dockerfile, send the build context, build once per input set.
"""

from __future__ import annotations

import io
from pathlib import Path

from pyinfra import host
from pyinfra.api.operation import OperationMeta
from pyinfra.operations import files

from beekeeper.core.build import BuildSpec, build_spec
from beekeeper.core.config import HostConfig
from beekeeper.core.errors import ConfigError, host_data
from beekeeper.core.paths import LOG_DIR, build_folders
from beekeeper.facts.docker import DockerImageId
from beekeeper.facts.hostfacts import HostFacts
from beekeeper.facts.services import DeployedServices, deployed_records
from beekeeper.operations import docker as docker_ops

from . import source


def spec_for(cfg: HostConfig, facts: HostFacts) -> tuple[BuildSpec, str, str]:
    """The build for this host, for the CUDA release and archs preflight resolved (the
    release the installed driver runs where host data `cuda_follows_driver` lets it); its
    tag, and the tag less its repository: the build's name in folders and logs."""
    spec = build_spec(cfg, facts.compute_cap, facts.cpus, facts.mem_total_bytes, facts.machine,
                      cuda_version=facts.cuda_version, cuda_arch=facts.cuda_arch)
    name = spec.name()
    return spec, f"{spec.image_repo}:{name}", name


def ensure(cfg: HostConfig, facts: HostFacts) -> tuple[str, list[OperationMeta]]:
    """Returns the image tag the service should run, and the operations queued."""
    spec, tag, slug = spec_for(cfg, facts)
    build_dir = f"{build_folders(cfg.data.state_dir).image_builds}/{slug}"
    dockerfile = f"{build_dir}/Dockerfile"
    result: list[OperationMeta] = []
    for image, tar in (cfg.data.preload_images or {}).items():
        if not Path(tar).exists():
            raise ConfigError(host_data("preload_images"), f"{tar} does not exist", "run "
                              "`beekeeper sandbox up` (it saves the base images) or drop it")
        result.append(docker_ops.image_preloaded(
            name=f"Load base image {image} from the controller",
            image=image, local_tar=tar, remote_dir=f"{cfg.data.state_dir}/images",
        ))
    # The source tree and the Dockerfile are placed only for a build: a tag that exists is
    # up to date (it encodes every input); image_built itself says so.
    if not host.get_fact(DockerImageId, tag=tag):
        result += source.ensure(cfg)
        result.append(files.directory(name="Create the build folder", path=build_dir,
                                      mode="0755"))
        result.append(files.put(name="Render the Dockerfile",
                                src=io.StringIO(spec.dockerfile()),
                                dest=dockerfile, mode="0644"))
    log = f"{LOG_DIR}/build-{slug}.log"
    # the proxy variables of /etc/environment the build gets, by name (not their values)
    proxy = (f"; proxy from /etc/environment: {', '.join(facts.proxy_vars)}"
             if facts.proxy_vars else "")
    result.append(docker_ops.image_built(name=f"Build server image {tag} (log: {log}{proxy})",
                                         tag=tag,
                                         dockerfile=dockerfile,
                                         context_dir=source.tree_dir(cfg), log_path=log,
                                         jobs=spec.jobs, proxy_vars=facts.proxy_vars))
    # the newest two server images stay, and always the running and rollback ones: of every
    # service on this machine (those of other inventory hosts there, and those this deploy
    # removes only after its smoke checks, run theirs meanwhile)
    deployed: list[str] = host.get_fact(DeployedServices)
    on_machine = {s.name for s in cfg.services} | set(deployed)
    keep = [tag, *(r.image for name in sorted(on_machine) for r in deployed_records(name))]
    result.append(docker_ops.images_pruned(name="Remove server images beyond the newest two",
                                           repo=cfg.image_repo, keep=keep))
    return tag, result
