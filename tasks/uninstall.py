"""
Uninstall: take away everything the kit put on a host, in the order that keeps each step
possible (services before the engine that runs them, images before the engine goes,
packages last). Each operation reads what is there and removes only that.

What goes: every model service (unit, rollback copy, container or compose project, its
folder under /etc/beekeeper), the gateway's unit, the server images the kit built, the
models (unless host data `keep_models`), /etc/beekeeper, the state and log folders (source
trees, build folders, reports), /opt/beekeeper (native builds, the host-side venvs, the
verify kit), the host-side scripts, the kit's apt sources and keyrings, the CUDA PATH and
loader files and the nouveau blacklist while they hold what the kit wrote, the beekeeper
user, and the packages the kit installed (with their holds; the driver's pin is a package).

Which packages the kit installed: apt's history log (/var/log/apt/history.log and its
rotations) records each transaction's command line and the packages it newly installed.
A transaction is the kit's when it is pyinfra's apt.packages command line (`apt-get -y -o
Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold install
--no-install-recommends ...`) asking only for packages the kit installs (KIT_PACKAGES); what
it newly installed, dependencies included, goes, if still installed. A package the host had
before is never in such a transaction's `Install:` list (apt lists it as installed already),
so it stays. Limits: a transaction whose log was rotated away (logrotate keeps 12 months by
default) is not seen, so its packages stay; and where another pyinfra deploy installed one
of the kit's package names the same way, the kit takes it for its own. Nothing is purged
when apt would remove another package with them (one installed since that needs them): the
line names it.
"""

from __future__ import annotations

import os
import re

from pyinfra import host
from pyinfra.api.operation import OperationMeta
from pyinfra.operations import server

from beekeeper.core.config import HostConfig
from beekeeper.core.gateway import PATHS as GP
from beekeeper.core.paths import (
    CONF_ROOT,
    HOST_VENV,
    HOSTSIDE_DIR,
    LOG_DIR,
    MODEL_DIR,
    NATIVE_PREFIX,
    STATE_DIR,
    UNIT_DIR,
    VERIFY_KIT,
    VERIFY_VENV,
    ServicePaths,
    prev,
)
from beekeeper.facts.lifecycle import (
    PYINFRA_INSTALL as _PYINFRA,
    AptHistory,
    FolderEntries,
    InstalledPackages,
)
from beekeeper.facts.services import DeployedServices, deployed_manifest
from beekeeper.operations import lifecycle as ops_
from beekeeper.operations.services import service_removed

# the packages the kit's tasks install (docker_engine, gateway, source, native, model,
# nvidia_repos, cuda_toolkit, container_toolkit, nvidia_driver)
KIT_PACKAGES = re.compile(
    r"^(python3|python3-venv|ca-certificates|gnupg|wget|git|haproxy|cmake|g\+\+|make|"
    r"docker\.io|docker-cli|docker-compose|docker-compose-v2|docker-compose-plugin|"
    r"cuda-toolkit-\d+-\d+|cuda-drivers|nvidia-driver-pinning-\d+|linux-headers-\S+|"
    r"nvidia-container-toolkit|nvidia-container-toolkit-base|libnvidia-container-tools|"
    r"libnvidia-container1)$")
APT_FILES = ("/etc/apt/sources.list.d/nvidia-cuda.sources",
             "/etc/apt/sources.list.d/nvidia-container-toolkit.sources",
             "/etc/apt/keyrings/nvidia-cuda.gpg", "/etc/apt/keyrings/nvidia-container-toolkit.gpg")
NOUVEAU = ("/etc/modprobe.d/blacklist-nouveau.conf",
           "blacklist nouveau\noptions nouveau modeset=0\n")
OPT_ROOT = os.path.dirname(HOST_VENV)  # /opt/beekeeper: native builds, venvs, verify kit


def kit_packages() -> list[str]:
    """The packages the kit's own apt transactions installed that are installed now."""
    now: list[str] = host.get_fact(InstalledPackages)
    mine: set[str] = set()
    for t in host.get_fact(AptHistory):
        m = _PYINFRA.match(t.commandline)
        asked = [n.split("=", 1)[0] for n in m.group("names").split()] if m else []
        if asked and all(KIT_PACKAGES.match(n) for n in asked):
            mine.update(t.installed)
    return sorted(mine.intersection(now))


def kit_models(cfg: HostConfig) -> list[str]:
    """Model files the kit placed: those its manifests (running and previous units) and
    the inventory's services name, with a download's partial file and log."""
    names = {f"{cfg.model_dir}/{m.filename}" for s in cfg.services for m in s.models()}
    for name in host.get_fact(DeployedServices):
        for path in (ServicePaths(name).manifest, prev(ServicePaths(name).manifest)):
            m = deployed_manifest(path) or {}
            names.update(str(m[k]) for k in ("model_path", "draft_path") if m.get(k))
    return sorted(p + suffix for p in names for suffix in ("", ".partial", ".download.log"))


def services() -> list[OperationMeta]:
    """Every model service the kit deployed, and units of its name left without one."""
    deployed = host.get_fact(DeployedServices)
    ops = [service_removed(name=f"Remove service {n}: stop it, remove its unit, container "
                                f"and {ServicePaths(n).conf_dir}", service=n) for n in deployed]
    known = {ServicePaths(n).unit_name for n in deployed} | {GP.unit_name}
    for e in host.get_fact(FolderEntries, path=UNIT_DIR):
        unit = e.name.removesuffix(".prev")
        if re.match(r"^beekeeper-[a-z][a-z0-9-]*\.service$", unit) and unit not in known:
            known.add(unit)
            ops.append(ops_.unit_removed(name=f"Remove {unit} (no manifest)", unit_name=unit,
                                         unit_path=f"{UNIT_DIR}/{unit}",
                                         dropin_dir=f"{UNIT_DIR}/{unit}.d"))
    ops.append(ops_.unit_removed(name=f"Remove the gateway's unit {GP.unit_name}",
                                 unit_name=GP.unit_name, unit_path=GP.unit,
                                 dropin_dir=GP.dropin_dir))
    return ops


def models(cfg: HostConfig, keep: bool) -> list[OperationMeta]:
    if keep:
        host.noop(f"models kept in {cfg.model_dir} (host data keep_models)")
        return []
    return [ops_.paths_removed(name=f"Remove the models the kit placed in {cfg.model_dir}",
                               paths=kit_models(cfg), what=f"models in {cfg.model_dir}")]


def folders(cfg: HostConfig) -> list[OperationMeta]:
    """The kit's folders outside packages."""
    return [
        ops_.paths_removed(name=f"Remove {CONF_ROOT} (manifests, keys, gateway config)",
                           paths=[CONF_ROOT], what=CONF_ROOT),
        ops_.paths_removed(name="Remove the state and log folders (source trees, builds, "
                                "reports, logs)",
                           paths=sorted({cfg.state_dir, STATE_DIR, LOG_DIR}),
                           what="state and log folders"),
        ops_.paths_removed(name=f"Remove {OPT_ROOT} (native builds, host venvs, verify kit) "
                                "and the host-side scripts",
                           paths=[NATIVE_PREFIX, HOST_VENV, VERIFY_KIT, VERIFY_VENV,
                                  HOSTSIDE_DIR], what="native builds, venvs and scripts"),
        ops_.paths_removed(name="Remove the kit's apt sources and keyrings (NVIDIA's)",
                           paths=list(APT_FILES), what="apt sources and keyrings"),
    ]


def system_files(cfg: HostConfig) -> list[OperationMeta]:
    """Files in the system's own folders, while they hold what the kit wrote."""
    major, minor = cfg.cuda_version.split(".")[:2]
    cuda = f"/usr/local/cuda-{major}.{minor}"
    return [
        ops_.file_removed_if_kit(name="Remove the CUDA PATH file (/etc/profile.d/cuda.sh)",
                                 path="/etc/profile.d/cuda.sh",
                                 content=f"export PATH={cuda}/bin:$PATH"),
        ops_.file_removed_if_kit(name="Remove the CUDA loader path (/etc/ld.so.conf.d/cuda.conf)",
                                 path="/etc/ld.so.conf.d/cuda.conf", content=f"{cuda}/lib64"),
        ops_.file_removed_if_kit(name="Remove the nouveau blacklist the kit wrote",
                                 path=NOUVEAU[0], content=NOUVEAU[1]),
    ]


def packages() -> list[OperationMeta]:
    mine = kit_packages()
    ops = [
        ops_.holds_released(name="Release the holds the kit set (driver, Container Toolkit)",
                            packages=mine),
        ops_.packages_purged(name=f"Purge the packages the kit installed ({len(mine)})",
                             packages=mine),
    ]
    if "docker.io" in mine:  # the engine came with the kit: so did the group it made
        host.noop("the Docker engine's data (/var/lib/docker, /var/lib/containerd) stays: "
                  "remove it once nothing of yours is there")
        ops.append(ops_.account_removed(name="Remove the docker group (made by docker.io, "
                                             "which the kit installed)", account="docker"))
    return ops


def ensure(cfg: HostConfig, keep_models: bool) -> list[OperationMeta]:
    """Everything the kit put on this host, removed."""
    result = services()
    result.append(ops_.images_removed(name=f"Remove the server images ({cfg.image_repo})",
                                      repo=cfg.image_repo))
    result += models(cfg, keep_models)
    result += folders(cfg)
    changed_files = system_files(cfg)
    result += changed_files
    result.append(ops_.account_removed(name="Remove the beekeeper user and group (native mode)",
                                       account="beekeeper"))
    result += packages()
    # the model folder stays while it holds kept models (or files of yours)
    empty = ([] if keep_models else [cfg.model_dir, os.path.dirname(MODEL_DIR)]) + [OPT_ROOT]
    result.append(ops_.empty_folders_removed(
        name="Remove the kit's folders left empty (" + ", ".join(empty) + ")", paths=empty))
    if any(op.will_change for op in changed_files):
        result.append(server.shell(
            name="Refresh the loader cache and the initramfs (CUDA or nouveau files went)",
            commands=["ldconfig; if command -v update-initramfs >/dev/null 2>&1 && "
                      "ls /boot/initrd.img-* >/dev/null 2>&1; then update-initramfs -u; fi"]))
    return result
