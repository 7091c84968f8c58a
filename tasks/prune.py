"""
Prune: the inventory is the truth. A model service the kit deployed on this machine that the
inventory no longer names (or marks absent) is removed, its model kept; once every kept service
passed its smoke check, the native builds, source trees and build folders no rollback needs go
(docs/lifecycle.md). Server images keep their own rule (tasks/server_image.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from pyinfra import host

from beekeeper.core.build import build_prefix
from beekeeper.core.config import HostConfig
from beekeeper.core.machines import leaving
from beekeeper.core.paths import NATIVE_PREFIX, ServicePaths, build_folders, prev
from beekeeper.facts.lifecycle import FolderEntries, PresentPaths as _Present
from beekeeper.facts.services import DeployedServices, deployed_manifest
from beekeeper.operations.lifecycle import entries_pruned, mib
from beekeeper.operations.services import service_removed


def ensure(cfg: HostConfig, phase: str = "after", artifact: str | None = None,
           kept: frozenset[str] | None = frozenset(),
           neighbours: Sequence[HostConfig] = ()) -> None:
    """Queue the removals of one phase. "before" (ahead of the kept services' start): the
    stale services whose port a kept service takes, or whose port cannot be read. "after"
    (once every kept service passed its smoke check): all the others, then, given the
    `artifact` this deploy runs ("" where none), the upgrade cleanup. `kept`: the services
    other inventory hosts on this machine keep, None where unknown (then none is removed);
    `neighbours`: those hosts' configurations (the builds of their source stay)."""
    if kept is None and phase == "before":
        host.noop("removing services left out: skipped, another inventory host on this "
                  "machine has bad host data and what it keeps is unknown")
    wanted_ports = {s.data.port for s in cfg.services}
    going = leaving(cfg, host.get_fact(DeployedServices), kept)
    for name in going:
        record = deployed_manifest(ServicePaths(name).manifest)
        port = record.port if record else None  # None: the manifest cannot be read
        first = port is None or port in wanted_ports
        if first != (phase == "before"):
            continue
        why = "marked absent" if name in cfg.absent else "gone from the inventory"
        if first:
            why += f", its port {port} goes to a kept service" if port else ""
        service_removed(
            name=f"Remove service {name} ({why}): stop it, remove its unit, env file and "
                 "container; keep its model", service=name)
    if phase == "after" and artifact is not None:
        upgrade_cleanup(cfg, artifact, set(going), neighbours)


def _runs(path: str) -> str | None:
    record = deployed_manifest(path)
    return (record.image or None) if record else None


def kept_artifacts(cfg: HostConfig, artifact: str,
                   going: set[str]) -> tuple[set[str], str | None]:
    """The artifacts a rollback of any service on this machine needs once this deploy is
    done (`going`: the services it removes), or (set(), why) when one of them cannot be
    known."""
    mine = {s.name for s in cfg.services}
    keep = {artifact} if artifact else set()
    for name in host.get_fact(DeployedServices):
        if name in going:
            continue
        p = ServicePaths(name)
        now = _runs(p.manifest)
        if now is None:
            return set(), f"what {p.unit_name} runs cannot be read ({p.manifest})"
        keep.add(now)
        if name in mine and now != artifact:
            continue  # this deploy replaces it: it becomes the previous unit
        # the previous unit, or under runtime supervisor the previous program file
        if host.get_fact(_Present, paths=[prev(p.unit), prev(p.program_conf)]):
            before = _runs(prev(p.manifest))
            if before is None:
                return set(), (f"the previous unit of {p.unit_name} is there but what it "
                               f"runs is unknown ({prev(p.manifest)} cannot be read)")
            keep.add(before)
    return keep, None


def _source_trees(cfg: HostConfig) -> set[str]:
    """The source trees a deploy of `cfg` builds from, by name (none where it has no
    service): its ref, and an uploaded tree's or tarball's name."""
    if not cfg.services:
        return set()
    trees = {cfg.source.ref}
    if cfg.source.kind == "local" and cfg.source.path:
        trees.add(cfg.source.path.rsplit("/")[-1])
    return trees


def upgrade_cleanup(cfg: HostConfig, artifact: str, going: set[str],
                    neighbours: Sequence[HostConfig] = ()) -> None:
    """Remove the native builds, source trees and build folders no rollback needs. Another
    inventory host on this machine (`neighbours`) builds and starts its own server in this
    run, after this step is planned and before it runs: the builds of its source ref stay
    (by their names' start, build_prefix of its ref), and its source trees."""
    keep, unknown = kept_artifacts(cfg, artifact, going)
    if unknown:
        host.noop(f"upgrade cleanup: skipped, nothing removed: {unknown}")
        return
    slugs = set()  # the builds they name: `<repo>:<slug>` or `<NATIVE_PREFIX>/<slug>/llama-server`
    for a in keep:
        if a.startswith(f"{cfg.image_repo}:"):
            slugs.add(a.split(":", 1)[1])
        elif a.startswith(NATIVE_PREFIX + "/"):
            slugs.add(a[len(NATIVE_PREFIX) + 1:].split("/", 1)[0])
    slugs.discard("")  # a record naming no build keeps none
    build = build_folders(cfg.data.state_dir)
    folders = {NATIVE_PREFIX: "native builds", build.sources: "source trees",
               build.image_builds: "image build folders", build.native_builds: "native build trees"}
    entries = {folder: host.get_fact(FolderEntries, path=folder) for folder in folders}
    # the trees the kept builds came from (a build's name starts with build_prefix(its ref)),
    # and by name the one this deploy builds from: it may not be there yet when the cleanup
    # is planned (the fetch runs later), and the step reads the folder when it runs
    trees = {e.name for e in entries[build.sources] if not e.name.endswith(".tmp")
             and any(s.startswith(build_prefix(e.name)) for s in slugs)}
    trees |= _source_trees(cfg)
    theirs = sorted({build_prefix(c.source.ref) for c in neighbours if c.services})
    for c in neighbours:
        trees |= _source_trees(c)
    native_keep = set(slugs)
    for e in entries[NATIVE_PREFIX]:
        if e.kind == "l" and e.target.rstrip("/").rsplit("/", 1)[-1] in slugs:
            native_keep.add(e.name)  # `current`, while it names a kept build
    keeps = {NATIVE_PREFIX: native_keep, build.sources: trees}  # the build folders keep the slugs
    builds = ", ".join(sorted(slugs)) or "none"
    for folder, what in folders.items():
        names = keeps.get(folder, slugs)
        prefixes = [] if folder == build.sources else theirs
        stale = [e for e in entries[folder] if e.name not in names
                 and not e.name.startswith(tuple(prefixes))]
        if not stale:  # no operation: a host with nothing to clean shows no step for it
            host.noop(f"upgrade cleanup: no {what} beyond the kept builds in {folder}")
            continue
        entries_pruned(
            name=f"Remove {what} no rollback needs from {folder} (removes {len(stale)}, "
                 f"{mib(sum(e.size_kib for e in stale))}; keeps the running and previous "
                 f"units' builds: {builds})",
            folder=folder, keep=sorted(names), what=what, keep_prefixes=prefixes)
