"""
Facts about secret files on the host: what kind of file a path is, its mode, and whether it
holds anything, read without the secret ever leaving the host (no `cat`: only
`stat` and a count of its non-space characters reach pyinfra's output).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from pyinfra.api import FactBase


@dataclass(frozen=True)
class SecretFileInfo:
    """`kind`: "file", "missing", "folder" or "other" (a device, a socket ...); for a file
    its permission bits (`mode`, 0o600) and how many non-space characters it holds (`chars`:
    0 is an empty token); `readable`: root could read it."""

    kind: str
    mode: int = 0
    chars: int = 0
    readable: bool = True


def parse_secret_file(output: list[str]) -> SecretFileInfo | None:
    """The command's one line: `missing`, `folder`, `other`, or `file MODE CHARS OK`."""
    words = " ".join(output).split()
    if not words:
        return None  # the command did not run (no shell, sudo refused): unknown
    if words[0] != "file":
        return SecretFileInfo(kind=words[0] if words[0] in ("missing", "folder") else "other")
    try:
        mode, chars, ok = int(words[1], 8), int(words[2]), words[3] == "ok"
    except (IndexError, ValueError):
        return None
    return SecretFileInfo(kind="file", mode=mode, chars=chars, readable=ok)


class SecretFile(FactBase):
    def command(self, path: str) -> str:  # type: ignore[override]
        p = shlex.quote(path)
        return (f"if [ -d {p} ]; then echo folder; elif [ ! -e {p} ]; then echo missing; "
                f"elif [ ! -f {p} ]; then echo other; else "
                f"if [ -r {p} ]; then ok=ok; else ok=unreadable; fi; "
                f"n=$(tr -d '[:space:]' < {p} 2>/dev/null | wc -c); "
                f"echo file $(stat -L -c %a {p}) \"${{n:-0}}\" $ok; fi")

    process = staticmethod(parse_secret_file)
