"""
Host data validation: pyinfra host data into a typed HostConfig, or one refusal line. Each
key is declared in hostdata.py; the rules between keys are the rule_* checks here.
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .errors import ConfigError
from .hostdata import (
    SOURCE_FIX,
    UNKNOWN_KEY,
    HostData,
    ServiceData,
    SourceData,
    did_you_mean,
    fail,
    parse,
    shown,
)
from .paths import KIT_ROOT
from .profiles import PROFILES, FileSource, HfSource, ModelFile, Profile, with_ctx_size
from .runtime import Runtime, requested, ways_named

SERVICE_KEYS = tuple(ServiceData.model_fields)
KIT_KEYS = frozenset(HostData.model_fields)
# read straight from host data by pyinfra's chroot and dockerssh connectors
_PYINFRA_CONNECTOR_EXTRA = ("chroot_directory", "docker_image", "docker_container_id")
MIN_CTX_SIZE = 256
# beekeeper/pins.py's pin_model(model, Hub endpoint, role, the VRAM plan reads the file)
Pinner = Callable[[ModelFile, str, str, bool], ModelFile]


@dataclass(frozen=True)
class ServiceConfig:
    """One model service on a host: its host data as declared (`data`: a `services` entry,
    or the host's own keys) and what the rules between keys make of it."""

    data: ServiceData
    # what a refusal names its keys after: 'services[i].' (its entry), or '' (the top level)
    at: str
    # the profile with host data's ctx_size and slots applied
    profile: Profile
    # the profile's model (and draft) with host data's model_*/draft_* applied
    model: ModelFile
    draft: ModelFile | None

    @property
    def name(self) -> str:
        return self.data.service_name

    @property
    def alias(self) -> str:
        """The model name clients send: host data `model_alias`, else the profile's name."""
        return self.data.model_alias or self.profile.name

    def models(self) -> list[ModelFile]:
        return [self.model] + ([self.draft] if self.draft else [])


@dataclass(frozen=True)
class HostConfig:
    """One inventory host's settings, made by load_host_config: its host data as declared
    (`data`) and what the rules between keys make of it (the host's facts: HostFacts)."""

    data: HostData
    services: tuple[ServiceConfig, ...]
    absent: tuple[str, ...]
    source: SourceData
    # host data's mode and runtime, or what `requested` picks; what runs is HostFacts.runtime
    # (this one or its without_systemd)
    requested_way: Runtime
    # the repository the server images are tagged in (not host data)
    image_repo: str = "beekeeper/llama-server"

    @property
    def service(self) -> ServiceConfig:
        return self.services[0]


@functools.cache  # the same for every host of a run
def pyinfra_keys() -> frozenset[str]:
    """Host data keys pyinfra itself reads: global arguments and its connectors' data."""
    from pyinfra.api.arguments import all_argument_meta
    from pyinfra.api.connectors import get_all_connectors

    keys = {k for k in all_argument_meta if k.startswith("_")}
    for connector in get_all_connectors().values():
        keys |= set(getattr(connector, "data_meta", None) or {})
    return frozenset(keys | set(_PYINFRA_CONNECTOR_EXTRA))


def _layers(data: Any) -> list[Mapping[str, Any]]:
    """Host data's layers, first wins: a plain mapping, or pyinfra's HostData's."""
    if isinstance(data, Mapping):
        return [data]
    return [layer() if callable(layer) else layer for layer in getattr(data, "datas", ())]


def host_data_keys(data: Any) -> list[str]:
    """Every key set in host data: a plain mapping, or pyinfra's HostData (all its layers)."""
    return list(dict.fromkeys(str(k) for layer in _layers(data) for k in layer))


_UNSET = object()


@functools.cache
def group_all() -> Mapping[str, Any]:
    """What the checkout's group_data/all.py gives every host: its `__all__`, else its
    public module-level values."""
    import inspect
    import runpy
    import types

    path = KIT_ROOT / "group_data" / "all.py"
    if not path.is_file():  # the kit without its checkout: no group data
        return types.MappingProxyType({})
    ns = runpy.run_path(str(path))
    names = ns.get("__all__") or [k for k, v in ns.items() if not k.startswith("_") and not (
        inspect.ismodule(v) or inspect.isfunction(v) or inspect.isclass(v))]
    return types.MappingProxyType({k: ns[k] for k in names})


def configured_budget_gib() -> float:
    """The VRAM budget every host gets: group_data/all.py's, else the schema's default."""
    default = float(HostData.model_fields["vram_budget_gib"].default)
    try:
        return float(group_all().get("vram_budget_gib", default))
    except (OSError, TypeError, ValueError):
        return default


# pyinfra 3's HostData layers, first wins (pyinfra/api/host.py, Host.__init__); after these
# come group_data/all.py, the inventory's `all` and @deploy defaults: the kit's defaults
_OWN_LAYERS = ("set during the deploy", "in --data", "in this host's data", "in a group's data")
_TYPED = _OWN_LAYERS.index("in --data")


def typed_keys(data: Any) -> frozenset[str]:
    """The keys whose value host data takes from the pyinfra command line (`--data`): no
    layer before that one holds them (a plain mapping has no such layer)."""
    layers = [] if isinstance(data, Mapping) else _layers(data)
    if len(layers) <= _TYPED:
        return frozenset()
    before = {k for layer in layers[:_TYPED] for k in layer}
    return frozenset(str(k) for k in layers[_TYPED] if k not in before)


def _kit_data(data: Any, own: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The kit's keys of `data` and their values, after refusing a key the kit (or pyinfra,
    or the caller: `own`) does not read, with the closest known one."""
    allowed = KIT_KEYS | pyinfra_keys() | own
    for key in host_data_keys(data):
        if key not in allowed and not key.startswith("__"):
            raise fail(key, UNKNOWN_KEY, did_you_mean(key, sorted(allowed)))
    return {k: v for k in sorted(KIT_KEYS) if (v := data.get(k, _UNSET)) is not _UNSET}


def memoized_loader() -> Callable[[Any], HostConfig]:
    """load_host_config once per host data object (a run's hosts each read their
    neighbours' data), its refusal kept too, held while the loader lives."""
    seen: dict[int, tuple[Any, HostConfig | ConfigError]] = {}

    def load(data: Any) -> HostConfig:
        hit = seen.get(id(data))
        if hit is None or hit[0] is not data:
            try:
                hit = (data, load_host_config(data))
            except ConfigError as e:
                hit = (data, e)
            seen[id(data)] = hit
        if isinstance(hit[1], ConfigError):
            raise hit[1]
        return hit[1]

    return load


_RUN: tuple[Any, Callable[[Any], HostConfig]] | None = None


def run_loader(run: Any) -> Callable[[Any], HostConfig]:
    """memoized_loader for one pyinfra run (`run`: its State), kept here: pyinfra executes
    deploy.py afresh for each host (pyinfra_cli.util.exec_file), so a loader made there
    would validate every neighbour's data again for each host."""
    global _RUN
    if _RUN is None or _RUN[0] is not run:
        _RUN = (run, memoized_loader())
    return _RUN[1]


def load_host_config(data: Any, pin: Pinner | None = None,
                     own: frozenset[str] = frozenset()) -> HostConfig:
    """Validate host data (pyinfra host.data or a plain dict) into a HostConfig; with
    `pin`, each service's models are pinned (the deploy's model stage); `own`: keys the
    caller reads itself (uninstall's keep_*)."""
    hd = parse(_kit_data(data, own), typed_keys(data))
    way = rule_runtime(hd)
    services, absent = _services(hd, data, pin)
    rule_gateway(hd, services)
    if hd.source is None:
        raise fail("source", "None is not a mapping", SOURCE_FIX)
    return HostConfig(data=hd, services=services, absent=absent, source=hd.source,
                      requested_way=way)


# ------------------------------------------------------------------ rules between keys

def rule_runtime(hd: HostData) -> Runtime:
    """`mode` and `runtime` name one of the four ways (core/runtime.py's `requested`)."""
    try:
        return requested(hd.mode, hd.runtime, hd.use_docker_desktop)
    except ValueError:
        assert hd.runtime is not None  # an unset runtime is always a way
        way = ways_named(hd.runtime)[0]  # the one way this runtime names
        raise fail("runtime", f"{hd.runtime!r} runs {way.runs}, but mode is {hd.mode!r}",
                   f"set mode = {way.mode!r}, or runtime = 'systemd' (or remove it)") from None


def rule_beside_services(data: Any) -> None:
    """With `services`, a service key at the top level is read by no service: refused where
    more than the kit's defaults set it (by pyinfra's layers; a value equal, type too, to
    group_data/all.py's is taken for the default)."""
    own: dict[str, str] = {}
    names = ("in host data",) if isinstance(data, Mapping) else _OWN_LAYERS
    for layer, where in zip(_layers(data), names, strict=False):
        for k, v in layer.items():
            default = group_all().get(str(k), _UNSET)
            if str(k) in SERVICE_KEYS and not (type(v) is type(default) and v == default):
                own.setdefault(str(k), where)
    for name in SERVICE_KEYS:
        if name in own:
            raise fail(name, f"given at the top level beside `services` ({own[name]}), where "
                       "no service reads it", f"move it into each `services` entry that "
                       f"needs it (services[i].{name}), or remove it")


def _services(hd: HostData, data: Any, pin: Pinner | None = None
              ) -> tuple[tuple[ServiceConfig, ...], tuple[str, ...]]:
    """The services this host runs and the names of those it must remove (state absent)."""
    if hd.services is None:
        entries: list[tuple[ServiceData, str]] = [(hd, "")]
    else:
        rule_beside_services(data)
        entries = [(s, f"services[{i}].") for i, s in enumerate(hd.services)]
    services = tuple(_service(e, prefix, hd.hf_endpoint, pin)
                     for e, prefix in entries if e.state == "present")
    absent = tuple(e.service_name for e, _ in entries if e.state == "absent")
    rule_one_build(services)
    rule_distinct(services, absent)
    rule_vram_per_card(services, hd.vram_budget_gib)
    return services, absent


def _service(entry: ServiceData, prefix: str, endpoint: str,
             pin: Pinner | None = None) -> ServiceConfig:
    if entry.profile is None:
        raise fail(f"{prefix}profile", "missing", "set profile = 'cpu-tiny' or another profile")
    profile = PROFILES[entry.profile]
    rule_loopback_needs_key(f"{prefix}bind_address", entry.bind_address, entry.api_key_file,
                            "api_key_file")
    model = _own_model(entry, prefix, profile.model) or \
        _model_file(entry, prefix, "model", profile.model)
    rule_draft_keys(entry, prefix, profile)
    draft = profile.server.draft_model
    if draft is not None:
        draft = _model_file(entry, prefix, "draft", draft)
    if entry.slots is not None and entry.slots > 1 and profile.server.draft_model is not None:
        # beellama drafts for one slot (dflash_max_slots 1, common/common.h) and gives a
        # draft profile's context two sequences a slot: more slots would halve each one's
        # context and leave all but the first without their draft
        raise fail(f"{prefix}slots", f"{entry.slots} slots with profile {profile.name}, whose "
                   "draft model serves one slot", "remove slots, or pick a profile without a "
                   "draft (`beekeeper profiles`)")
    if entry.ctx_size is not None or entry.slots is not None:
        key = f"{prefix}ctx_size" if entry.ctx_size is not None else f"{prefix}slots"
        ctx = rule_ctx_size(key, profile.server.ctx_size if entry.ctx_size is None
                            else entry.ctx_size, profile, entry.slots)
        profile = with_ctx_size(profile, ctx, entry.slots)
    if pin is not None:  # preflight's VRAM plan (a GPU profile's) reads the served file
        model = pin(model, endpoint, "model", profile.backend == "cuda")
        draft = pin(draft, endpoint, "draft", False) if draft is not None else None
    return ServiceConfig(data=entry, at=prefix, profile=profile, model=model, draft=draft)


def rule_loopback_needs_key(key: str, bind: str, key_file: str | None, key_name: str) -> None:
    """A server or gateway on an address other than loopback needs an API key."""
    if not ipaddress.ip_address(bind).is_loopback and not key_file:
        raise fail(key, f"{bind} is not loopback and no API key is set",
                   f"set {key_name} to a file holding the key, or bind 127.0.0.1")


def rule_ctx_size(key: str, value: int, profile: Profile, slots: int | None = None) -> int:
    """ctx_size: from MIN_CTX_SIZE to the model's trained context per slot (llama.cpp's
    n_ctx_seq: the total over the slots, rounded up to 256, is held to n_ctx_train)."""
    slots = slots or profile.server.parallel
    train = profile.model.n_ctx_train
    if -(-(value // slots) // 256) * 256 > train:
        each = f" per slot ({slots} slots: {train * slots} in all)" if slots > 1 else ""
        raise fail(key, f"{value!r} exceeds the model's trained context {train}{each}",
                   f"lower ctx_size to {train * slots} or less, or remove it")
    floor = MIN_CTX_SIZE * slots
    if value < floor:
        what = f"{value!r}" if key.endswith("ctx_size") else f"ctx_size {value!r}"
        fewer = ", or use fewer slots" if slots > 1 else ""
        raise fail(key, f"{what} is below {floor} tokens ({MIN_CTX_SIZE} per slot, "
                   f"{slots} slot(s))", f"raise ctx_size to {floor} or more{fewer}, or "
                   f"remove it (the profile's is {profile.server.ctx_size})")
    return value


def rule_draft_keys(entry: ServiceData, prefix: str, profile: Profile) -> None:
    """draft_* is read only for a profile with a draft model: elsewhere it is refused."""
    if profile.server.draft_model is not None:
        return
    given = [k for k in ("repo", "file", "revision", "sha256")
             if getattr(entry, f"draft_{k}") is not None]
    if given:
        with_draft = sorted(n for n, p in PROFILES.items() if p.server.draft_model)
        raise fail(f"{prefix}draft_{given[0]}", f"profile {profile.name} has no draft model, "
                   "so no draft_* key is read", "remove it, or pick a profile with a draft ("
                   f"{', '.join(with_draft) or 'none'})")


def _own_model(entry: ServiceData, prefix: str, base: ModelFile) -> ModelFile | None:
    """Host data `model_path` or `model_host_path` as the served file; None: neither."""
    given = [k for k in ("model_path", "model_host_path") if getattr(entry, k) is not None]
    if not given:
        return None
    if len(given) == 2:
        raise fail(f"{prefix}model_host_path", "given beside model_path: one model file is "
                   "served", "keep model_path (a file on the controller) or model_host_path "
                   "(one on the host)")
    hub = [k for k in ("model_repo", "model_file", "model_revision")
           if getattr(entry, k) is not None]
    if hub:
        raise fail(f"{prefix}{hub[0]}", f"a Hub key beside {given[0]}, which names the file "
                   "itself", f"remove {hub[0]}, or {given[0]}")
    sha = entry.model_sha256
    if entry.model_host_path is not None:
        path = entry.model_host_path
        if sha is None:
            raise fail(f"{prefix}model_sha256", f"missing for model_host_path {path} (the "
                       "kit checks the file before serving it)", f"run `sha256sum {path}` on "
                       "the host and set model_sha256 to its 64 hex digits")
        # outside model_dir in container mode: rule_model_in_model_dir, run by preflight
        return replace(base, filename=path.rsplit("/", 1)[1], source=FileSource(path, True),
                       sha256=sha, size_bytes=0)
    path = str(entry.model_path)
    local = Path(path)
    if not local.is_file():
        raise fail(f"{prefix}model_path", f"{path} is not a file on the controller"
                   + (" (a folder)" if local.is_dir() else ""),
                   "give the path of the .gguf file on the controller (for a file already on "
                   "the host use model_host_path)")
    return replace(base, filename=local.name, source=FileSource(path, False), sha256=sha,
                   size_bytes=local.stat().st_size)


def rule_model_in_model_dir(cfg: HostConfig) -> None:
    """Container mode mounts model_dir alone: a model_host_path outside it is refused
    (Runtime.serves_from)."""
    way = cfg.requested_way
    for svc in cfg.services:
        source = svc.model.source
        if not (isinstance(source, FileSource) and source.on_host):
            continue
        path = source.path
        folder = path.rsplit("/", 1)[0] or "/"
        if not way.serves_from(folder, cfg.data.model_dir):
            raise fail(f"{svc.at}model_host_path", f"{path} is outside model_dir "
                       f"{cfg.data.model_dir}, the one folder the server's container mounts",
                       f"move the file into {cfg.data.model_dir}, set model_dir = {folder!r}, "
                       "or mode = 'native'")


def _model_file(entry: ServiceData, prefix: str, role: str, base: ModelFile) -> ModelFile:
    """The profile's model file with host data `<role>_repo/_file/_revision/_sha256` applied."""
    repo, file = getattr(entry, f"{role}_repo"), getattr(entry, f"{role}_file")
    revision, sha = getattr(entry, f"{role}_revision"), getattr(entry, f"{role}_sha256")
    if repo is None and file is None and revision is None:
        return base if sha is None or sha == base.sha256 else replace(base, sha256=sha)
    old = base.source if isinstance(base.source, HfSource) else None
    if old is None and repo is None and file is None:
        # a revision alone: nothing on the Hub to pin (the key named is the one given)
        raise fail(f"{prefix}{role}_revision",
                   f"{shown(revision)} cannot pin the profile's {role} ({base.filename}), "
                   "which is not on the Hub",
                   f"remove {role}_revision, or serve a model from the Hub: set {role}_repo "
                   f"and {role}_file together (`{role}_repo`, `{role}_file`), then "
                   f"{role}_revision pins it")
    if old is None and (repo is None or file is None):
        raise fail(f"{prefix}{role}_repo", f"the profile's {role} is not on the Hub",
                   f"set {role}_repo and {role}_file together")
    if old is not None and repo not in (None, old.repo) and file is None:
        # the profile's file name is no name of the user's repository: it would be looked for
        # there, and a failed pin would name the revision
        raise fail(f"{prefix}{role}_file", f"missing beside {role}_repo {shown(repo)}, another "
                   f"repository than the profile's ({old.repo}), where the profile's file name "
                   f"({base.filename}) would be looked for", f"set {role}_file to the GGUF's "
                   "name in that repository")
    same_file = file in (None, base.filename) and repo in (None, old and old.repo)
    source = HfSource(repo=repo or (old.repo if old else ""),
                      revision=revision or (old.revision if old and same_file else "main"))
    # another file or revision: the profile's hash and size no longer apply
    unchanged = same_file and revision is None
    return ModelFile(filename=file or base.filename, source=source,
                     sha256=sha or (base.sha256 if unchanged else None),
                     size_bytes=base.size_bytes if unchanged else 0,
                     n_ctx_train=base.n_ctx_train)


def rule_one_build(services: tuple[ServiceConfig, ...]) -> None:
    """One host runs one build of the server: its services all CPU or all GPU profiles."""
    kinds = {s.profile.backend for s in services}
    if len(kinds) > 1:
        first = services[0]
        other = next(s for s in services if s.profile.backend != first.profile.backend)
        raise fail(f"{other.at}profile", f"{other.profile.name} ({other.profile.backend}) "
                   f"and {first.profile.name} ({first.profile.backend}) on one host, which "
                   "runs one build of the server", "put CPU and GPU services on separate "
                   "inventory hosts, or pick profiles of one kind")


def rule_distinct(services: tuple[ServiceConfig, ...], absent: tuple[str, ...]) -> None:
    """Each service its own port and its own name."""
    ports = [s.data.port for s in services]
    if len(set(ports)) != len(ports):
        raise fail("services", f"two services share a port ({ports})", "give each its own port")
    names = [s.name for s in services] + list(absent)
    if len(set(names)) != len(names):
        raise fail("services", f"two services share a name ({names})", "name them apart")


def rule_vram_per_card(services: tuple[ServiceConfig, ...], budget_gib: float) -> None:
    """The GPU services of a host share its card: their planned VRAM together stays within
    vram_budget_gib (one service alone is preflight's check). Each is planned with the file
    it serves; where the controller cannot read one yet (model_host_path, a Hub file not
    pinned), preflight's check_vram adds them up once it has read it."""
    gpu = [s for s in services if s.profile.backend == "cuda"]
    if len(gpu) < 2:
        return
    planned = [(s.name, _planned_mib(s)) for s in gpu]
    known = [(name, mib) for name, mib in planned if mib is not None]
    if len(known) == len(planned):
        rule_planned_per_card(known, budget_gib)


def _planned_mib(svc: ServiceConfig) -> float | None:
    """The VRAM plan of what `svc` serves, None where the controller cannot plan its file
    (not read yet, or no GGUF the planner reads: preflight says which)."""
    from .planner import predict, served_gguf

    gguf = served_gguf(svc.model)
    profiles = (svc.model.filename, svc.model.source) == \
        (svc.profile.model.filename, svc.profile.model.source)
    if gguf is None and not profiles:
        return None
    try:
        return predict(svc.profile, gguf).total_mib
    except ValueError:  # PlanError too
        return None


def rule_planned_per_card(planned: list[tuple[str, float]], budget_gib: float) -> None:
    """The GPU services' plans (service name, MiB) together within vram_budget_gib."""
    total, budget_mib = sum(mib for _, mib in planned), budget_gib * 1024
    if len(planned) > 1 and total > budget_mib:
        each = " + ".join(f"{name} {mib:.0f}" for name, mib in planned)
        raise fail("vram_budget_gib", f"the {len(planned)} GPU services on this host's card "
                   f"plan {total:.0f} MiB together ({each} MiB), over the budget per card "
                   f"{budget_gib:g} GiB ({budget_mib:.0f} MiB)", "drop a service, pick "
                   "smaller profiles, ctx_size or slots, or raise vram_budget_gib")


def rule_env_keys(services: tuple[ServiceConfig, ...], way: Runtime) -> None:
    """Each API key must go literally into the way's secrets env file (Runtime.env_carries):
    the way that runs the server on this host (preflight: a pod without systemd runs the
    native server under supervisord, which reads the key file itself)."""
    for svc in services:
        file = svc.data.api_key_file
        if file and not way.env_carries(Path(file).read_text().strip()):
            raise fail(f"{svc.at}api_key_file", f"the key in {file} holds \\ or a quote, which "
                       f"the {way.name}'s env file cannot carry literally",
                       "use a key without them (e.g. `openssl rand -hex 32`)"
                       + (", or runtime = 'systemd'" if way.compose else ""))


def rule_gateway(hd: HostData, services: tuple[ServiceConfig, ...]) -> None:
    """Host data `gateway`: not on loopback without a key, on a port of its own."""
    gw = hd.gateway
    if gw is None:
        return
    rule_loopback_needs_key("gateway.bind_address", gw.bind_address, gw.api_key_file,
                            "gateway['api_key_file']")
    if gw.port in [s.data.port for s in services]:
        raise fail("gateway.port", f"{gw.port} is also a model service's port on this host",
                   "give the gateway a port of its own, e.g. gateway = {'port': 4000}")
