"""
Facts about model files on the host: a GGUF's header, read before any change.
"""

from __future__ import annotations

import shlex

from pyinfra.api import FactBase

from beekeeper.core.config import GGUF_HEAD_BYTES


def parse_head_hex(lines: list[str]) -> bytes | None:
    """`od -An -tx1 -v` of a file's first bytes (hex pairs, any spacing) -> those bytes;
    None where the file could not be read (the command prints `unreadable`)."""
    text = "".join(line.strip() for line in lines)
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

    def process(self, output: list[str]) -> bytes | None:
        return parse_head_hex(output)
