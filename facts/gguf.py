"""
Facts about model files on the host: a GGUF's header, read before any change.
"""

from __future__ import annotations

import shlex

from pyinfra.api import FactBase

from beekeeper.core.planner import GGUF_HEAD_BYTES
from beekeeper.core.profiles import SHA256_RE


def parse_head_hex(output: list[str]) -> bytes | None:
    """`od -An -tx1 -v` of a file's first bytes (hex pairs, any spacing) -> those bytes;
    None where the file could not be read (the command prints `unreadable`)."""
    text = "".join(line.strip() for line in output)
    if not text or text.startswith("unreadable"):
        return None
    digits = "".join(text.split())
    try:
        return bytes.fromhex(digits)
    except ValueError:
        return None


class FileHead(FactBase[bytes | None]):
    """
    Returns the first bytes of a file on the host (GGUF_HEAD_BYTES: a GGUF's magic and
    version), or None where it cannot be read: ``b"GGUF\\x03\\x00\\x00\\x00"``.
    """

    def command(self, path: str) -> str:
        q = shlex.quote(path)
        return (f"if [ -r {q} ]; then head -c {GGUF_HEAD_BYTES} {q} | od -An -tx1 -v; "
                "echo; else echo unreadable; fi")

    process = staticmethod(parse_head_hex)


# A model file's sha256 is remembered in a stamp per path (docs/architecture.md, model) with
# the file's identity: ctime to the nanosecond too, as a rewrite changes it and no user can
# set it back.
IDENTITY_SH = "stat -L -c '%i:%s:%.9Y:%.9Z' -- "


def stamp_path_sh(path: str, stamps: str) -> str:
    return f"{shlex.quote(stamps)}/$(printf '%s' {shlex.quote(path)} | sha256sum | cut -c1-40)"


def stamp_command(path: str, sha256: str, stamps: str, identity: str | None = None) -> str:
    """Record that `path`, as it is now, has `sha256` (just checked); with `identity` (the
    file's when it was hashed), only if the file is still that one. Best effort: a stamp
    that cannot be written (a full disk) is a warning, never a failure."""
    q = shlex.quote
    same = f" && [ \"$id\" = {q(identity)} ]" if identity else ""
    warning = f"beekeeper: the sha256 of {path} is not remembered (the next run hashes it again)"
    return (f"{{ mkdir -p {q(stamps)} && chmod 0700 {q(stamps)} && "
            f"s={stamp_path_sh(path, stamps)} && id=$({IDENTITY_SH}{q(path)}){same} && "
            f"printf '%s\\n%s\\n' \"$id\" {q(sha256)} > \"$s.new.$$\" && "
            f"mv -f \"$s.new.$$\" \"$s\"; }} || "
            f"echo {q(warning)} >&2")


class Sha256(str):
    """A file's sha256 (hex); `stamped`: read from its stamp, not hashed in this run;
    `identity`: the file's identity when it was hashed (None when read from its stamp)."""

    stamped: bool = False
    identity: str | None = None

    def __new__(cls, value: str, stamped: bool = False,
                identity: str | None = None) -> Sha256:
        made = super().__new__(cls, value)
        made.stamped = stamped
        made.identity = identity
        return made


def parse_sha256(output: list[str]) -> Sha256 | None:
    """`stamped <hex>` (the stamp holds it) or `hashed <identity> <hex>` (hashed now, the
    file's identity read before); None: no file, or one that could not be read."""
    words = " ".join(line.strip() for line in output).split()
    if len(words) == 2 and words[0] == "stamped" and SHA256_RE.fullmatch(words[1]):
        return Sha256(words[1], stamped=True)
    if len(words) == 3 and words[0] == "hashed" and SHA256_RE.fullmatch(words[2]):
        return Sha256(words[2], identity=words[1])
    return None


class Sha256File(FactBase[Sha256 | None]):
    """
    Returns a file's sha256 (symlinks followed), from its stamp in ``stamps`` where the
    file is as it was stamped, else hashed; None where there is no file to read.
    """

    def command(self, path: str, stamps: str) -> str:
        q = shlex.quote
        return (f"id=$({IDENTITY_SH}{q(path)} 2>/dev/null) || exit 0; "
                f"s={stamp_path_sh(path, stamps)}; "
                "if [ -f \"$s\" ] && [ \"$(head -n1 \"$s\")\" = \"$id\" ]; then "
                "echo \"stamped $(sed -n 2p \"$s\")\"; exit 0; fi; "
                f"h=$(sha256sum -- {q(path)} 2>/dev/null | cut -d' ' -f1) && "
                "echo \"hashed $id $h\"; true")

    process = staticmethod(parse_sha256)
