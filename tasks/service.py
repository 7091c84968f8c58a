"""
Service: render the systemd unit that runs the server (runtime "systemd": the unit runs the
container; runtime "compose": a compose file, whose project the unit brings up and down),
start it, restart it only when something that matters changed.
"""

from __future__ import annotations

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


def unit_name(svc: ServiceConfig) -> str:
    return f"beekeeper-{svc.name}.service"


def container_name(svc: ServiceConfig) -> str:
    return f"beekeeper-{svc.name}"


def conf_dir(svc: ServiceConfig) -> str:
    """The service's folder: manifest, secrets, and with compose its compose files."""
    return f"/etc/beekeeper/{svc.name}"


def compose_path(svc: ServiceConfig) -> str:
    return f"{conf_dir(svc)}/compose.yaml"


def _context(cfg: HostConfig, svc: ServiceConfig, artifact: str) -> dict:
    """What the unit and compose templates share: the server's arguments, mounts, secrets."""
    native = cfg.mode == "native"
    models = cfg.model_dir if native else "/models"
    args = svc.profile.server.args(f"{models}/{svc.model.filename}",
                                   f"{models}/{svc.draft.filename}" if svc.draft else None)
    args += ["--alias", svc.profile.name, *svc.extra_args]
    conf = conf_dir(svc)
    return dict(svc=svc, unit=unit_name(svc), container=container_name(svc), image=artifact,
                binary=artifact, model_dir=cfg.model_dir, args=args,
                gpu=svc.profile.backend == "cuda", conf_dir=conf,
                env_file=f"{conf}/secrets.env" if svc.api_key_file else None,
                project=container_name(svc))


def render_unit(cfg: HostConfig, svc: ServiceConfig, artifact: str,
                docker_flavour: str | None = None) -> str:
    """The unit for this service; `artifact` is the image tag, or in native mode the binary."""
    template = ("beekeeper-native.service.j2" if cfg.mode == "native"
                else "beekeeper-compose.service.j2" if cfg.runtime == "compose"
                else "beekeeper-server.service.j2")
    return render(template, docker_flavour=docker_flavour, **_context(cfg, svc, artifact))


def render_compose(cfg: HostConfig, svc: ServiceConfig, image: str) -> str:
    """The compose file of this service (runtime "compose"): the plain unit's container,
    its hardening included, in compose's words."""
    return render("compose.yaml.j2", **_context(cfg, svc, image))


def secrets_env(cfg: HostConfig, key: str) -> str:
    """The secrets env file's content. `docker run --env-file` takes the value after `=` as
    it is; compose parses env files (quotes, `$` interpolation), and takes a single-quoted
    value literally (config.py refuses `'` and `\\` in a key for compose)."""
    return f"LLAMA_API_KEY='{key}'\n" if cfg.runtime == "compose" else f"LLAMA_API_KEY={key}\n"


def manifest(cfg: HostConfig, svc: ServiceConfig, image: str) -> str:
    """What this service runs, for the host checks (verify/test_host.py) and rollbacks."""
    return json.dumps({
        "service": svc.name, "unit": unit_name(svc), "container": container_name(svc),
        "profile": svc.profile.name, "mode": cfg.mode, "image": image,
        "runtime": cfg.runtime if cfg.mode == "container" else None,
        "compose_file": compose_path(svc) if cfg.runtime == "compose" else None,
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
    conf = conf_dir(svc)
    compose = cfg.runtime == "compose"
    ops = [
        files.directory(name=f"Create {conf}", path=conf, mode="0755"),
        files.directory(name=f"Create the drop-in folder {unit}.d (yours; never written)",
                        path=f"/etc/systemd/system/{unit}.d", mode="0755"),
    ]
    if compose:
        ops.append(files.file(
            name=f"Create {conf}/compose.override.yaml (yours; created empty, never written)",
            path=f"{conf}/compose.override.yaml", present=True, touch=False))
    unit_path = f"/etc/systemd/system/{unit}"
    manifest_path = f"{conf}/deployed.json"
    compose_file = compose_path(svc)
    new_unit = render_unit(cfg, svc, image, host.get_fact(DockerEngine)["flavour"])
    new_compose = render_compose(cfg, svc, image) if compose else None
    secret_ops: list[OperationMeta] = []
    if svc.api_key_file:
        key = Path(svc.api_key_file).read_text().strip()
        secret_ops = [
            ops_mod.put_secret(name="Store the API key on the host (root-only file)",
                               src=svc.api_key_file, dest=f"{conf}/api_key"),
            ops_mod.secret_env_file(name="Write the server's secrets env file (root-only)",
                                    key_path=f"{conf}/api_key", env_path=f"{conf}/secrets.env",
                                    expected_sha1=ops_mod.sha1_text(secrets_env(cfg, key)),
                                    var="LLAMA_API_KEY", quoted=compose),
        ]
        ops += secret_ops
    running_sha = host.get_fact(Sha1File, path=unit_path)
    running_compose_sha = host.get_fact(Sha1File, path=compose_file)
    # the rendered files: the unit, and with compose the compose file (none otherwise)
    files_change = running_sha != ops_mod.sha1_text(new_unit) or running_compose_sha != (
        ops_mod.sha1_text(new_compose) if new_compose is not None else None)
    # A new image tag or new flags change a rendered file; a replaced model changes upstream.
    changed = files_change or any(op.will_change for op in upstream + secret_ops)
    if changed and running_sha is not None:
        # `.prev` is exactly what ran before this deploy (unit, compose file, manifest): what
        # the smoke check's rollback and `beekeeper rollback` put back. A stale copy of the
        # manifest or compose file never stays beside a newer unit copy.
        ops.append(server.shell(
            name=f"Keep the running {unit} for rollback ({unit}.prev)",
            commands=[f"cp -p {unit_path} {unit_path}.prev && "
                      f"rm -f {manifest_path}.prev {compose_file}.prev && "
                      f"{{ [ ! -f {manifest_path} ] || cp -p {manifest_path} "
                      f"{manifest_path}.prev; }} && "
                      f"{{ [ ! -f {compose_file} ] || cp -p {compose_file} "
                      f"{compose_file}.prev; }}"]))
    elif changed:
        # no unit runs yet: an older deploy's copy must not be "restored" by a rollback
        ops.append(server.shell(
            name=f"Remove a stale rollback copy of {unit} (none runs yet)",
            commands=[f"rm -f {unit_path}.prev {manifest_path}.prev {compose_file}.prev"]))
    if new_compose is not None:
        compose_op = files.put(name=f"Render the compose file {compose_file}",
                               src=io.StringIO(new_compose), dest=compose_file, mode="0644")
        ops.append(compose_op)
    else:
        # runtime "systemd" after "compose": the unit no longer reads it (`.prev` keeps it)
        ops.append(files.file(name=f"Remove {compose_file} (runtime systemd)",
                              path=compose_file, present=False))
    unit_op = files.put(name=f"Render systemd unit {unit}",
                        src=io.StringIO(new_unit),
                        dest=f"/etc/systemd/system/{unit}", mode="0644")
    ops.append(unit_op)
    ops.append(files.put(name=f"Record what {unit} runs (deployed.json)",
                         src=io.StringIO(manifest(cfg, svc, image)),
                         dest=manifest_path, mode="0644"))
    ops.append(systemd.service(
        name=f"Start and enable {unit}" + (" (restart: inputs changed)" if changed else ""),
        service=unit, running=True, enabled=True, restarted=changed,
        daemon_reload=unit_op.will_change,
    ))
    return changed, ops
