"""
Facts about where a path's data lives: the file system of its nearest existing folder
(a pod's volume, or the container's own overlay layer that a restart clears).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from pyinfra.api import FactBase


@dataclass(frozen=True)
class FsInfo:
    """The file system holding a path: the nearest existing folder up from the path, the
    file system's type (findmnt's FSTYPE, else `stat -f`'s %T) and mount point ("" unknown)."""

    existing: str
    fstype: str
    target: str = ""

    @property
    def overlay(self) -> bool:
        """A container's own layer (overlay, overlayfs, fuse-overlayfs): a pod's restart on
        RunPod or Kubernetes starts from a fresh one."""
        return "overlay" in self.fstype.lower()


def parse_fs_of(output: list[str]) -> FsInfo | None:
    """`existing=`, `findmnt=FSTYPE TARGET` and `statf=TYPE` lines -> FsInfo; None where
    neither tool told the type."""
    values = {k.strip(): v.strip() for k, eq, v in (line.partition("=") for line in output)
              if eq}
    found = values.get("findmnt", "").split(None, 1)
    if found:
        return FsInfo(existing=values.get("existing", ""), fstype=found[0],
                      target=found[1] if len(found) > 1 else "")
    stat = values.get("statf", "")
    if stat:
        return FsInfo(existing=values.get("existing", ""), fstype=stat)
    return None


class FsOf(FactBase[FsInfo | None]):
    def command(self, path: str) -> str:
        q = shlex.quote(path)
        return (f'p={q}; while [ ! -e "$p" ]; do p=$(dirname "$p"); done; '
                'echo "existing=$p"; '
                'echo "findmnt=$(findmnt -n -o FSTYPE,TARGET -T "$p" 2>/dev/null | head -n1)"; '
                'echo "statf=$(stat -f -c %T "$p" 2>/dev/null)"; true')

    process = staticmethod(parse_fs_of)
