"""
Lifecycle operations: remove what an upgrade left behind, and everything the kit put on a
host (the uninstall), only what is there; each says how much disk it frees.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pyinfra import host
from pyinfra.api import StringCommand, operation
from pyinfra.facts.files import FileContents
from pyinfra.facts.server import Groups, Users

from beekeeper.core.distro import APT_GET, apt_wait
from beekeeper.core.paths import prev
from beekeeper.facts.docker import ImageTags
from beekeeper.facts.host import AptHolds
from beekeeper.facts.lifecycle import (
    AptPurgeWould,
    FolderEntries,
    PresentPaths,
    component_mark,
)

from .shell import StreamedCommand, q, via_tmp


def mib(kib: int) -> str:
    return f"{kib / 1024:.0f} MiB" if kib >= 1024 or kib == 0 else f"{kib / 1024:.1f} MiB"


def removal(paths: list[str], what: str, kib: int) -> StreamedCommand:
    """`rm -rf` of `paths`, then the line saying what went and how much disk it freed."""
    return StreamedCommand("rm -rf " + " ".join(q(p) for p in paths)
                           + f" && echo {q(f'beekeeper: removed {what}: {mib(kib)} freed')}")


@operation()
def entries_pruned(folder: str, keep: list[str], what: str,
                   keep_prefixes: list[str] | None = None):
    """
    Remove the entries of a folder the kit owns that no kept artifact needs; `what` names
    them in the last line ("native builds").

    + keep_prefixes: entries whose names start so stay too (builds another inventory host
      on this machine makes in this run, unknown when the step is planned)
    """
    starts = tuple(keep_prefixes or ())
    stale = [e for e in host.get_fact(FolderEntries, path=folder)
             if e.name not in keep and not e.name.startswith(starts)]
    if not stale:
        host.noop(f"{folder}: nothing beyond what is kept ({', '.join(sorted(keep)) or 'none'})")
        return
    names = ", ".join(e.name for e in stale)
    yield removal([f"{folder}/{e.name}" for e in stale], f"{len(stale)} {what} ({names})",
                  sum(e.size_kib for e in stale))


@operation()
def paths_removed(paths: list[str], what: str):
    """
    Remove files and folders the kit made, those that are there; `what` names them in
    the last line.
    """
    present = host.get_fact(PresentPaths, paths=paths)
    if not present:
        host.noop(f"no {what} here")
        return
    yield removal(list(present), what, sum(present.values()))


@operation()
def link_removed_once_dangling(link: str):
    """
    Remove the kit's link `link` (the caller read it there) once what it points at is gone
    (an earlier operation of this run removes it when empty); a link to a folder that still
    holds something (yours) stays.
    """
    yield f"[ -e {q(link)} ] || rm -f {q(link)}"


@operation()
def empty_folders_removed(paths: list[str]):
    """
    Remove folders the kit made once they are empty (in order: children first); a folder
    that still holds something (yours) stays.
    """
    present = host.get_fact(PresentPaths, paths=paths)
    if not present:
        host.noop("none of the kit's folders is left")
        return
    yield " ; ".join(f"rmdir {q(p)} 2>/dev/null" for p in paths if p in present) + " ; true"


@operation()
def file_removed_if_kit(path: str, pattern: str):
    """
    Remove a file the kit wrote, only while it holds what the kit wrote (the same file with
    other lines is yours, or was there before).

    + pattern: a regular expression the whole of what the kit wrote matches (the CUDA
      release in it follows the deploy that wrote it, not the host data of today)
    """
    lines = host.get_fact(FileContents, path=path)
    if lines is None:
        host.noop(f"{path} is not there")
        return
    if not re.fullmatch(pattern, "\n".join(lines).strip()):
        host.noop(f"{path} holds lines the kit did not write: kept")
        return
    yield f"rm -f {q(path)}"


SYSTEMD_RUNS = "[ -d /run/systemd/system ]"  # systemd is PID 1 (else runtime supervisor)


def unit_removal(unit_name: str, unit_path: str, dropin_dir: str) -> list[str]:
    """Shell lines that remove a systemd unit the kit wrote (unit_removed), each tolerating
    an earlier, partial removal; where systemd is not PID 1, only the files go."""
    unit = q(unit_name)
    return [
        f"if {SYSTEMD_RUNS}; then systemctl disable --now {unit} 2>/dev/null || "
        f"systemctl stop {unit} 2>/dev/null || true; fi",
        f"rm -f {q(unit_path)} {q(prev(unit_path))}",
        f"rmdir {q(dropin_dir)} 2>/dev/null || true",
        f"if {SYSTEMD_RUNS}; then systemctl daemon-reload; systemctl reset-failed {unit} "
        "2>/dev/null || true; fi",
    ]


@operation()
def unit_removed(unit_name: str, unit_path: str, dropin_dir: str):
    """
    Stop, disable and remove a systemd unit the kit wrote (and its rollback copy); its
    drop-in folder goes when empty (files there are yours).
    """
    if not host.get_fact(PresentPaths, paths=[unit_path, prev(unit_path)]):
        host.noop(f"{unit_name} is not installed")
        return
    yield StreamedCommand(" ; ".join([*unit_removal(unit_name, unit_path, dropin_dir),
                                      f"echo {q(f'beekeeper: removed {unit_name}')}"]))


@operation()
def images_removed(repo: str):
    """
    Remove every image of the kit's repository (the server images it built).
    """
    tags = host.get_fact(ImageTags, repo=repo)
    if not tags:
        host.noop(f"no {repo} image here")
        return
    yield "docker rmi -f " + " ".join(q(t) for t in tags)


@operation()
def holds_released(packages: list[str]):
    """
    Release the apt holds the kit set on packages (apt-mark unhold), those held.
    """
    held = [p for p in packages if p in host.get_fact(AptHolds)]
    if not held:
        host.noop("no hold of the kit's to release")
        return
    yield StreamedCommand(apt_wait())
    yield "apt-mark unhold " + " ".join(q(p) for p in held)


# packages whose purge deletes data that is not theirs, and the script that does it: removed
# first, that script deleted, then purged (docs/lifecycle.md, docker.io)
PURGE_WIPES = {"docker.io": "/var/lib/docker/nuke-graph-directory.sh"}


@operation()
def packages_purged(packages: list[str], along: list[str] | None = None):
    """
    Purge packages the kit installed, unless apt would take more with them (a package
    installed since needs one of them): then none is removed and the line says which.

    + packages: names, all installed
    + along: packages an earlier step of this run purges (apt may name them too)
    """
    if not packages:
        host.noop("no package the kit installed is left")
        return
    extra = purge_extras(packages, along or [])
    if extra:
        host.noop(f"kept {', '.join(packages)}: purging them would also remove "
                  f"{', '.join(extra)}, which the kit did not install")
        return
    apt = APT_GET + " -y -q {} --allow-change-held-packages "
    yield StreamedCommand(apt_wait())
    wipers = [p for p in packages if p in PURGE_WIPES]
    if wipers:
        yield (apt.format("remove") + " ".join(q(p) for p in wipers) + " && rm -f "
               + " ".join(q(PURGE_WIPES[p]) for p in wipers))
    yield apt.format("purge") + " ".join(q(p) for p in packages)


def purge_extras(packages: list[str], along: list[str]) -> list[str]:
    """What `apt-get purge PACKAGES` would also remove beyond them and `along`."""
    would = host.get_fact(AptPurgeWould, packages=packages)
    return [p for p in would if p not in packages and p not in along]


@operation()
def left_in_place(why: str):
    """
    A step that changes nothing and says what stays, and why (so --dry lists it too).
    """
    host.noop(why)
    yield from ()  # an operation is a generator


@operation()
def account_removed(account: str):
    """
    Remove a system user and its group that the kit created.
    """
    user = account in (host.get_fact(Users) or {})
    group = account in (host.get_fact(Groups) or [])
    if not user and not group:
        host.noop(f"no {account} user or group")
        return
    if user:
        yield f"userdel {q(account)}"
    if group:  # userdel takes a group of its name along where no one else is in it
        yield StringCommand(f"if getent group {q(account)} >/dev/null; then "
                            f"groupdel {q(account)}; fi")


@operation()
def components_reverted(component: str, files: list[str]):
    """
    Remove an archive area (Debian's contrib) from the sources files the kit added it to,
    by the record line it left in each (facts/lifecycle.py COMPONENT_MARK): undo
    apt_sources.component_command, then refresh apt's lists (a failure there, offline,
    changes nothing already done).
    """
    if not files:
        host.noop(f"no record of the kit adding Debian's {component} area: sources kept")
        return
    # checks the name (it reaches sed unquoted); the mark holds no regex metacharacter
    mark = component_mark(component)
    drop = f"s/ {component}( |$)/\\1/"
    edits = " ; ".join(
        f"sed -i -E -e '/^Components:/{{{drop}}}' -e '/^deb(-src)? .*debian/{{{drop}}}' "
        f"-e {q('/^' + mark + '$/d')} {q(f)}" for f in files)
    # the lists' refresh may fail (a lock held past the wait too): nothing done is undone
    yield StringCommand(f"{edits} ; ( {apt_wait()} ) && apt-get update -qq || true ; "
                        f"echo {q(f'beekeeper: removed the {component} area the kit added')}")


def without_runtime(text: str, runtime: str, binary: str) -> dict[str, Any] | None:
    """Docker's daemon.json less the `runtimes.<runtime>` entry that runs `binary` (as
    `nvidia-ctk runtime configure` writes it), an emptied `runtimes` and a `default-runtime`
    naming it (Docker would not start without it); None when there is no such entry."""
    try:
        config = json.loads(text)
    except ValueError:
        return None
    runtimes = config.get("runtimes") if isinstance(config, dict) else None
    if not isinstance(runtimes, dict):
        return None
    entry = runtimes.get(runtime)
    if not isinstance(entry, dict) or str(entry.get("path", "")).rsplit("/", 1)[-1] != binary:
        return None
    rest = {k: v for k, v in runtimes.items() if k != runtime}
    out = {k: v for k, v in config.items() if k != "runtimes"}
    if rest:
        out["runtimes"] = rest
    if out.get("default-runtime") == runtime:
        del out["default-runtime"]
    return out


DAEMON_JSON = "/etc/docker/daemon.json"


@operation()
def docker_runtime_removed(restart: bool):
    """
    Remove the nvidia runtime entry nvidia-ctk added to Docker's daemon.json, keeping every
    other setting (a file left with none goes); restart Docker, if it runs, only when it
    changed.

    + restart: whether Docker stays installed (else there is nothing to restart)
    """
    lines = host.get_fact(FileContents, path=DAEMON_JSON)
    config = without_runtime("\n".join(lines or []), "nvidia", "nvidia-container-runtime")
    if config is None:
        host.noop(f"{DAEMON_JSON} names no nvidia runtime running nvidia-container-runtime")
        return
    if not config:
        yield f"rm -f {DAEMON_JSON}"
    else:
        tmp, put = via_tmp(DAEMON_JSON, ".beekeeper-tmp")
        yield StringCommand(f"printf '%s\\n' {q(json.dumps(config, indent=4))} > {tmp} && "
                            f"chmod --reference={DAEMON_JSON} {tmp} && {put}")
    if restart:
        yield "systemctl try-restart docker.service"
