"""
Uninstall: take away everything the kit put on a host, in the order that keeps each step
possible (services before the engine, packages last); each operation removes only what is
there, and its name says what (docs/lifecycle.md, "Uninstall").

An apt transaction (apt's history log) is the kit's when it is pyinfra's apt.packages line
asking only for packages the kit installs (KIT_PACKAGES, DRIVER_ASKED), or the driver's own
`apt-get install` of its meta-package (DRIVER_METAS). The models the kit placed: those a
manifest or the inventory names, any file with the downloader's `.download.log` beside it,
and any file named as a profile's model at that model's exact size.
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Collection
from dataclasses import dataclass

from pyinfra import host
from pyinfra.api.operation import OperationMeta
from pyinfra.facts.files import FileContents
from pyinfra.operations import server

from beekeeper.core.config import HostConfig
from beekeeper.core.gateway import PATHS as GP
from beekeeper.core.hostdata import PERSISTENT_NONE
from beekeeper.core.paths import (
    AUTO_PERSISTENT_ROOT,
    CONF_ROOT,
    CUDA_APT,
    CUDA_LOADER_FILE,
    CUDA_PATH_FILE,
    HOLDS_RECORD,
    HOST_VENV,
    HOSTSIDE_DIR,
    LOG_DIR,
    MODEL_DIR,
    NATIVE_PREFIX,
    NOUVEAU_BLACKLIST,
    OPT_ROOT,
    PERSISTED,
    SERVER_USER,
    SRV_ROOT,
    START_SCRIPT,
    STATE_DIR,
    SUPERVISOR_HOME,
    SUPERVISOR_PIDFILE,
    SUPERVISOR_SOCKET,
    SUPERVISORCTL,
    SUPERVISORD,
    TOOLKIT_APT,
    UNIT_DIR,
    VERIFY_KIT,
    VERIFY_VENV,
    ServicePaths,
    kept_at,
    owner_mark,
    start_script,
)
from beekeeper.core.profiles import PROFILES
from beekeeper.facts.host import AptHolds, InitSystem
from beekeeper.facts.lifecycle import (
    DRIVER_METAS,
    DRIVER_PURGE,
    AptHistory,
    FileSizes,
    FolderEntries,
    InstalledPackages,
    KitComponents,
    PresentPaths,
    asked_names,
)
from beekeeper.facts.persist import PathKind, PathKinds
from beekeeper.facts.services import DeployedServices, deployed_records
from beekeeper.operations import lifecycle as ops_
from beekeeper.operations.nvidia import PURGE_PATTERN
from beekeeper.operations.services import service_removed
from beekeeper.operations.supervisor import supervisord_removed

from .container_toolkit import PACKAGES as TOOLKIT_PACKAGES

# the packages the kit's tasks install (docker_engine, gateway, source, native, model,
# nvidia_repos, cuda_toolkit, container_toolkit)
KIT_PACKAGES = re.compile(
    r"^(python3|python3-venv|ca-certificates|gnupg|wget|git|haproxy|cmake|g\+\+|make|"
    r"docker\.io|docker-cli|docker-compose|docker-compose-v2|docker-compose-plugin|"
    rf"cuda-toolkit-\d+-\d+|{'|'.join(TOOLKIT_PACKAGES)})$")
# what the driver task (tasks/nvidia_driver.py) asks for: the kernel headers, the branch
# pin, the driver's meta-package
DRIVER_ASKED = re.compile(rf"^(linux-headers-\S+|nvidia-driver-pinning-\d+|{DRIVER_METAS})$")
# the Container Toolkit's nvidia-cdi-refresh.service writes it (NVIDIA_CTK_CDI_OUTPUT_FILE_PATH)
CDI_SPEC = "/var/run/cdi/nvidia.yaml"
MODEL_SUFFIXES = ("", ".partial", ".download.log", ".download.log.rc")


@dataclass(frozen=True)
class KitPackages:
    """The packages the kit's apt transactions installed that are installed now: the
    driver task's (headers, pin, driver, their dependencies) and the others; and the
    driver packages a purge of the kit's line took before (upgrade_driver)."""

    driver: list[str]
    other: list[str]
    replaced: list[str]


def kit_packages() -> KitPackages:
    installed: list[str] = host.get_fact(InstalledPackages)
    now = set(installed)
    driver: set[str] = set()
    other: set[str] = set()
    replaced: list[str] = []
    for t in host.get_fact(AptHistory):
        asked = asked_names(t.commandline)
        if asked and all(DRIVER_ASKED.match(n) for n in asked):
            driver.update(t.installed)
        elif asked and all(KIT_PACKAGES.match(n) for n in asked):
            other.update(t.installed)
        purged = DRIVER_PURGE.match(t.commandline)
        names = purged.group("names").split() if purged else []
        if names and all(re.match(PURGE_PATTERN, n) for n in names):
            replaced += [n for n in names if n not in replaced]
    return KitPackages(driver=sorted(driver & now), other=sorted((other & now) - driver),
                       replaced=[n for n in replaced if n not in now])


def users_models(cfg: HostConfig) -> set[str]:
    """The files of yours the kit served in place (host data `model_host_path`, by this
    inventory or a deployed service's record): never the kit's to remove."""
    yours = {m.host_path(cfg.data.model_dir) for s in cfg.services for m in s.models()
             if m.users_file}
    for name in host.get_fact(DeployedServices):
        for m in deployed_records(name):
            if m.model_is_users and m.model_path:
                yours.add(m.model_path)
    return yours


def models(cfg: HostConfig, keep: bool, yours: Collection[str], root: str | None = None
           ) -> None:
    """The model files the kit placed (see the module's docstring), with a download's partial
    file and logs, removed unless `keep`; a file of yours the kit served in place (`yours`,
    users_models) is never the kit's. `root`: a pod's root whose links its restart took,
    where the files are now (kept_at); None: where the links say."""
    d = cfg.data.model_dir
    if keep:
        ops_.left_in_place(name=f"Keep the models in {d} (keep_models)",
                           why=f"models kept in {d} (host data keep_models)")
        return
    placed = {f"{d}/{m.filename}" for s in cfg.services for m in s.models()}
    for name in host.get_fact(DeployedServices):
        for m in deployed_records(name):
            placed.update(model for model, _ in m.models())
    files = host.get_fact(FileSizes, path=kept_at(d, root))
    shipped = {m.filename: m.size_bytes for p in PROFILES.values()
               for m in [p.model, *([p.server.draft_model] if p.server.draft_model else [])]}
    for f, size in files.items():
        logged = next((f.removesuffix(x) for x in MODEL_SUFFIXES[2:] if f.endswith(x)), None)
        base = f.removesuffix(".partial")
        if logged or shipped.get(f) == size:
            placed.add(f"{d}/{logged or f}")
        elif base != f and (base in shipped or f"{d}/{base}" in placed):
            placed.add(f"{d}/{base}")
    paths = [kept_at(p, root) + suffix for p in sorted(placed - set(yours))
             for suffix in MODEL_SUFFIXES]
    found: dict[str, int] = host.get_fact(PresentPaths, paths=paths)
    present = sorted(found)
    names = ", ".join(p.rsplit("/", 1)[-1] for p in present) or "none left"
    ops_.paths_removed(name=f"Remove the models the kit placed in {d} ({names})",
                       paths=present, what=f"models in {d}")


def _after_restart(cfg: HostConfig, kinds: dict[str, PathKind]) -> dict[str, PathKind]:
    """`kinds` of the kit's folders, where a pod's restart took their links (the container's
    disk is new) and left its root on the volume: in a container (PID 1 not systemd), the
    root host data names (else AUTO_PERSISTENT_ROOT), where it holds the kit's marks and the
    record of a service of this inventory's, read as its links would say."""
    root = cfg.data.persistent_root or AUTO_PERSISTENT_ROOT
    if root == PERSISTENT_NONE or any(k.kind != "missing" for k in kinds.values()) or \
            host.get_fact(InitSystem).systemd:
        return kinds
    marks = [owner_mark(root), start_script(root)]
    records = [kept_at(ServicePaths(s.name).manifest, root) for s in cfg.services]
    present = host.get_fact(PresentPaths, paths=[*marks, *records])
    if not set(marks) <= set(present) or not set(records) & set(present):
        return kinds
    there = host.get_fact(PathKinds, paths=[f"{root}/{name}" for _, name in PERSISTED])
    return {**kinds, **{path: PathKind("link", f"{root}/{name}") for path, name in PERSISTED
                        if (k := there.get(f"{root}/{name}")) and k.kind == "dir"}}


def persistent_root(cfg: HostConfig, yours: Collection[str] = ()) -> tuple[str | None, bool]:
    """A GPU pod's persistent root: the kit's folders there, its start script, the server
    user's mark, the links, and the root once empty; the rest of the volume stays. The
    models' folder (SRV_ROOT's) is never removed whole: models() removes the kit's models in
    it, and persistent_models() the folder once empty. Returns where SRV_ROOT links to, and
    whether the link is there (not after a pod's restart: _after_restart)."""
    def holds_yours(path: str, target: str) -> bool:
        return any(f.startswith(f"{path}/") or f.startswith(f"{target}/") for f in yours)
    found = host.get_fact(PathKinds, paths=[path for path, _ in PERSISTED])
    kinds = _after_restart(cfg, found)
    srv = kinds.get(SRV_ROOT)
    linked = kinds is found
    links = {path: k.target for path, k in kinds.items() if k.kind == "link"
             and path != SRV_ROOT and not holds_yours(path, k.target)}
    if links:
        _root_removed(links)
    if not srv or srv.kind != "link":
        return None, linked
    # the kit's root only (a link of yours there, models on a bigger disk, is not the kit's):
    # where its other folders link to, or its mark is
    root = posixpath.dirname(srv.target)
    kit_roots = {posixpath.dirname(k.target) for path, k in kinds.items()
                 if k.kind == "link" and path != SRV_ROOT}
    ours = root in kit_roots or bool(
        host.get_fact(PresentPaths, paths=[owner_mark(root), start_script(root)]))
    return (srv.target if ours else None), linked


def persistent_models(cfg: HostConfig, srv: str) -> None:
    """After models(): on a pod's root, the models' folder there (`srv`, where SRV_ROOT
    links to) once empty, the link once its folder is gone, and the root once empty; a file
    of yours in it keeps the folder and the link."""
    folders = []  # model_dir's folders on the root, deepest first, up to `srv`
    d = cfg.data.model_dir
    while d.startswith(f"{SRV_ROOT}/"):
        folders.append(srv + d.removeprefix(SRV_ROOT))
        d = posixpath.dirname(d)
    folders.append(srv)
    ops_.empty_folders_removed(name=f"Remove the models' folder on the persistent root ({srv}) "
                                    "once empty", paths=folders)
    ops_.link_removed_once_dangling(name=f"Remove the link {SRV_ROOT} once its folder is gone",
                                    link=SRV_ROOT)
    root = posixpath.dirname(srv)
    ops_.empty_folders_removed(name=f"Remove {root} once empty", paths=[root])


def _root_removed(links: dict[str, str]) -> None:
    """The kit's folders `links` link to on the persistent root, their links, its marks."""
    roots = sorted({posixpath.dirname(t) for t in links.values()})
    marks = [p for r in roots for p in (start_script(r), owner_mark(r))]
    ops_.paths_removed(name=f"Remove the kit's folders on the persistent root "
                            f"({', '.join(roots)}) and their links",
                       paths=[*links.values(), *marks, *links],
                       what=f"the kit's files on {', '.join(roots)}")
    ops_.empty_folders_removed(name=f"Remove {', '.join(roots)} once empty", paths=roots)


def services() -> None:
    """Every model service the kit deployed, and units of its name left without one."""
    deployed = host.get_fact(DeployedServices)
    for n in deployed:
        service_removed(name=f"Remove service {n}: stop it, remove its unit, container and "
                             f"{ServicePaths(n).conf_dir}", service=n)
    known = {ServicePaths(n).unit_name for n in deployed} | {GP.unit_name}
    for e in host.get_fact(FolderEntries, path=UNIT_DIR):
        unit = e.name.removesuffix(".prev")
        if re.match(r"^beekeeper-[a-z][a-z0-9-]*\.service$", unit) and unit not in known:
            known.add(unit)
            ops_.unit_removed(name=f"Remove {unit} (no manifest)", unit_name=unit,
                              unit_path=f"{UNIT_DIR}/{unit}", dropin_dir=f"{UNIT_DIR}/{unit}.d")
    ops_.unit_removed(name=f"Remove the gateway's unit {GP.unit_name}", unit_name=GP.unit_name,
                      unit_path=GP.unit, dropin_dir=GP.dropin_dir)


def folders(cfg: HostConfig, driver_kept: bool) -> None:
    """The kit's folders outside packages; NVIDIA's CUDA repository stays with a kept
    driver (apt still knows where it comes from)."""
    apt_files = [*TOOLKIT_APT.files, *([] if driver_kept else CUDA_APT.files)]
    ops_.paths_removed(name=f"Remove {CONF_ROOT} (manifests, keys, gateway config)",
                       paths=[CONF_ROOT], what=CONF_ROOT)
    ops_.paths_removed(name="Remove the state and log folders (source trees, builds, "
                            "reports, logs)",
                       paths=sorted({cfg.data.state_dir, STATE_DIR, LOG_DIR}),
                       what="state and log folders")
    ops_.paths_removed(name=f"Remove {OPT_ROOT} (native builds, host venvs, verify kit) "
                            "and the host-side scripts",
                       paths=[NATIVE_PREFIX, HOST_VENV, VERIFY_KIT, VERIFY_VENV,
                              HOSTSIDE_DIR], what="native builds, venvs and scripts")
    ops_.paths_removed(name="Remove the kit's apt sources and keyrings (NVIDIA's"
                            + (", but the CUDA one of the kept driver)" if driver_kept
                               else ")"),
                       paths=apt_files, what="apt sources and keyrings")


def system_files(driver_kept: bool) -> list[OperationMeta]:
    """Files in the system's own folders, while they hold what the kit wrote (a kept driver
    keeps the nouveau blacklist)."""
    named = [(f"Remove the CUDA PATH file ({CUDA_PATH_FILE.path})", CUDA_PATH_FILE),
             (f"Remove the CUDA loader path ({CUDA_LOADER_FILE.path})", CUDA_LOADER_FILE)]
    if not driver_kept:
        named.append(("Remove the nouveau blacklist the kit wrote", NOUVEAU_BLACKLIST))
    return [ops_.file_removed_if_kit(name=name, path=f.path, pattern=f.pattern)
            for name, f in named]


def components(driver_kept: bool) -> None:
    """Debian's archive areas the kit added, by the record it left in each sources file it
    changed (a host deployed before the kit kept that record keeps the area). A kept driver
    keeps contrib, where its packages' dependencies come from on Debian."""
    if driver_kept:
        return
    added: dict[str, list[str]] = {}
    for component, path in host.get_fact(KitComponents):
        added.setdefault(component, []).append(path)
    for c, files in sorted(added.items()):
        ops_.components_reverted(name=f"Remove Debian's {c} area the kit added "
                                      f"({', '.join(files)})", component=c, files=files)


def packages(pk: KitPackages, why_kept: str | None) -> None:
    """The holds the kit set released and the packages it installed purged (the driver's
    only when it goes); the docker group with an engine the kit installed."""
    driver_kept = bool(why_kept)
    going = [*pk.other, *([] if driver_kept else pk.driver)]
    # and the holds the kit recorded setting, on packages that stay (the host had them
    # before: a Container Toolkit of its own), except those of a driver kept whole
    record = host.get_fact(FileContents, path=HOLDS_RECORD) or []
    kept = set(pk.driver) if driver_kept else set()
    release = list(dict.fromkeys([*going, *(n.strip() for n in record if n.strip()
                                            and n.strip().split(":")[0] not in kept)]))
    held = [p for p in release if p in host.get_fact(AptHolds)]
    ops_.holds_released(name=f"Release the apt holds the kit set "
                             f"({', '.join(held) or 'none'})", packages=release)
    if why_kept:
        ops_.left_in_place(
            name=f"Keep the NVIDIA driver the kit installed ({why_kept}): its "
                 f"{len(pk.driver)} packages and their holds, its branch pin, NVIDIA's CUDA "
                 "repository, Debian's contrib area and the nouveau blacklist stay",
            why=why_kept)
    elif pk.driver:
        lost = (f"; the driver it replaced ({', '.join(pk.replaced)}, upgrade_driver) is not "
                "restored" if pk.replaced else "")
        ops_.packages_purged(
            name=f"Purge the NVIDIA driver the kit installed ({len(pk.driver)}: "
                 f"{', '.join(pk.driver)}){lost}", packages=pk.driver)
    ops_.packages_purged(
        name=f"Purge the packages the kit installed ({len(pk.other)}: "
             f"{', '.join(pk.other) or 'none'})",
        packages=pk.other, along=[] if driver_kept else pk.driver)
    if "docker.io" in pk.other:  # the engine came with the kit: so did the group it made
        host.noop("the Docker engine's data (/var/lib/docker, /var/lib/containerd) stays: "
                  "remove it once nothing of yours is there")
        ops_.account_removed(name="Remove the docker group (made by docker.io, which the kit "
                                  "installed)", account="docker")


def container_toolkit_traces(pk: KitPackages, driver_kept: bool) -> list[OperationMeta]:
    """What the Container Toolkit the kit installed made outside its packages: the nvidia
    runtime nvidia-ctk added to Docker's daemon.json, the CDI spec its refresh service
    wrote. Only when that toolkit goes: one the host had, or one kept, keeps them."""
    along = [] if driver_kept else pk.driver
    if "nvidia-container-toolkit" not in pk.other or ops_.purge_extras(pk.other, along):
        return []
    return [
        ops_.docker_runtime_removed(
            name=f"Remove the nvidia runtime nvidia-ctk added to {ops_.DAEMON_JSON} (other "
                 "settings kept; Docker restarted only if it changed)",
            restart="docker.io" not in pk.other),
        ops_.paths_removed(name=f"Remove the CDI spec the Container Toolkit wrote ({CDI_SPEC})",
                           paths=[CDI_SPEC], what="CDI spec"),
    ]


def ensure(cfg: HostConfig, keep_models: bool, keep_driver: bool = False) -> None:
    """Everything the kit put on this host, removed."""
    pk = kit_packages()
    # why the driver the kit installed stays (None: it goes, or there is none)
    why_kept = "host data keep_driver" if pk.driver and keep_driver else None
    extra = ops_.purge_extras(pk.driver, []) if pk.driver and not why_kept else []
    if extra:
        why_kept = (f"purging it would also remove {', '.join(extra)}, which the kit did not "
                    "install")
    driver_kept = bool(why_kept)
    services()
    supervisord_removed(  # once its programs went
        name=f"Stop the kit's supervisord and remove it ({SUPERVISOR_HOME}, {SUPERVISORD}, "
             f"{SUPERVISORCTL}, {START_SCRIPT})",
        paths=[SUPERVISOR_HOME, SUPERVISORD, SUPERVISORCTL, START_SCRIPT, SUPERVISOR_SOCKET,
               SUPERVISOR_PIDFILE])
    yours = users_models(cfg)  # read once: both steps keep them
    srv, linked = persistent_root(cfg, yours)
    ops_.images_removed(name=f"Remove the server images ({cfg.image_repo})",
                        repo=cfg.image_repo)
    models(cfg, keep_models, yours, posixpath.dirname(srv) if srv and not linked else None)
    folders(cfg, driver_kept)
    changed_files = system_files(driver_kept)
    components(driver_kept)
    ops_.account_removed(name="Remove the beekeeper user and group (native mode)",
                         account=SERVER_USER)
    packages(pk, why_kept)
    toolkit = container_toolkit_traces(pk, driver_kept)
    # the model folder stays while it holds kept models (or files of yours)
    empty = ([] if keep_models else [cfg.data.model_dir, os.path.dirname(MODEL_DIR)]) + [OPT_ROOT]
    empty += [os.path.dirname(CDI_SPEC)] if toolkit else []
    ops_.empty_folders_removed(
        name="Remove the kit's folders left empty (" + ", ".join(empty) + ")", paths=empty)
    if srv and not keep_models:
        persistent_models(cfg, srv)
    if any(op.will_change for op in changed_files):
        server.shell(
            name="Refresh the loader cache and the initramfs (CUDA or nouveau files went)",
            commands=["ldconfig; if command -v update-initramfs >/dev/null 2>&1 && "
                      "ls /boot/initrd.img-* >/dev/null 2>&1; then update-initramfs -u; fi"])
