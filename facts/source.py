"""
Facts about the server's source tree on the host.
"""

from __future__ import annotations

import shlex

from pyinfra.api import FactBase

ID_FILE = ".beekeeper-source"  # in a tree unpacked from a tarball: the tarball's sha256


class SourceTreeId(FactBase[str | None]):
    """
    What the source tree at `path` holds: the commit `git rev-parse HEAD` prints for a git
    checkout, else the id recorded when a tarball was unpacked there; ``None`` when there is
    no tree yet.
    """

    def command(self, path: str) -> str:
        p = shlex.quote(path)
        return (f"if [ -d {p}/.git ]; then git -C {p} rev-parse HEAD 2>/dev/null || true; "
                f"elif [ -f {p}/{ID_FILE} ]; then cat {p}/{ID_FILE}; fi")

    def process(self, output: list[str]) -> str | None:
        text = "\n".join(output).strip()
        return text or None
