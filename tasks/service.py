"""
Service: render the unit (or compose file, or supervisord program) that runs the server, start
it, restart it only when something that matters changed. `rt`: HostFacts.runtime.
"""

from __future__ import annotations

import io
import os

from pyinfra import host
from pyinfra.api.operation import OperationMeta
from pyinfra.facts.files import Sha1File
from pyinfra.operations import files, server, systemd

from beekeeper.core.config import HostConfig, ServiceConfig
from beekeeper.core.container import ContainerSpec, compose_service, docker_run
from beekeeper.core.deployed import RECORD_VERSION, REQUIRED, DeployedService
from beekeeper.core.paths import SERVER_USER, ServicePaths, prev
from beekeeper.core.render import render, sd_quote
from beekeeper.core.runtime import Runtime
from beekeeper.facts.docker import DockerEngine
from beekeeper.facts.services import deployed_manifest
from beekeeper.operations import secrets
from beekeeper.operations.shell import q
from beekeeper.operations.supervisor import program_running


def server_args(cfg: HostConfig, rt: Runtime, svc: ServiceConfig) -> list[str]:
    """The server's arguments: its model files on the host (native), or in the container's
    read-only model mount."""
    d = cfg.data.model_dir
    args = svc.profile.server.args(rt.model_arg(svc.model, d),
                                   rt.model_arg(svc.draft, d) if svc.draft else None)
    return [*args, "--alias", svc.alias, *svc.data.server_extra_args]


def container(cfg: HostConfig, rt: Runtime, svc: ServiceConfig, image: str) -> ContainerSpec:
    """The service's container, one spec for the plain unit and the compose file."""
    p = ServicePaths(svc.name)
    return ContainerSpec(name=p.container, image=image, args=tuple(server_args(cfg, rt, svc)),
                         model_dir=cfg.data.model_dir, bind_address=svc.data.bind_address,
                         port=svc.data.port, service=svc.name, profile=svc.profile.name,
                         env_file=p.secrets_env if svc.data.api_key_file else None,
                         gpu=svc.profile.backend == "cuda")


def render_unit(cfg: HostConfig, rt: Runtime, svc: ServiceConfig, artifact: str,
                docker_flavour: str | None = None) -> str:
    """The unit for this service; `artifact` is the image tag, or in native mode the binary.
    Runtime supervisor: `launch` drops to user beekeeper and execs the server
    (docs/gpu-containers.md); --pdeathsig comes after the change of user, which would clear
    it, so a killed supervisord leaves no server running unsupervised. `read -r` takes the
    key literally."""
    spec = container(cfg, rt, svc, artifact)
    p = ServicePaths(svc.name)
    launch = (f'exec setpriv --reuid={SERVER_USER} --regid={SERVER_USER} --init-groups '
              '--no-new-privs --pdeathsig KILL -- "$@"')
    if svc.data.api_key_file:
        launch = f"IFS= read -r LLAMA_API_KEY < {q(p.api_key)} && export LLAMA_API_KEY && {launch}"
    return render(rt.template, docker_flavour=docker_flavour, spec=spec,
                  run=docker_run(spec, sd_quote), svc=svc, unit=p.unit_name,
                  container=spec.name, binary=artifact, model_dir=spec.model_dir,
                  args=list(spec.args), gpu=spec.gpu, conf_dir=p.conf_dir, paths=p,
                  env_file=spec.env_file, program=p.program, log_file=p.server_log,
                  launch=launch, user=SERVER_USER)


def render_compose(cfg: HostConfig, rt: Runtime, svc: ServiceConfig, image: str) -> str:
    """The compose file of this service (runtime "compose"): the plain unit's container
    (container.py), in compose's words."""
    spec = container(cfg, rt, svc, image)
    return render("compose.yaml.j2", project=spec.name, unit=ServicePaths(svc.name).unit_name,
                  s=compose_service(spec))


def record(cfg: HostConfig, rt: Runtime, svc: ServiceConfig, image: str) -> DeployedService:
    """The deployment record of this service (beekeeper/core/deployed.py): what it runs, for
    the host checks (verify/test_host.py) and rollbacks."""
    p = ServicePaths(svc.name)
    return DeployedService(
        service=svc.name, container=p.container, unit=rt.known_by(p),
        profile=svc.profile.name, mode=cfg.data.mode, image=image, runtime=rt.recorded,
        log=rt.log(p), compose_file=rt.compose_file(p),
        bind_address=svc.data.bind_address, port=svc.data.port,
        ctx_size_tokens=svc.profile.server.ctx_size, slots=svc.profile.server.parallel,
        model_path=svc.model.host_path(cfg.data.model_dir),
        model_sha256=svc.model.sha256,
        # a file of yours served in place (model_host_path): the uninstall leaves it
        model_is_users=svc.model.users_file,
        draft_path=svc.draft.host_path(cfg.data.model_dir) if svc.draft else None,
        draft_sha256=svc.draft.sha256 if svc.draft else None,
        api_key=bool(svc.data.api_key_file), vram_budget_gib=_budget_of(cfg, svc),
        version=RECORD_VERSION,
    )


def _budget_of(cfg: HostConfig, svc: ServiceConfig) -> float | None:
    """The VRAM budget verify judges `svc`'s rise by: the host's, where `svc` is its only GPU
    service; None for a CPU one, or one of several sharing the card's budget (verify stops
    one service and measures its rise alone: the whole budget is not its own)."""
    gpu = [s for s in cfg.services if s.profile.backend == "cuda"]
    return cfg.data.vram_budget_gib if gpu == [svc] else None


def _rollback_copy(p: ServicePaths, running: bool, what: str) -> None:
    """`.prev` is exactly what ran before this deploy (unit, compose file, manifest): what
    the smoke check's rollback and `beekeeper rollback` put back (hostside/rollback.py). A
    stale copy never stays beside a newer one; with no unit running, none is kept."""
    drop = "rm -f " + " ".join(q(prev(f)) for f in p.rollback_set)
    if not running:
        server.shell(name=f"Remove a stale rollback copy of {what} (none runs yet)",
                     commands=[drop])
        return
    keep = " && ".join(f"{{ [ ! -f {q(f)} ] || cp -p {q(f)} {q(prev(f))}; }}"
                       for f in p.rollback_set)
    server.shell(name=f"Keep the running {what} for rollback ({what}.prev)",
                 commands=[f"{drop} && {keep}"])


def _cut_short(there: DeployedService, new: DeployedService) -> bool:
    """Whether the record on the host (`there`) says what an earlier deploy ran while the
    unit there is already this deploy's: that deploy wrote the unit and stopped before its
    record and restart, and the old server still runs. Read by the keys every kit wrote
    (a newer kit's added keys are no reason) that the unit itself decides: a model file
    replaced in place changes its sha256 and not the unit, and is a change of its own."""
    was, now = there.to_dict(), new.to_dict()
    return any(was[k] != now[k] for k in REQUIRED - {"model_sha256"})


def _model_swapped(there: DeployedService, new: DeployedService) -> bool:
    """Whether the record on the host (`there`) names another sha256 of the model (or of its
    draft, where the record names one) than this deploy serves: a file of yours replaced in
    place (`model_host_path`, never placed by the kit), or a file a deploy cut short placed
    before its restart. The server running holds the file it loaded; a sha256 given on one
    side only says nothing (host data's model_sha256 added to or dropped from a file of
    yours the upload checks by its own sha256: the same file)."""
    return any(was is not None and now is not None and was != now for was, now in (
        (there.model_sha256, new.model_sha256), (there.draft_sha256, new.draft_sha256)))


def _secrets(rt: Runtime, svc: ServiceConfig, p: ServicePaths) -> list[OperationMeta]:
    """The service's API key on the host and the env file that carries it (none without)."""
    if not svc.data.api_key_file:
        return []
    return [
        secrets.put_secret(name="Store the API key on the host (root-only file)",
                           src=svc.data.api_key_file, dest=p.api_key),
        secrets.secret_env_file(name="Write the server's secrets env file (root-only)",
                                src=svc.data.api_key_file, key_path=p.api_key,
                                env_path=p.secrets_env, quoted=rt.env_quoted),
    ]


def ensure(cfg: HostConfig, rt: Runtime, svc: ServiceConfig, image: str,
           upstream: list[OperationMeta]) -> bool:
    """Returns whether this run changes the service."""
    p = ServicePaths(svc.name)
    files.directory(name=f"Create {p.conf_dir}", path=p.conf_dir, mode="0755")
    for d in rt.dropins(p):
        files.directory(name=f"Create the drop-in folder {p.unit_name}.d (yours; never "
                             "written)", path=d, mode="0755")
    for f in rt.overrides(p):
        files.file(name=f"Create {f} (yours; created empty, never written)", path=f,
                   present=True, touch=False)
    new_unit = render_unit(cfg, rt, svc, image, host.get_fact(DockerEngine).flavour)
    new_compose = render_compose(cfg, rt, svc, image) if rt.compose else None
    secret_ops = _secrets(rt, svc, p)
    unit_path = rt.unit_file(p)
    running_sha = host.get_fact(Sha1File, path=unit_path)
    running_compose_sha = host.get_fact(Sha1File, path=p.compose_file)
    files_change = running_sha != secrets.sha1_text(new_unit) or running_compose_sha != (
        secrets.sha1_text(new_compose) if new_compose is not None else None)
    # A new image tag or new flags change a rendered file; a replaced model changes upstream.
    # A deploy cut short after the unit leaves it unchanged, and the record beside it old:
    # restarted now, its `.prev` (what still runs) kept.
    new_record = record(cfg, rt, svc, image)
    inputs_change = any(op.will_change for op in upstream + secret_ops)
    # nothing this run renders or places changed: only the record on the host tells
    settled = running_sha is not None and not files_change and not inputs_change
    there = deployed_manifest(p.manifest) if settled else None  # unreadable: it says nothing
    cut_short = there is not None and _cut_short(there, new_record)
    swapped = there is not None and not cut_short and _model_swapped(there, new_record)
    changed = files_change or cut_short or inputs_change or swapped
    if changed and not cut_short:
        _rollback_copy(p, running=running_sha is not None,
                       what=os.path.basename(unit_path))
    if new_compose is not None:
        files.put(name=f"Render the compose file {p.compose_file}",
                  src=io.StringIO(new_compose), dest=p.compose_file, mode="0644")
    elif running_compose_sha is not None:
        # left by an earlier runtime "compose" (`.prev` keeps it)
        files.file(name=f"Remove {p.compose_file} (runtime {rt.runtime})",
                   path=p.compose_file, present=False)
    unit_op = files.put(name=f"Render {rt.described(p)}", src=io.StringIO(new_unit), dest=unit_path,
                        mode="0644")
    files.put(name=f"Record what {rt.known_by(p)} runs (deployed.json)",
              src=io.StringIO(new_record.to_json()),
              dest=p.manifest, mode="0644")
    # a first start is no restart
    why = " (restart: inputs changed)" if changed and running_sha is not None else ""
    # cut short after the unit: systemd and supervisord still hold the unit before it
    reread = unit_op.will_change or cut_short
    if rt.supervised:
        program_running(
            name=f"Start {p.program} under supervisord{why}",
            program=p.program, conf_changed=reread, restarted=changed)
    else:
        systemd.service(
            name=f"Start and enable {p.unit_name}{why}",
            service=p.unit_name, running=True, enabled=True, restarted=changed,
            daemon_reload=reread)
    return changed
