"""
Preflight: read the host's facts and stop with one clear message before any change.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import posixpath
import shlex
import tempfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pyinfra import host
from pyinfra.api import FactBase
from pyinfra.facts.files import Directory, File
from pyinfra.facts.server import Command

from beekeeper.core import ggufhead
from beekeeper.core.build import GIB_PER_CPU_JOB, GIB_PER_CUDA_JOB, build_spec
from beekeeper.core.config import (
    HostConfig,
    ServiceConfig,
    rule_env_keys,
    rule_model_in_model_dir,
    rule_planned_per_card,
)
from beekeeper.core.container import MODELS
from beekeeper.core.cpu import baseline_or_refuse
from beekeeper.core.distro import compose_package, no_compose_fix
from beekeeper.core.errors import PreflightError, echo, host_data
from beekeeper.core.gateway import systemd_refusal as gateway_systemd_refusal
from beekeeper.core.hostdata import PERSISTENT_FIX, PERSISTENT_NONE
from beekeeper.core.machines import leaving
from beekeeper.core.native import install_dir, install_files, keeps_toolkit_libs
from beekeeper.core.paths import (
    AUTO_PERSISTENT_ROOT,
    CONF_ROOT,
    HOSTSIDE_DIR,
    LOG_DIR,
    MODEL_DIR,
    NATIVE_PREFIX,
    POD_VOLUME,
    SERVER_USER,
    STATE_DIR,
    SUPERVISOR_PIDFILE,
    ServicePaths,
    cron_command,
    kept_at,
    runpod_start_line,
    sha256_stamps,
    start_line,
    wsl_boot_command,
)
from beekeeper.core.planner import PlanError, Prediction, gguf_problem, predict, served_gguf
from beekeeper.core.profiles import PROFILES, FileSource, HfSource, ModelFile, with_ctx_size
from beekeeper.core.runtime import Runtime
from beekeeper.core.toolkit import host_toolkit
from beekeeper.facts.boot import WslSettings, WslSettingsInfo
from beekeeper.facts.docker import (
    ComposeVersion,
    DockerEngine,
    DockerEngineInfo,
    DockerImageId,
    PortContainers,
)
from beekeeper.facts.gguf import FileHead, Sha256File
from beekeeper.facts.gpu import GpuInfo, NvidiaSmiInfo
from beekeeper.facts.host import (
    BuildResources,
    DiskInfo,
    DiskOf,
    InitInfo,
    InitSystem,
    OsRelease,
    OsReleaseInfo,
    PortOwner,
    PortOwners,
    PortOwnersInfo,
    ProxyVars,
    Resources,
    Wsl,
    WslInfo,
)
from beekeeper.facts.hostfacts import HostFacts
from beekeeper.facts.services import DeployedServices, deployed_manifest
from beekeeper.facts.toolchain import HostTools, HostToolsInfo, OthersCannotRead
from beekeeper.facts.volume import FsOf
from beekeeper.operations import native as native_ops

from .driver_preflight import archs_built, archs_of_cards, check_cuda, check_cuda_builds
from .model import placed_sha256
from .say import say, warn

GIB = 1 << 30


def check_vram(cfg: HostConfig, gpu: NvidiaSmiInfo | None) -> None:
    """Each service within the VRAM budget; all of them within the card, 1 GiB to spare. A
    service's plan is its shape and its model: the user's own GGUF (on the controller, or on
    the host: `host_gguf`), else the profile's."""
    budget_mib = cfg.data.vram_budget_gib * 1024
    planned: list[tuple[str, float]] = []
    for svc in cfg.services:
        with host_gguf(svc.model, cfg.data.model_dir) as on_host:
            gguf = served_gguf(svc.model) or on_host
            key, named = _served_as(svc.model, cfg.data.model_dir, on_host, gguf)
            try:
                pred = predict(svc.profile, gguf)
            except PlanError as e:  # a model file the planner cannot read
                problem = e.problem.replace(str(gguf), named)
                raise PreflightError(host_data(key), f"{problem}, and the VRAM plan reads "
                                     "its layout", e.fix or GGUF_FIX) from None
            except ValueError as e:  # the file's KV rows do not fill the profile's cache type
                raise PreflightError(
                    host_data(key), f"{named} with profile {svc.profile.name}: {e}",
                    "pick a profile whose KV cache types fit the model (`beekeeper plan "
                    "--profile NAME --gguf FILE` tries one)", lead=" ") from None
        if pred.total_mib > budget_mib:
            raise _over_budget(cfg, svc, pred, budget_mib,
                               (key, named) if gguf is not None else None)
        planned.append((svc.name, pred.total_mib))  # all of one kind: cuda here (config.py)
    # on one card together, each planned with the file it serves (config.py plans them
    # before any fact where the controller holds every file)
    rule_planned_per_card(planned, cfg.data.vram_budget_gib)
    total = sum(mib for _, mib in planned)
    card = gpu.gpus[0].memory_total_mib if gpu and gpu.gpus else None
    if card and len(cfg.services) > 1 and total + 1024 > card:
        raise PreflightError(
            f"the {len(cfg.services)} services", f"need {total:.0f} MiB together, more than "
            f"the card's {card} MiB less 1024 MiB margin", "drop a service or pick smaller "
            "profiles", lead=" ", then=": ")


def _served_as(model: ModelFile, model_dir: str, on_host: Path | None,
               gguf: Path | None) -> tuple[str, str]:
    """The host data key that named the model file planned, and the file as the user named
    it (a Hub file by its repository and name, not the controller's copy of its header)."""
    if on_host is not None:
        return "model_host_path", model.host_path(model_dir)
    if isinstance(model.source, HfSource):
        return "model_repo", f"{model.source.repo}/{model.filename}"
    return "model_path", str(gguf)


# How much of a model file the VRAM check reads: a GGUF's header (metadata, the tokenizer's
# vocabulary, the tensor table) is a few MiB; a longer one is not one the planner reads.
GGUF_HEADER_FIRST = 4 << 20
GGUF_HEADER_MAX = 256 << 20


def gguf_header_command(path: str, length: int) -> str:
    """The shell line that prints a model file's size, then its first `length` bytes gzipped
    in base64 (`unreadable` where it cannot: then the profile's model is planned)."""
    q = shlex.quote(path)
    return (f"if [ -f {q} ] && [ -r {q} ] && command -v gzip >/dev/null && "
            f"command -v base64 >/dev/null; then "
            f"stat -L -c %s -- {q} && "
            f"head -c {int(length)} -- {q} | gzip -1 -c | base64; else echo unreadable; fi")


def parse_gguf_header(text: str | None) -> tuple[int, bytes] | None:
    """`gguf_header_command`'s output -> (the file's size, its first bytes); None where the
    file could not be read, or the output is not what the command prints."""
    lines = (text or "").split()
    if not lines or not lines[0].isdigit():
        return None
    try:
        data = gzip.decompress(base64.b64decode("".join(lines[1:])))
    except (binascii.Error, OSError, EOFError, zlib.error):
        return None
    size = int(lines[0])
    return (size, data) if data or not size else None  # nothing came (no gzip there)


def header_walk(first: Callable[[int], tuple[int, bytes] | None]) -> tuple[int, bytes] | None:
    """(a model file's size, its GGUF header's bytes), read by `first(length)` (None: it
    cannot be read): GGUF_HEADER_FIRST bytes, then as many as the header says, up to
    GGUF_HEADER_MAX; where that ends inside the header, or the bytes are no header this walk
    knows, what was read (the planner says what it is). For host_gguf and beekeeper/hubhead.py."""
    length = GGUF_HEADER_FIRST
    while True:
        got = first(length)
        if got is None:
            return None
        size, data = got
        try:
            return size, data[:ggufhead.parse(data).length]
        except ggufhead.Short as short:
            if len(data) < length or length >= GGUF_HEADER_MAX:
                return size, data
            length = min(GGUF_HEADER_MAX, max(length * 2, short.need * 5 // 4))
        except ValueError:  # no header this walk knows: the planner says what it is
            return size, data


@contextmanager
def host_gguf(model: ModelFile, model_dir: str) -> Iterator[Path | None]:
    """A model file on the host (`model_host_path`) as the planner reads it on the controller:
    a stand-in holding the host file's header, as long as the host file and sparse beyond it.
    None for any other model, or where the host file cannot be read (the model checks after
    this one say why): the profile's model is planned then."""
    if not model.users_file:
        yield None
        return
    path = model.host_path(model_dir)
    got = header_walk(lambda length: parse_gguf_header(
        host.get_fact(Command, command=gguf_header_command(path, length))))
    if got is None:
        yield None
        return
    size, found = got
    with tempfile.TemporaryDirectory(prefix="beekeeper-gguf-") as tmp:
        stand_in = Path(tmp) / Path(path).name
        with open(stand_in, "wb") as f:
            f.write(found)
            f.truncate(max(size, len(found)))
        yield stand_in


def _over_budget(cfg: HostConfig, svc: ServiceConfig, pred: Prediction, budget_mib: float,
                 own: tuple[str, str] | None = None) -> PreflightError:
    """The refusal of a service over the budget: its plan by part, and the ways out at its
    own shape (the profiles that fit with its slots, fewer slots, a smaller context); `own`:
    the user's model file, as (its host data key, its path), where it is not the profile's."""
    base = PROFILES[svc.profile.name].server
    s = svc.profile.server
    shape = ([f"ctx_size {s.ctx_size}"] if s.ctx_size != base.ctx_size else []) + \
        ([f"{s.parallel} slots"] if s.parallel != base.parallel else [])
    said = f" at {', '.join(shape)}" if shape else ""
    said += f" with your {own[0]} {own[1]}" if own else ""
    fits = [n for n, p in PROFILES.items() if p.backend == "cuda" and p.layout
            and (s.parallel == p.server.parallel or p.server.draft_model is None)
            and predict(with_ctx_size(p, p.server.ctx_size, s.parallel)).total_mib
            <= budget_mib]
    more = (", or fewer slots" if s.parallel > 1 else "") + \
        (", or a smaller ctx_size" if s.ctx_size != base.ctx_size else "")
    with_slots = f" with {s.parallel} slots" if s.parallel != 1 else ""
    return PreflightError(
        f"profile {svc.profile.name}{said}", f"needs {pred.total_mib:.0f} MiB of VRAM, over "
        f"vram_budget_gib {cfg.data.vram_budget_gib:g} ({budget_mib:.0f} MiB): weights "
        f"{pred.weights_mib:.0f} + KV {pred.kv_mib:.0f} + recurrent {pred.recurrent_mib:.0f} + "
        f"draft {pred.draft_mib:.0f} + compute {pred.compute_mib:.0f} + CUDA "
        f"{pred.cuda_context_mib:.0f} MiB",
        f"profiles that fit{with_slots}: {', '.join(fits) or 'none'}{more}; or raise "
        "vram_budget_gib", lead=" ", then="; ")


def classify_port_owner(owner: PortOwner, info: PortOwnersInfo, rt: Runtime,
                        units: frozenset[str], docker_ours: bool) -> str:
    """What a listener on a service's port is to the kit, from /proc alone:

    - "supervised": the kit's server as the runtime runs it (Runtime.runs_process: under the
      kit's supervisord, or in the cgroup of a unit in `units`), or the docker-proxy that
      publishes the service's own container (`docker_ours`);
    - "orphan": a server of the kit's that nothing supervises (user beekeeper, a binary under
      NATIVE_PREFIX as written or as the host resolves it, in no beekeeper unit);
    - "unknown": a listener whose process /proc did not show;
    - "foreign": anything else, a llama-server someone started by hand too.
    """
    if owner.pid is None:
        return "unknown"
    if docker_ours and "docker-proxy" in (owner.comm, owner.exe.rsplit("/", 1)[-1]):
        return "supervised"
    lineage = (owner.ppid, *owner.ancestors)
    under_supervisord = info.supervisord is not None and info.supervisord in lineage
    kit_units = {seg for path in owner.cgroups for seg in path.split("/")
                 if seg.startswith("beekeeper-") and seg.endswith(".service")}
    in_unit = bool(kit_units & {f"beekeeper-{n}.service" for n in units})
    if rt.runs_process(under_supervisord, in_unit):
        return "supervised"
    prefixes = {p.rstrip("/") for p in (NATIVE_PREFIX, info.native_prefix_real) if p}
    kit_binary = any(owner.exe.startswith(p + "/") for p in prefixes)
    if owner.user == SERVER_USER and kit_binary and not kit_units and not under_supervisord:
        return "orphan"
    return "foreign"


def check_port(name: str, port: int, docker_present: bool, leaving: frozenset[str],
               rt: Runtime) -> tuple[int, ...]:
    """The port is free, or held by this service's own server (classify_port_owner); any
    other container or process there is refused. Returns the pids of the kit's servers no
    supervisor owns, for the deploy to end."""
    containers = host.get_fact(PortContainers, port=port) if docker_present else []
    foreign = [c for c in containers if c.service != name and c.service not in leaving]
    if foreign:
        c = foreign[0]
        owner = f"beekeeper service {c.service!r}" if c.service else f"image {c.image}"
        raise PreflightError(
            f"port {port} on the host", f"is published by the Docker container {c.name!r} "
            f"({owner}), not by this service's container", f"stop it (docker stop {c.name}), "
            "or set `port` to a free port", lead=" ", then=": ")
    record = deployed_manifest(ServicePaths(name).manifest)
    ours_before = bool(record and record.port == port)
    info: PortOwnersInfo = host.get_fact(PortOwners, port=port, pidfile=SUPERVISOR_PIDFILE,
                                         native_prefix=NATIVE_PREFIX)
    orphans: dict[int, PortOwner] = {}
    for o in info.owners:
        kind = classify_port_owner(o, info, rt, frozenset({name}) | leaving,
                                   bool(containers) or (ours_before and docker_present))
        if kind == "supervised":
            continue
        if kind == "orphan" and o.pid is not None:
            orphans[o.pid] = o
            continue
        if kind == "unknown":
            if ours_before:  # as before: our own server, seen from outside its namespace
                continue
            raise PreflightError(
                f"port {port} on the host", "is in use by a process /proc does not show "
                f"(listening socket inode {o.inode or '?'}; another PID namespace, or no "
                "root)", "stop it, or set `port` to a free port", lead=" ", then=": ")
        unit = next((seg for path in o.cgroups for seg in path.split("/")
                     if seg.startswith("beekeeper-") and seg.endswith(".service")), None)
        also = f", in {unit}" if unit else ""
        raise PreflightError(
            f"port {port} on the host", f"is in use by pid {o.pid} (user {o.user or '?'}, "
            f"program {o.program}{also}), not by this service's server", f"stop it (kill "
            f"{o.pid}), or set `port` to a free port", lead=" ", then=": ")
    for pid, o in orphans.items():
        warn(f"port {port} is held by pid {pid} ({o.exe}, user {SERVER_USER}), a server of the "
             "kit's that no supervisor owns (its supervisor ended without it): the deploy "
             f"ends it and starts beekeeper-{name} under supervision")
    return tuple(orphans)


def check_compose(cfg: HostConfig, os_release: OsReleaseInfo,
                  docker: DockerEngineInfo) -> str | None:
    """Runtime "compose": the compose v2 plugin is there, or a package of the host's sources
    brings it (tasks/docker_engine.py installs it)."""
    if not cfg.requested_way.needs_compose_plugin:
        return None
    version = host.get_fact(ComposeVersion) if docker.present else None
    release = os_release.as_mapping()
    if version is None and compose_package(release, docker.flavour) is None:
        raise PreflightError(
            host_data("runtime"), "'compose' needs the compose v2 plugin (`docker compose`), "
            "which this host lacks", no_compose_fix(release, docker.flavour))
    return version


def check_init(cfg: HostConfig, init: InitInfo, wsl: WslInfo,
               docker_present: bool = False) -> Runtime:
    """What runs the server: where systemd is PID 1, the way host data asks for; else its
    way without systemd (Runtime.without_systemd: the kit's own supervisord, native mode
    only, no Docker engine without systemd), refused where host data asked for another."""
    rt = cfg.requested_way
    if init.systemd:
        return rt
    fallback = rt.without_systemd
    if fallback is rt:  # host data asked for supervisor
        return rt
    if wsl.is_wsl2:
        fix = ("/etc/wsl.conf has `systemd=true` under `[boot]` already: run `wsl.exe "
               "--shutdown` on Windows (`wsl.exe --update` first where WSL is older than "
               "0.67.6)" if wsl.wsl_conf_systemd else "add `systemd=true` under `[boot]` in "
               "/etc/wsl.conf, run `wsl.exe --shutdown` on Windows")
        raise PreflightError(
            "systemd", "is not PID 1 in this WSL2 distro", f"{fix}, then deploy again (or "
            "runtime = 'supervisor' with mode = 'native' in host data; on @local: `--data "
            "mode=native --data runtime=supervisor`)", lead=" ", then=": ")
    if cfg.data.runtime is not None:
        raise PreflightError(
            host_data("runtime"), f"{cfg.data.runtime!r} needs systemd as PID 1, and PID 1 "
            f"here is {init.pid1!r} (a container)", "remove `runtime` (the server then runs under "
            "the kit's own supervisord) and set mode = 'native'")
    if fallback is None:
        raise PreflightError(
            host_data("mode"), f"{cfg.data.mode!r} runs the server in a Docker container, and this "
            f"host has {'a docker CLI but' if docker_present else 'no Docker engine and'} no "
            f"systemd (PID 1 is {init.pid1!r}: a container) to run one", "set mode = "
            "\"native\" (the server is built on the host and runs under the kit's "
            "supervisord; on @local: `--data mode=native`, or deploy with "
            "inventories/gpu-container.py, which sets it)")
    return fallback


# the kit's folders on the host: a persistent root inside one would link into itself
KIT_FOLDERS = (NATIVE_PREFIX.rsplit("/", 1)[0], CONF_ROOT, STATE_DIR, LOG_DIR, HOSTSIDE_DIR,
               MODEL_DIR.rsplit("/", 1)[0])


def check_persistent_root(cfg: HostConfig, rt: Runtime, init: InitInfo) -> str | None:
    """Host data `persistent_root` resolved from the host (docs/gpu-containers.md), or None
    for the standard layout; unset: AUTO_PERSISTENT_ROOT where POD_VOLUME is a folder off the
    container's overlay layer (which RunPod and Kubernetes clear when the pod restarts)."""
    given = cfg.data.persistent_root
    if given == PERSISTENT_NONE:
        return None
    if rt.restarts_with_host:
        if given is not None:
            raise PreflightError(
                host_data("persistent_root"), f"{given} keeps the server of runtime supervisor "
                f"(a GPU container, PID 1 not systemd), and this host runs it under {rt.runtime} "
                f"(PID 1 is {init.pid1!r}), which keeps the standard layout",
                "remove persistent_root")
        return None
    if given is None:
        volume = host.get_fact(Directory, path=POD_VOLUME)
        fs = host.get_fact(FsOf, path=AUTO_PERSISTENT_ROOT if volume else "/")
        if fs is not None and fs.overlay:
            said = (f"{POD_VOLUME} is on the container's own layer ({fs.fstype}), not a volume"
                    if volume else f"this container has no {POD_VOLUME}, and its own disk is "
                    f"its layer ({fs.fstype})")
            warn(f"{said}: the kit keeps the standard layout (/opt, /etc, /var), which a pod's "
                 "restart clears on RunPod and Kubernetes; where the pod has a volume, set "
                 "persistent_root to a folder on it (BEEKEEPER_PERSISTENT_ROOT with "
                 "inventories/gpu-container.py; Vast.ai keeps the container's disk: "
                 "persistent_root = 'none' says so and ends this warning)")
        return AUTO_PERSISTENT_ROOT if volume and not (fs and fs.overlay) else None
    inside = next((k for k in KIT_FOLDERS if given == k or given.startswith(k + "/")), None)
    if inside:
        raise PreflightError(
            host_data("persistent_root"), f"{given} is inside {inside}, one of the folders the "
            "kit keeps under the root itself", PERSISTENT_FIX)
    fs = host.get_fact(FsOf, path=given)
    if fs is not None and fs.overlay:
        where = f"{fs.existing}, file system {fs.fstype}" + \
            (f" mounted at {fs.target}" if fs.target else "")
        raise PreflightError(
            host_data("persistent_root"), f"{given} is on the container's own layer ({where}), "
            "which RunPod and Kubernetes clear when the pod restarts", PERSISTENT_FIX)
    return given


# build tools the native build needs -> the Debian/Ubuntu package that brings each
TOOL_PACKAGES = {"cmake": "cmake", "c++": "g++", "make": "make", "git": "git"}


def check_supervisor_tools(tools: HostToolsInfo, rt: Runtime) -> None:
    """Runtime supervisor: python3 (>= 3.8) for the kit's supervisord, setpriv for the
    server's user."""
    if not rt.under_systemd:  # the kit's supervisord runs it
        if tools.python3 is None or (tools.python3_version or (0, 0)) < (3, 8):
            found = ("none" if tools.python3 is None else
                     f"{tools.python3} {'.'.join(map(str, tools.python3_version or ()))}")
            raise PreflightError(
                "runtime supervisor", "runs the kit's supervisord with the host's python3 (>= "
                f"3.8), and this host has {found}", "install python3 (apt-get install "
                "python3), then deploy again", lead=" ")
        if tools.setpriv is None:
            raise PreflightError(
                "runtime supervisor", "starts the server as user beekeeper with setpriv, which "
                "this host lacks", "apt-get install util-linux, then deploy again", lead=" ")


def check_tools(cfg: HostConfig, tools: HostToolsInfo, rt: Runtime,
                built: bool = False) -> list[str]:
    """The packages apt is to install for a native build, after refusing a host that lacks
    a build tool and has no package lists to install it from (a container image never
    `apt-get update`d). `built`: the build is installed already (a pod's restart cleared the
    tools, not the build on its volume): no build tool is needed."""
    if not rt.builds_on_host or "build" not in cfg.data.stages or built:
        return []
    wanted = ["cmake", "c++", "make"] + (["git"] if cfg.source.kind == "git" else [])
    missing = tools.missing(tuple(wanted))
    if missing and tools.apt_lists == 0:
        raise PreflightError(
            "the native build", f"needs {', '.join(missing)}, which this host lacks, and apt "
            "has no package lists to install them from (apt-get update never ran here, or the "
            f"host is offline)", f"install {', '.join(missing)} on the host (apt-get update "
            f"&& apt-get install {' '.join(TOOL_PACKAGES[t] for t in missing)}), then deploy "
            "again", lead=" ")
    return [TOOL_PACKAGES[t] for t in missing]


def check_host_toolkit(cfg: HostConfig, tools: HostToolsInfo, gpu: NvidiaSmiInfo | None
                       ) -> tuple[str | None, Callable[[], None]]:
    """A native CUDA build on a host whose own CUDA toolkit builds for the card and runs on
    its driver (beekeeper.core.toolkit): that toolkit's release, used instead of installing
    one; None: the kit installs cuda_version's toolkit from NVIDIA's repository. With it,
    the line that tells the choice, for the caller to say once the release the build uses
    passed its own checks (before a refusal of that release it would say nothing of use)."""
    if not cfg.requested_way.builds_on_host or cfg.service.profile.backend != "cuda" \
            or not tools.nvcc or not gpu or not gpu.gpus:
        return None, lambda: None
    # the archs check_cuda_builds judges: this toolkit is used only where it builds them all
    archs = [arch for arch, _ in archs_built(cfg, gpu)]
    choice = host_toolkit(tools.nvcc_version, archs, gpu.driver_branch)
    if not choice.use:
        return None, lambda: warn(f"{choice.why}: the kit installs CUDA "
                                  f"{cfg.data.cuda_version}'s toolkit instead")
    return ".".join((tools.nvcc_version or "").split(".")[:2]), lambda: say(choice.why)


GGUF_FIX = ("give the path of a GGUF model file (version 2 or 3, as llama.cpp's "
            "convert_hf_to_gguf.py and the Hub's GGUF repositories have them)")


def local_head(path: str) -> bytes | None:
    from beekeeper.core.planner import GGUF_HEAD_BYTES

    try:
        with open(path, "rb") as f:
            return f.read(GGUF_HEAD_BYTES)
    except OSError:
        return None


def check_gguf(key: str, path: str, head: bytes | None) -> None:
    """A model file the server would load has GGUF's magic and version 2 or 3 in its first 8
    bytes (refused here, not by the server's crash loop after the deploy's changes); `head`
    None: unread, and the checks after this one say why."""
    problem = gguf_problem(head) if head is not None else None
    if problem:
        raise PreflightError(host_data(key), f"{path} is not a GGUF model file: {problem}",
                             GGUF_FIX)


class ModelTarget(FactBase[str]):
    """
    The file a model path names with every symlink followed (a Hugging Face cache snapshot
    path is a link into its blobs), or "" where nothing is there.
    """

    @staticmethod
    def default() -> str:
        return ""

    def command(self, path: str) -> str:
        q = shlex.quote(path)
        return f"if [ -e {q} ]; then readlink -f -- {q}; fi"

    def process(self, output: list[str]) -> str:
        return output[0].strip() if output else ""


class LinkTexts(FactBase[tuple[str, ...]]):
    """
    What each symlink on the way from a path to its file says (readlink, one link at a
    time, at most 40), in order; () where the path is no symlink.
    """

    @staticmethod
    def default() -> tuple[str, ...]:
        return ()

    def command(self, path: str) -> str:
        return (f"p={shlex.quote(path)}; n=0; while [ -L \"$p\" ] && [ $n -lt 40 ]; do "
                't=$(readlink -- "$p") || break; printf \'%s\\n\' "$t"; '
                'case $t in /*) p=$t ;; *) p=${p%/*}/$t ;; esac; n=$((n + 1)); done')

    def process(self, output: list[str]) -> tuple[str, ...]:
        return tuple(line.rstrip("\n") for line in output if line.strip())


def in_container(filename: str, links: tuple[str, ...]) -> str:
    """Where a model file of model_dir, mounted alone at MODELS, leads inside the server's
    container, each of its symlinks (`links`: LinkTexts) followed there: an absolute one
    names a path of the container's, a relative one goes from the link's folder."""
    at = f"{MODELS}/{filename}"
    for text in links:
        at = posixpath.normpath(text if text.startswith("/") else
                                posixpath.join(posixpath.dirname(at), text))
    return at


def check_mounted(cfg: HostConfig, rt: Runtime, path: str, target: str, named: str) -> None:
    """Container mode mounts model_dir alone: a model_host_path there that is a symlink must
    reach its file inside that folder, as the container sees it (a Hugging Face snapshot's
    link into ../blobs dangles there, and so does a link by an absolute host path)."""
    if rt.native or target == path:
        return
    folder = (host.get_fact(ModelTarget, path=cfg.data.model_dir) or cfg.data.model_dir)
    inside = in_container(path.rsplit("/", 1)[1], host.get_fact(LinkTexts, path=path))
    if target.startswith(folder.rstrip("/") + "/") and inside.startswith(MODELS + "/"):
        return
    name = target.rsplit("/", 1)[1]
    where = f"{target} lies outside it" if inside.startswith(MODELS + "/") else \
        f"there the link leads to {inside}"
    raise PreflightError(
        host_data("model_host_path"), f"{named} cannot be followed inside the server's "
        f"container, which mounts model_dir {cfg.data.model_dir} alone (at {MODELS}): "
        f"{where}", "copy the file into the link's "
        f"place (`cp --remove-destination {target} {path}`), or set model_dir to the file's "
        "folder and model_host_path to the file, or to a relative symlink named .gguf beside "
        f"it (`ln -s {name} <name>.gguf` there), or set mode = 'native'")


def not_a_file_fix(cfg: HostConfig, rt: Runtime) -> str:
    """How to name a model file on the host: a symlink in container mode only where the
    container can follow it (check_mounted)."""
    link = "or a symlink to it" if rt.native else \
        f"or a relative symlink to a file in model_dir {cfg.data.model_dir}, the one folder " \
        "the server's container mounts"
    return f"give the path of the .gguf there ({link}), or model_path for a file on the " \
        "controller"


# the folders a unit with ProtectHome=yes (templates/beekeeper-native.service.j2) cannot see
HIDDEN_BY_PROTECT_HOME = ("/home", "/root", "/run/user")


def check_own_model(cfg: HostConfig, rt: Runtime) -> None:
    """A model file already on the host (`model_host_path`): there, a regular file (a symlink
    followed), with the sha256 host data gives, readable by the server's user, and not where
    a native unit's ProtectHome=yes hides it (docs/own-model.md)."""
    if "model" not in cfg.data.stages and "service" not in cfg.data.stages:
        return
    rule_model_in_model_dir(cfg)
    for svc in cfg.services:
        for m in svc.models():
            if isinstance(m.source, FileSource) and not m.source.on_host:
                check_gguf("model_path", m.source.path, local_head(m.source.path))
            if not m.users_file:
                continue
            path = m.host_path(cfg.data.model_dir)
            target = host.get_fact(ModelTarget, path=path) or path
            named = path if target == path else f"{path} (a symlink to {target})"
            hidden = next((top for p in (path, target) for top in HIDDEN_BY_PROTECT_HOME
                           if p == top or p.startswith(top + "/")), None)
            if rt.protects_home and hidden:
                raise PreflightError(
                    host_data("model_host_path"), f"{named} lies under {hidden}, which the "
                    "native service's systemd unit hides from the server (ProtectHome=yes "
                    "hides /home, /root and /run/user), so it could never start", "move "
                    f"or copy the file out of them, e.g. into model_dir {cfg.data.model_dir}, and "
                    "set model_host_path to its new path (a symlink into them does not help: "
                    "the server follows it)")
            info: Any = host.get_fact(File, path=target)
            if not info:
                raise PreflightError(host_data("model_host_path"), f"{named} is not a file "
                                     "on the host", not_a_file_fix(cfg, rt))
            check_mounted(cfg, rt, path, target, named)
            check_gguf("model_host_path", path, host.get_fact(FileHead, path=path))
            got = host.get_fact(Sha256File, path=path, stamps=sha256_stamps(cfg.data.state_dir))
            if got != m.sha256:
                raise PreflightError(
                    host_data("model_sha256"), f"{path} has sha256 {got}, not {m.sha256}",
                    "set model_sha256 to the file's (sha256sum on the host) if it is the file "
                    "you mean")
            for seen in dict.fromkeys((path, target)):  # the link's folders, then the target's
                blocked = host.get_fact(OthersCannotRead, path=seen)
                if blocked:
                    raise PreflightError(
                        host_data("model_host_path"), "the server runs as user beekeeper and "
                        f"cannot read {named} ({blocked})", "chmod o+r on the file and o+x "
                        "on each folder above it, or move it into model_dir")


def check_docker_desktop(cfg: HostConfig, docker: DockerEngineInfo) -> None:
    """Docker Desktop's engine used only where host data says so, and `use_docker_desktop`
    only where Desktop's engine answers in this distro (docs/hosts-as-you-find-them.md)."""
    desktop = docker.flavour == "docker-desktop"
    # the only sign of Desktop a link into its cli-tools that dangles: it may go once Desktop
    # is gone for this distro (it is what keeps the kit from installing a second engine)
    gone = (f"; the docker link {echo(docker.dangling_link)} into Docker Desktop's cli-tools "
            "is dangling: remove it only once Docker Desktop is uninstalled or its WSL "
            "integration is off for this distro" if desktop and docker.dangling_link else "")
    if desktop and not cfg.data.use_docker_desktop:
        raise PreflightError(
            "Docker Desktop's WSL integration", "is active: beekeeper will not install a "
            "second engine beside it", "set use_docker_desktop = True to use it (on @local: "
            "`--data use_docker_desktop=true`), or turn the integration off for this distro"
            + gone, lead=" ", then="; ")
    if cfg.data.use_docker_desktop and not (desktop and docker.present):
        raise PreflightError(
            host_data("use_docker_desktop"), "no Docker Desktop engine answers in this distro",
            "turn on Docker Desktop's WSL integration for this distro (Settings > Resources > "
            "WSL integration) and start Docker Desktop, or remove use_docker_desktop" + gone)
    if desktop and docker.server_version is None:
        raise PreflightError(
            "Docker Desktop's engine", "does not answer `docker info` (Docker Desktop is not "
            "running on Windows, or its WSL integration is off for this distro)", "start Docker "
            "Desktop (Settings > Resources > WSL integration on for this distro), then deploy "
            "again", lead=" ", then=": ")


def check_docker(cfg: HostConfig, os_release: OsReleaseInfo, docker: DockerEngineInfo) -> None:
    """Container mode: an engine the kit can use, or one it can install."""
    if not cfg.requested_way.needs_docker:
        return
    if docker.flavour == "snap":
        raise PreflightError("Docker from snap", "cannot use the NVIDIA runtime or read "
                             "/etc/docker", "remove it (snap remove docker) and deploy again",
                             lead=" ", then=": ")
    check_docker_desktop(cfg, docker)
    if docker.flavour == "unknown" and docker.server_version is None:
        raise PreflightError(
            str(docker.path), "is a docker CLI of no package the kit knows, and no engine "
            "answers `docker info`", "start that engine (or Docker Desktop on Windows), or "
            "remove that docker and let the kit install docker.io, then deploy again",
            lead=" ", then=": ")
    if docker.present:
        return
    if not cfg.data.install_docker:
        raise PreflightError("Docker", "is missing and install_docker is False", "install "
                             "Docker or set install_docker = True", lead=" ", then=": ")
    if os_release.id not in ("debian", "ubuntu"):
        raise PreflightError("Docker", "cannot be installed by the kit on "
                             f"{os_release.id or None!r} (Debian and Ubuntu are automated)",
                             "install it by hand", lead=" ", then=": ")


def check_ports(cfg: HostConfig, docker: DockerEngineInfo, rt: Runtime,
                kept: frozenset[str] | None = frozenset()) -> tuple[int, ...]:
    """Each service's port; returns the pids of the kit's unsupervised servers there.
    `kept`: what other inventory hosts on this machine keep (tasks/prune.py)."""
    if "service" not in cfg.data.stages:
        return ()
    # services this deploy removes first (tasks/prune.py) may hold a port a kept one wants
    deployed: list[str] = host.get_fact(DeployedServices)
    removed_first = frozenset(leaving(cfg, deployed, kept))
    orphans: list[int] = []
    for svc in cfg.services:
        orphans += [p for p in check_port(svc.name, svc.data.port, docker.present, removed_first,
                                          rt) if p not in orphans]
    return tuple(orphans)


def download_bytes(cfg: HostConfig) -> int:
    """What the model stage still has to write to model_dir (a Hub download, or an upload
    from the controller): models not there with the sha256 they are placed with
    (tasks/model.py's placed_sha256: for a controller file without model_sha256, the
    file's own), less what a partial download already holds. A Hub file pinned by hand
    whose size the controller does not know counts 0 (size_unknown names it)."""
    return sum(left for _, _, left in still_to_write(cfg))


def still_to_write(cfg: HostConfig) -> Iterator[tuple[ServiceConfig, ModelFile, int]]:
    """Each model file the model stage still writes to model_dir, once, with its service
    and the bytes left to write (download_bytes)."""
    if "model" not in cfg.data.stages:
        return
    seen: set[str] = set()
    for svc in cfg.services:
        for model in svc.models():
            if isinstance(model.source, FileSource) and model.source.on_host:
                continue  # yours, where it is: nothing to download
            dest = f"{cfg.data.model_dir}/{model.filename}"
            if model.filename in seen:
                continue
            sha256 = placed_sha256(model)
            if sha256 and host.get_fact(Sha256File, path=dest, stamps=sha256_stamps(
                    cfg.data.state_dir)) == sha256:
                continue
            seen.add(model.filename)
            # written straight to <file>.partial (one copy); a partial file is resumed
            info: Any = host.get_fact(File, path=dest + ".partial")
            partial = int(info["size"]) if info else 0
            yield svc, model, max(model.size_bytes - partial, 0)


def size_unknown(cfg: HostConfig) -> list[str]:
    """A warning for each Hub file still to download whose size the controller does not
    know: pinned by hand (`<role>_revision`, `<role>_sha256`), which no Hub request pins,
    and whose header no VRAM plan read (beekeeper/pins.py); the host's download learns it,
    the free-disk check cannot count it."""
    lines = []
    for svc, model, _ in still_to_write(cfg):
        if not isinstance(model.source, HfSource) or model.size_bytes:
            continue
        role = "draft" if model is svc.draft else "model"
        lines.append(
            f"{host_data(svc.at + role + '_revision')}: {model.source.repo}/{model.filename} is "
            f"pinned by hand (with `{role}_sha256`), so no Hub request told the controller its "
            f"size, and the free-disk check of model_dir {cfg.data.model_dir} leaves it out: "
            "make room for it there (the file's page on the Hub gives its size)")
    return lines


def check_model_dir(cfg: HostConfig, wsl: WslInfo, disk: DiskInfo | None = None) -> None:
    """Under WSL2, no model_dir on a Windows drive: under /mnt/, or wherever df says a drive
    holds it (`disk`: wsl.conf's `[automount] root = /` mounts C: at /c, and a symlink into
    /mnt/d is followed by df)."""
    if wsl.is_wsl2 and (cfg.data.model_dir.startswith("/mnt/")
                        or (disk is not None and disk.windows_drive)):
        raise PreflightError(f"model_dir {cfg.data.model_dir}", "is on a Windows drive (9p, 3-5x "
                             "slower loads)", "use a folder on the WSL ext4 disk, e.g. "
                             "/srv/beekeeper", lead=" ", then=": ")


def check_free_space(cfg: HostConfig, free: int | None) -> None:
    """Room in model_dir for the model files still to write and 1 GiB; a file whose size is
    not known is one warning (size_unknown)."""
    for line in size_unknown(cfg):
        warn(line)
    need = download_bytes(cfg)
    if need and free is not None and free < need + GIB:
        raise PreflightError(
            f"model_dir {cfg.data.model_dir}", f"has {free / GIB:.1f} GiB free; the model "
            f"files still to download or upload need {need / GIB:.1f} GiB plus 1 GiB margin",
            "free space or set model_dir elsewhere", lead=" ", then=": ")


# Disk a build takes, in GiB: a server image's base images and build layers under Docker's
# root dir (how the CUDA figure was measured: docs/hosts-as-you-find-them.md, "Behind a proxy,
# and the disk an image build takes"); a native build's source and build trees and the
# install beside them (CUDA, sm_90: the kit's folder on a pod's volume after the deploy, 1,308
# MiB with the 569 MiB of toolkit libraries a pod keeps, benchmarks/h200/
# 2026-12-06-h200-toolkit-4a9069e; CPU: 147 MiB, beellama's tree built with the kit's flags)
IMAGE_BUILD_GIB = {"cuda": 11.0, "cpu": 2.0}
NATIVE_BUILD_GIB = {"cuda": 1.5, "cpu": 0.25}


def build_there(cfg: HostConfig, gpu: NvidiaSmiInfo | None, res: Resources,
                cuda_version: str | None, persistent_root: str | None = None) -> bool | None:
    """Whether the build this deploy runs is on the host already (container mode: the
    image's tag; native: both targets in its versioned folder, as tasks/native.py names it,
    or on the pod's `persistent_root`), for the CUDA release (None: host data's) and archs
    it builds for; None: it builds nothing (no build stage)."""
    way = cfg.requested_way
    if "build" not in cfg.data.stages or not (way.builds_image or way.builds_on_host):
        return None
    cap = gpu.gpus[0].compute_cap if gpu and gpu.gpus else None
    spec = build_spec(cfg, cap, res.cpus, res.mem_total_bytes, res.machine,
                      cuda_version=cuda_version or cfg.data.cuda_version,
                      cuda_arch=archs_of_cards(cfg, gpu))
    if way.builds_image:
        return bool(host.get_fact(DockerImageId, tag=spec.tag()))
    return native_ops.installed(install_dir(NATIVE_PREFIX, spec.name()),
                                install_files(spec, persistent_root), persistent_root)


def image_missing(cfg: HostConfig, built: bool | None) -> bool:
    """Whether this deploy builds the server image (container mode, its tag not there);
    `built`: build_there's answer."""
    return cfg.requested_way.builds_image and built is False


def check_room(cfg: HostConfig, subject: str, path: str, doing: str, gib: float,
               parts: str, fix: str, persistent_root: str | None = None) -> None:
    """Room on the file system that holds `path` for a build that takes about `gib` GiB, and
    for the model download too where model_dir is on the same file system (on a pod, where
    it is kept: kept_at); 1 GiB to spare. A file system that cannot be read is not checked."""
    disk = host.get_fact(DiskOf, path=path)
    if disk is None:
        return
    model = host.get_fact(DiskOf, path=kept_at(cfg.data.model_dir, persistent_root))
    download = download_bytes(cfg) if model is not None and model.mount == disk.mount else 0
    if disk.free_bytes < int(gib * GIB) + download + GIB:
        also = f" plus the model download {download / GIB:.1f} GiB (model_dir " \
            f"{cfg.data.model_dir} is on the same file system)" if download else ""
        raise PreflightError(
            subject, f"(file system {disk.mount}) has {disk.free_bytes / GIB:.1f} GiB free; "
            f"{doing} takes about {gib:g} GiB ({parts}){also}, and 1 GiB margin", fix,
            lead=" ", then=": ")


def check_image_space(cfg: HostConfig, docker: DockerEngineInfo, building: bool) -> None:
    """Room under Docker's root dir for an image build (IMAGE_BUILD_GIB). Docker Desktop
    keeps its images in its own VM, out of this check."""
    if not building or docker.flavour == "docker-desktop":
        return
    root = docker.root_dir or "/var/lib/docker"
    backend = cfg.service.profile.backend
    check_room(cfg, f"Docker's root dir {root}", root,
               f"building the {backend.upper()} server image", IMAGE_BUILD_GIB[backend],
               "base images and build layers", "free space (`docker system prune` removes "
               "unused images and build cache), or move Docker's data-root")


def check_native_space(cfg: HostConfig, building: bool, persistent_root: str | None) -> None:
    """Room for a native build (NATIVE_BUILD_GIB) where its source and build trees go:
    state_dir, which a pod keeps on its persistent root (kept_at) unless host data moved
    it elsewhere."""
    if not building:
        return
    backend = cfg.service.profile.backend
    keeps = ", the CUDA libraries it keeps" if keeps_toolkit_libs(backend, persistent_root) \
        else ""
    trees = kept_at(cfg.data.state_dir, persistent_root)
    on_root = trees != cfg.data.state_dir
    check_room(cfg, f"persistent_root {persistent_root}" if on_root else
               f"state_dir {cfg.data.state_dir}", trees,
               f"building the {backend.upper()} server natively", NATIVE_BUILD_GIB[backend],
               f"the source and build trees, the binaries{keeps}",
               "free space on the pod's volume, or give the pod a larger volume" if on_root
               else "free space on it, or set state_dir to a folder on a larger disk",
               persistent_root)


def warn_proxy(cfg: HostConfig, docker: DockerEngineInfo, building: bool,
               proxy_vars: tuple[str, ...]) -> None:
    """Behind a proxy, an engine without one of its own cannot pull the base images. A
    warning, not a refusal: images already there need no pull, and the kit cannot tell a
    transparent proxy or a mirror apart."""
    if not building or not proxy_vars or docker.proxy or cfg.data.preload_images \
            or docker.flavour == "docker-desktop":
        return
    warn(f"this host uses a proxy (/etc/environment sets {', '.join(proxy_vars)}) but Docker's "
         "engine has none, so pulling the base images will fail: give dockerd the proxy (a "
         "drop-in /etc/systemd/system/docker.service.d/http-proxy.conf with [Service] "
         "Environment=HTTPS_PROXY=... NO_PROXY=..., then `systemctl daemon-reload && systemctl "
         "restart docker`), or preload the base images (host data preload_images)")


def check_cpu(res: Resources) -> None:
    """The host's processor runs the server's CPU code: the baseline it is built for
    (beekeeper/core/cpu.py), read from /proc/cpuinfo, not assumed from the builder."""
    cpu = baseline_or_refuse(res.machine)
    missing = cpu.missing(res.cpu_flags)
    if missing:
        model = f" ({res.cpu_model})" if res.cpu_model else ""
        raise PreflightError(
            f"the host's CPU{model}", f"lacks {', '.join(missing)}: the server is built for "
            f"{cpu.name} ({' '.join(cpu.needs_flags)})", "deploy to a host with a newer CPU, "
            "or, in a VM, pass the host CPU's flags through (e.g. `-cpu host`)", lead=" ",
            then="; ")


def warn_wsl_idle(settings: WslSettingsInfo | None) -> None:
    """WSL2 stops an idle distro, and the server with it (docs/hosts-as-you-find-them.md). A
    warning, not a refusal: the fix is on Windows, and a .wslconfig the distro cannot see would
    otherwise block every deploy."""
    if settings is not None and settings.kept_alive:
        return
    s = settings or WslSettingsInfo()
    version = f" (this WSL: {s.wsl_version})" if s.wsl_version else ""
    distro = s.distro or "<the distro `wsl.exe -l -v` lists>"
    warn("WSL2 stops this distro, and the server with it, seconds after its last terminal "
         "closes (systemd services do not keep it up: microsoft/WSL#9667, by design), and "
         "does not start it when Windows starts; on Windows, both: add "
         "`instanceIdleTimeout=-1` under `[general]` in %UserProfile%\\.wslconfig "
         f"(WSL 2.5.7 or newer{version}; `wsl --update`) and run `wsl --shutdown`, which keeps "
         "a started distro up, and a logon task that starts it after each reboot: schtasks "
         f"/create /tn beekeeper-start /sc onlogon /tr \"wsl.exe -d {distro} --exec /bin/true\""
         "; before WSL 2.5.7, one logon task starts it and keeps it up: schtasks /create /tn "
         f"beekeeper-keepalive /sc onlogon /tr \"wsl.exe -d {distro} --exec sleep infinity\"")


def warn_wsl(cfg: HostConfig, mem_total: int, docker: DockerEngineInfo, building: bool,
             native_build: bool) -> None:
    """What a WSL2 distro lacks and works anyway, slower or until a drive fills: its idle
    stop, its memory, the Windows drive its disk file grows on (`building`: an image build,
    `native_build`: a native one, as the room checks have them)."""
    settings = host.get_fact(WslSettings)
    warn_wsl_idle(settings)
    warn_wsl_memory(cfg, mem_total, settings, docker)
    build_gib = IMAGE_BUILD_GIB if building else NATIVE_BUILD_GIB if native_build else {}
    warn_wsl_windows_disk(cfg, host.get_fact(DiskOf, path=WINDOWS_C),
                          build_gib.get(cfg.service.profile.backend, 0.0))


WINDOWS_C = "/mnt/c"  # where WSL mounts C:, which holds the distro's disk file unless moved


def warn_wsl_windows_disk(cfg: HostConfig, drive: DiskInfo | None, build_gib: float) -> None:
    """WSL2's disk is a file on a Windows drive (ext4.vhdx, on C: unless the distro was
    moved) that grows as the distro writes: df inside measures the file's own limit (1 TB by
    default), never the drive. A warning where C: has less room than this deploy writes (the
    model's download and the build) and 1 GiB; the drive may not be the one holding the
    file, so not a refusal."""
    if drive is None or not drive.windows_drive:
        return
    need = download_bytes(cfg) + build_gib * GIB
    if need and drive.free_bytes < need + GIB:
        warn(f"the distro's disk is a file on a Windows drive (ext4.vhdx, on C: unless the "
             f"distro was moved), and {drive.filesystem} has {drive.free_bytes / GIB:.1f} GiB "
             f"free, less than the {need / GIB:.1f} GiB this deploy writes (the model's "
             "download and the build) and 1 GiB: the distro's own df cannot see that, and a "
             "full drive stops the deploy half-way; free space on Windows first")


def warn_wsl_memory(cfg: HostConfig, mem_total: int, settings: WslSettingsInfo | None,
                    docker: DockerEngineInfo) -> None:
    """The memory WSL2 gave the distro against the model files plus one compile job and 1 GiB
    (docs/hosts-as-you-find-them.md, "WSL2's memory"). A warning, not a refusal: such hosts
    work, slower, and the fix (`wsl --shutdown`) would end this very session."""
    if not mem_total:
        return
    sizes = {m.filename: m.size_bytes for svc in cfg.services for m in svc.models()}
    cuda = any(svc.profile.backend == "cuda" for svc in cfg.services)
    margin = int(((GIB_PER_CUDA_JOB if cuda else GIB_PER_CPU_JOB) + 1) * GIB)
    need = sum(sizes.values()) + margin
    if mem_total >= need:
        return
    now = f", now memory={settings.memory}" if settings and settings.memory else ""
    shared = ", shared with Docker Desktop's engine" if docker.flavour == "docker-desktop" else ""
    warn(f"WSL2 gave this distro {mem_total / GIB:.1f} GiB (MemTotal{shared}{now}); the model "
         f"files ({sum(sizes.values()) / GIB:.1f} GiB, mmapped) and the build ({margin / GIB:.1f}"
         f" GiB) want {need / GIB:.1f} GiB, so loads and the build will be slow; on Windows set "
         f"`memory={-(-need // GIB) + 2}GB` under `[wsl2]` in %UserProfile%\\.wslconfig, then "
         "`wsl --shutdown`")


# why a fact preflight needs reads as nothing, and the fix
UNREAD = ("the command failed on the host, most likely sudo: host data `_sudo = True` where "
          "the login has no sudo, or sudo asks for a password")
UNREAD_FIX = ("connect as root (`ssh_user = 'root'`, `_sudo = False`), or install sudo and let "
              "the login run `sudo -n true`, then deploy again")


def read(fact: Any, what: str) -> Any:
    """A fact preflight cannot do without. pyinfra answers a fact whose command failed with its
    default, None: that is one line naming what could not be read, not an AttributeError."""
    value = host.get_fact(fact)
    if value is None:
        raise PreflightError(what, f"could not be read (fact {fact.__name__} returned "
                             f"nothing): {UNREAD}", UNREAD_FIX)
    return value


def check(cfg: HostConfig, kept: frozenset[str] | None = frozenset()) -> HostFacts:
    """Read the host's facts and refuse, before any change, a host the deploy cannot work
    on; returns what the tasks need of those facts."""
    init = read(InitSystem, "the init system (PID 1)")
    wsl = read(Wsl, "the kernel release (uname -r) and WSL")
    os_release = read(OsRelease, "/etc/os-release")
    docker = read(DockerEngine, "the Docker engine")
    gpu = host.get_fact(GpuInfo)
    rt = check_init(cfg, init, wsl, docker.present)
    rule_env_keys(cfg.services, rt)
    persistent_root = check_persistent_root(cfg, rt, init)
    # model_dir's file system: on a pod, the root's, where the deploy links it before the
    # download (a fresh pod has no link yet: df would read the container disk's)
    disk = host.get_fact(DiskOf, path=kept_at(cfg.data.model_dir, persistent_root))
    if not init.systemd and cfg.data.gateway is not None:  # whatever runs the model servers
        raise gateway_systemd_refusal(init.pid1)
    tools = read(HostTools, "the host's tools (nvcc, cmake, c++, make, git, python3)")
    check_supervisor_tools(tools, rt)
    check_docker(cfg, os_release, docker)
    compose_version = check_compose(cfg, os_release, docker)
    host_cuda, tell_toolkit = check_host_toolkit(cfg, tools, gpu)
    # the driver and the build are judged against the toolkit that builds
    plan = check_cuda(cfg, wsl, gpu, os_release.id, host_cuda or cfg.data.cuda_version,
                      gpu_container=not init.systemd)
    check_cuda_builds(cfg, gpu, plan.cuda_version, host_cuda)
    tell_toolkit()
    if cfg.service.profile.backend == "cuda":
        check_vram(cfg, gpu)
    check_model_dir(cfg, wsl, disk)
    check_own_model(cfg, rt)
    port_orphans = check_ports(cfg, docker, rt, kept)
    check_free_space(cfg, disk.free_bytes if disk else None)
    res = read(BuildResources, "the CPU and memory (/proc/cpuinfo, /proc/meminfo)")
    check_cpu(res)
    cuda_version = plan.cuda_version or host_cuda or cfg.data.cuda_version
    # the build tools, where this deploy builds (a pod's restart keeps the build, not them)
    built = build_there(cfg, gpu, res, cuda_version, persistent_root)
    install_tools = check_tools(cfg, tools, rt, built is True)
    building = image_missing(cfg, built)
    check_image_space(cfg, docker, building)
    native_build = built is False and cfg.requested_way.builds_on_host
    check_native_space(cfg, native_build, persistent_root)
    proxy_vars = host.get_fact(ProxyVars)
    warn_proxy(cfg, docker, building, proxy_vars)
    if wsl.is_wsl2:
        warn_wsl(cfg, res.mem_total_bytes, docker, building, native_build)
    if not rt.restarts_with_host:
        warn_supervisor_restart(init, persistent_root, wsl2=wsl.is_wsl2)
    # what the tasks read instead of host data's runtime, CUDA release and archs
    return HostFacts(os=os_release, init=init, wsl=wsl, docker=docker, gpu=gpu,
                     pci_nvidia_gpus=plan.pci, driver_action=plan.action, runtime=rt,
                     cuda_version=cuda_version,
                     cuda_arch=archs_of_cards(cfg, gpu),
                     proxy_vars=proxy_vars if building else (),
                     compose_version=compose_version,
                     cpus=res.cpus, mem_total_bytes=res.mem_total_bytes, machine=res.machine,
                     tools=tools, host_nvcc=tools.nvcc if host_cuda else None,
                     install_tools=tuple(install_tools), built=built,
                     persistent_root=persistent_root,
                     port_orphans=port_orphans)


def warn_supervisor_restart(init: InitInfo, persistent_root: str | None = None,
                            wsl2: bool = False) -> None:
    """Nothing on the host starts the kit's supervisord after the container restarts: the
    line for the pod's start command (a WSL2 distro without systemd: wsl.conf's `[boot]
    command`, which WSL runs as root each time the distro starts)."""
    script = start_line(persistent_root)
    if wsl2 and not init.systemd:
        warn(f"PID 1 is {init.pid1!r}, not systemd: the server runs under the kit's "
             "supervisord, and nothing starts it again when this WSL2 distro starts again "
             f"(after `wsl --shutdown`, an idle stop or a Windows restart) until `{script}` "
             f"runs: add `command = {wsl_boot_command(script)}` under `[boot]` in "
             "/etc/wsl.conf (WSL runs it as root each time the distro starts), or turn systemd "
             "on there (`systemd=true` under `[boot]`, then `wsl.exe --shutdown`) and remove "
             "`runtime`")
        return
    if init.systemd:  # host data asked for supervisor on a systemd host
        warn("runtime 'supervisor' (host data): the server runs under the kit's supervisord, "
             "which systemd does not start, so nothing starts it again when this host "
             f"restarts until `{script}` runs (a unit of yours, or "
             f"`@reboot {cron_command(script)}` in root's crontab; or remove `runtime`: a "
             "systemd unit then runs the server)")
        return
    kept = f"the kit kept under {persistent_root}" if persistent_root else \
        "no persistent root: the standard layout"
    warn(f"PID 1 is {init.pid1!r}, not systemd: the server runs under the kit's supervisord, "
         "and nothing starts it again when this container restarts until the container's "
         f"start command runs `{script}` ({kept}; RunPod: `{runpod_start_line(script)}`; "
         "the line per provider: docs/gpu-containers.md)")
