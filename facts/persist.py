"""
Facts for a GPU pod's persistent root (host data `persistent_root`): what each of the kit's
folders is on the host now (a link, a folder, missing).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from . import DictFact


@dataclass(frozen=True)
class PathKind:
    """`kind`: "link", "dir", "file" or "missing"; `target`: a link's target."""

    kind: str
    target: str = ""


class PathKinds(DictFact[PathKind]):
    """What each path is, a link tested before what it points to."""

    def command(self, paths: list[str]) -> str:
        words = " ".join(shlex.quote(p) for p in paths)
        return (f"for p in {words}; do if [ -L \"$p\" ]; then "
                "printf '%s\\tlink\\t%s\\n' \"$p\" \"$(readlink \"$p\")\"; "
                "elif [ -d \"$p\" ]; then printf '%s\\tdir\\t\\n' \"$p\"; "
                "elif [ -e \"$p\" ]; then printf '%s\\tfile\\t\\n' \"$p\"; "
                "else printf '%s\\tmissing\\t\\n' \"$p\"; fi; done")

    def process(self, output: list[str]) -> dict[str, PathKind]:
        out: dict[str, PathKind] = {}
        for line in output:  # <path>\t<kind>\t<link target>
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 2 or parts[1] not in ("link", "dir", "file", "missing"):
                continue
            out[parts[0]] = PathKind(parts[1], parts[2] if len(parts) > 2 else "")
        return out
