"""
Facts about the running LLM server, read on the host.
"""

from __future__ import annotations

import json
import shlex
from typing import Any

from pyinfra.api import FactBase


def hostcheck(script: str, port: int, timeout_s: int, api_key_file: str | None,
              owner: str) -> str:
    """hostcheck.py's command line. `owner`: its arguments naming the process that must
    answer and the model it must list (operations/smoke.py smoke_checked), already quoted."""
    key = f" --api-key-file {shlex.quote(api_key_file)}" if api_key_file else ""
    return f"python3 {shlex.quote(script)} --timeout {timeout_s}{key} --port {int(port)} {owner}"


class ServerSmoke(FactBase[dict[str, Any] | None]):
    """Runs the host-side smoke check (read-only) and returns its JSON (``ok``, ``model``,
    ``completion_tokens``, ...), or ``None`` when the script is not on the host yet."""

    def command(self, script: str, port: int, api_key_file: str | None, owner: str) -> str:
        check = hostcheck(script, port, 5, api_key_file, owner)
        return f"test -f {shlex.quote(script)} && {check} || true"

    def process(self, output: list[str]) -> dict[str, Any] | None:
        for line in reversed(output):
            if line.startswith("{"):
                return json.loads(line)
        return None
