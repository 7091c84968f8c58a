"""
Facts for a host's life after the first deploy: what the kit's folders hold (the upgrade's
cleanup), and which packages the kit installed (the uninstall).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from . import DictFact, ListFact


@dataclass(frozen=True)
class FolderEntry:
    """One entry of a folder: `kind` is find's %y (d: folder, f: file, l: link), its size
    as `du -sk` counts it (a link's own, never its target's), `target` a link's target."""

    name: str
    kind: str
    size_kib: int
    target: str = ""


class FolderEntries(ListFact[FolderEntry]):
    """The entries of a folder (none when it is missing), with their sizes."""

    def command(self, path: str) -> str:
        p = shlex.quote(path)
        return (f"[ -d {p} ] && find {p} -mindepth 1 -maxdepth 1 -printf '%y\\t%f\\t%l\\n' | "
                "while IFS=\"$(printf '\\t')\" read -r t f l; do "
                f"printf '%s\\t%s\\t%s\\t%s\\n' \"$t\" \"$(du -sk {p}/\"$f\" | cut -f1)\" "
                "\"$f\" \"$l\"; done; true")

    def process(self, output: list[str]) -> list[FolderEntry]:
        out = []
        for line in output:  # <kind>\t<KiB>\t<name>\t<link target>
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 3 or not parts[2] or not parts[1].isdigit():
                continue
            out.append(FolderEntry(name=parts[2], kind=parts[0], size_kib=int(parts[1]),
                                   target=parts[3] if len(parts) > 3 else ""))
        return sorted(out, key=lambda e: e.name)


# pyinfra's apt.packages runs `apt-get -y -o Dpkg::Options::="--force-confdef" -o
# Dpkg::Options::="--force-confold" install --no-install-recommends NAMES`; apt's history
# log records it without the quotes
PYINFRA_INSTALL = re.compile(
    r"^apt-get -y -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold "
    r"install (?:--no-install-recommends )?(?P<names>.+)$")
# the kit's own apt-get lines (operations/nvidia.py driver_installed, of the driver's
# meta-packages, and driver_purged) as the history log keeps them: the arguments, not the
# environment
DRIVER_METAS = "nvidia-open|cuda-drivers"
DRIVER_INSTALL = re.compile(rf"^apt-get install -y --no-install-recommends ({DRIVER_METAS})$")
DRIVER_PURGE = re.compile(r"^apt-get purge -y (?P<names>.+)$")


def asked_names(commandline: str) -> list[str]:
    """The packages (versions dropped) a history entry's command line asks for when it is one
    of the kit's installs: pyinfra's apt.packages, or the driver's own apt-get line (a
    hand-typed one for git is not the kit's); [] for any other."""
    m = PYINFRA_INSTALL.match(commandline)
    if m:
        return [n.split("=", 1)[0] for n in m.group("names").split()]
    m = DRIVER_INSTALL.match(commandline)
    return [m.group(1)] if m else []


@dataclass(frozen=True)
class AptTransaction:
    """One entry of /var/log/apt/history.log: what was asked for, what it newly installed."""

    commandline: str
    installed: tuple[str, ...]


def parse_apt_history(output: list[str]) -> list[AptTransaction]:
    """apt's history log (every rotation, oldest first) -> its transactions. `Install:`
    lists `name:arch (version[, automatic])` entries separated by `), `."""
    out: list[AptTransaction] = []
    command, installed = "", ()
    for line in [*output, "Start-Date: end"]:
        if line.startswith("Start-Date:"):
            if command:
                out.append(AptTransaction(command, installed))
            command, installed = "", ()
        elif line.startswith("Commandline:"):
            command = line.split(":", 1)[1].strip()
        elif line.startswith("Install:"):
            names = re.findall(r"(?:^|\), )([a-z0-9][a-z0-9+.-]*):[a-z0-9-]+ \(",
                               line.split(":", 1)[1].strip())
            installed = tuple(names)
    return out


class AptHistory(ListFact[AptTransaction]):
    """The transactions in apt's history logs, oldest first (rotated ones included; none
    when there is no log)."""

    def command(self) -> str:
        return ("for f in $(ls -tr /var/log/apt/history.log* 2>/dev/null); do "
                "zcat -f \"$f\"; done; true")

    process = staticmethod(parse_apt_history)


class PackageNames(ListFact[str]):
    """A fact whose command prints package names, one a line: each once, sorted."""

    def process(self, output: list[str]) -> list[str]:
        return sorted({line.strip() for line in output if line.strip()})


class InstalledPackages(PackageNames):
    """Names of the packages dpkg has installed: ``["adduser", "apt", ...]``."""

    def command(self) -> str:
        return ("dpkg-query -W -f '${Package} ${db:Status-Status}\\n' 2>/dev/null | "
                "awk '$2 == \"installed\" {print $1}'; true")


def purge_simulated(names: str, awk_vars: str = "", then: str = "print $2") -> str:
    """apt's simulation of purging `names` (shell words), its lines for each package it
    would remove (apt adds what depends on them) given to awk's `then`."""
    return (f"apt-get -s -q purge --allow-change-held-packages {names} 2>/dev/null | "
            f"awk {awk_vars}'$1 == \"Purg\" || $1 == \"Remv\" {{ {then} }}'")


class AptPurgeWould(PackageNames):
    """What `apt-get -s purge PACKAGES` would remove:
    ``["docker.io", "some-tool-that-needs-docker"]``."""

    def command(self, packages: list[str]) -> str:
        return purge_simulated(" ".join(shlex.quote(p) for p in packages)) + "; true"


class PresentPaths(DictFact[int]):
    """
    Of the paths asked for, those that exist (a dangling link counts), with their size as
    `du -sk` counts it: ``{"/opt/beekeeper/venv": 48212}``.
    """

    def command(self, paths: list[str]) -> str:
        names = " ".join(shlex.quote(p) for p in paths)
        return (f"for p in {names}; do if [ -e \"$p\" ] || [ -L \"$p\" ]; then "
                "printf '%s\\t%s\\n' \"$(du -sk \"$p\" 2>/dev/null | cut -f1)\" \"$p\"; "
                "fi; done; true")

    def process(self, output: list[str]) -> dict[str, int]:
        rows = (line.rstrip("\n").partition("\t") for line in output)
        return {path: int(size) if size.isdigit() else 0 for size, _, path in rows if path}


class FileSizes(DictFact[int]):
    """The plain files directly in a folder, with their sizes in bytes (none when it is
    missing): ``{"gemma-3-270m-q4_k_m.gguf": 253113024}``."""

    def command(self, path: str) -> str:
        p = shlex.quote(path)
        return f"[ -d {p} ] && find {p} -mindepth 1 -maxdepth 1 -type f -printf '%s\\t%f\\n'; true"

    def process(self, output: list[str]) -> dict[str, int]:
        rows = (line.rstrip("\n").partition("\t") for line in output)
        return {name: int(size) for size, _, name in rows if name and size.isdigit()}


# The line the kit leaves in a Debian sources file it added an archive area to: the record
# the uninstall reverts by, in the file itself, so it outlives the kit's folders and tells a
# reader why the area is there (operations/apt_sources.py writes it).
COMPONENT_MARK = "# beekeeper added the {component} area to the Debian sources in this file"
COMPONENT_MARK_RE = re.compile("^" + COMPONENT_MARK.format(component="(?P<component>[a-z][a-z-]*)")
                               + "$")


def component_mark(component: str) -> str:
    """The kit's record line for `component` (`# beekeeper added the contrib area ...`)."""
    if not re.fullmatch(r"[a-z][a-z-]*", component):
        raise ValueError(f"not an archive area: {component!r}")
    return COMPONENT_MARK.format(component=component)


class KitComponents(ListFact[tuple[str, str]]):
    """
    The archive areas the kit added to the host's Debian sources, by its record line in each
    file (COMPONENT_MARK): ``[("contrib", "/etc/apt/sources.list.d/debian.sources")]``.
    """

    def command(self) -> str:
        return ("grep -HE '^# beekeeper added the [a-z-]+ area' /etc/apt/sources.list "
                "/etc/apt/sources.list.d/*.sources 2>/dev/null; true")

    def process(self, output: list[str]) -> list[tuple[str, str]]:
        out = []
        for line in output:  # `grep -H`: FILE:LINE
            path, sep, text = line.rstrip("\n").partition(":")
            m = COMPONENT_MARK_RE.match(text)
            if sep and m and path.startswith("/etc/apt/"):
                out.append((m.group("component"), path))
        return sorted(set(out))
