"""
Service: render the systemd unit that runs the server container, start it, restart it
only when something that matters changed.
"""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

from pyinfra import host
from pyinfra.api.operation import OperationMeta
from pyinfra.facts.files import Sha1File
from pyinfra.operations import files, server, systemd

from beekeeper.config import HostConfig, ServiceConfig
from beekeeper.render import render
from facts.docker import DockerEngine

from . import ops as ops_mod


def _sha1(text: str) -> str:
    return hashlib.sha1(text.encode(), usedforsecurity=False).hexdigest()


def unit_name(svc: ServiceConfig) -> str:
    return f"beekeeper-{svc.name}.service"


def container_name(svc: ServiceConfig) -> str:
    return f"beekeeper-{svc.name}"


def render_unit(cfg: HostConfig, svc: ServiceConfig, artifact: str,
                docker_flavour: str | None = None) -> str:
    """The unit for this service; `artifact` is the image tag, or in native mode the binary."""
    native = cfg.mode == "native"
    models = cfg.model_dir if native else "/models"
    args = svc.profile.server.args(f"{models}/{svc.model.filename}",
                                   f"{models}/{svc.draft.filename}" if svc.draft else None)
    args += ["--alias", svc.profile.name, *svc.extra_args]
    conf_dir = f"/etc/beekeeper/{svc.name}"
    return render(
        "beekeeper-native.service.j2" if native else "beekeeper-server.service.j2",
        svc=svc, unit=unit_name(svc), container=container_name(svc), image=artifact,
        binary=artifact, model_dir=cfg.model_dir, args=args, gpu=svc.profile.backend == "cuda",
        env_file=f"{conf_dir}/secrets.env" if svc.api_key_file else None, conf_dir=conf_dir,
        docker_flavour=docker_flavour,
    )


def manifest(cfg: HostConfig, svc: ServiceConfig, image: str) -> str:
    """What this service runs, for the host checks (verify/test_host.py) and rollbacks."""
    return json.dumps({
        "service": svc.name, "unit": unit_name(svc), "container": container_name(svc),
        "profile": svc.profile.name, "mode": cfg.mode, "image": image,
        "bind_address": svc.bind_address, "port": svc.port,
        "ctx_size": svc.profile.server.ctx_size,
        "model_path": f"{cfg.model_dir}/{svc.model.filename}",
        "model_sha256": svc.model_sha256,
        "draft_path": f"{cfg.model_dir}/{svc.draft.filename}" if svc.draft else None,
        "draft_sha256": svc.draft.sha256 if svc.draft else None,
    }, indent=2, sort_keys=True) + "\n"


def ensure(cfg: HostConfig, svc: ServiceConfig, image: str,
           upstream: list[OperationMeta]) -> tuple[bool, list[OperationMeta]]:
    """Returns whether this run changes the service, and the operations queued."""
    unit = unit_name(svc)
    ops = [
        files.directory(name=f"Create /etc/beekeeper/{svc.name}",
                        path=f"/etc/beekeeper/{svc.name}", mode="0755"),
        files.directory(name=f"Create the drop-in folder {unit}.d (yours; never written)",
                        path=f"/etc/systemd/system/{unit}.d", mode="0755"),
    ]
    unit_path = f"/etc/systemd/system/{unit}"
    manifest_path = f"/etc/beekeeper/{svc.name}/deployed.json"
    new_unit = render_unit(cfg, svc, image, host.get_fact(DockerEngine)["flavour"])
    secret_ops: list[OperationMeta] = []
    if svc.api_key_file:
        conf = f"/etc/beekeeper/{svc.name}"
        key = Path(svc.api_key_file).read_text().strip()
        secret_ops = [
            files.put(name="Store the API key on the host (root-only file)",
                      src=svc.api_key_file, dest=f"{conf}/api_key", mode="0600",
                      user="root", group="root"),
            ops_mod.secret_env_file(name="Write the server's secrets env file (root-only)",
                                    key_path=f"{conf}/api_key", env_path=f"{conf}/secrets.env",
                                    expected_sha1=_sha1(f"LLAMA_API_KEY={key}\n"),
                                    var="LLAMA_API_KEY"),
        ]
        ops += secret_ops
    running_sha = host.get_fact(Sha1File, path=unit_path)
    unit_changes = running_sha != _sha1(new_unit)
    # A new image tag or new flags change the unit; a replaced model file changes upstream.
    changed = unit_changes or any(op.will_change for op in upstream + secret_ops)
    if changed and running_sha is not None:
        # `.prev` is exactly the unit (and manifest) running before this deploy: what the
        # smoke check's rollback and `beekeeper rollback` put back. A stale manifest copy
        # never stays beside a newer unit copy.
        ops.append(server.shell(
            name=f"Keep the running {unit} for rollback ({unit}.prev)",
            commands=[f"cp -p {unit_path} {unit_path}.prev && rm -f {manifest_path}.prev && "
                      f"{{ [ ! -f {manifest_path} ] || cp -p {manifest_path} "
                      f"{manifest_path}.prev; }}"]))
    elif changed:
        # no unit runs yet: an older deploy's copy must not be "restored" by a rollback
        ops.append(server.shell(
            name=f"Remove a stale rollback copy of {unit} (none runs yet)",
            commands=[f"rm -f {unit_path}.prev {manifest_path}.prev"]))
    unit_op = files.put(name=f"Render systemd unit {unit}",
                        src=io.StringIO(new_unit),
                        dest=f"/etc/systemd/system/{unit}", mode="0644")
    ops.append(unit_op)
    ops.append(files.put(name=f"Record what {unit} runs (deployed.json)",
                         src=io.StringIO(manifest(cfg, svc, image)),
                         dest=f"/etc/beekeeper/{svc.name}/deployed.json", mode="0644"))
    ops.append(systemd.service(
        name=f"Start and enable {unit}" + (" (restart: inputs changed)" if changed else ""),
        service=unit, running=True, enabled=True, restarted=changed,
        daemon_reload=unit_op.will_change,
    ))
    return changed, ops
