"""
The deployment record: what a model service runs, as the deploy leaves it on the host
(ServicePaths.manifest, /etc/beekeeper/<name>/deployed.json, and its `.prev` kept for a
rollback). Written by tasks/service.py (`to_json`); read by attribute everywhere else
(`from_json`): the deploy's facts and cleanups, the uninstall, the host checks, verify.

Standard library only, and Python 3.10: verify's kit ships beekeeper/core to the host
(beekeeper/hostverify.py). The host-side scripts (beekeeper/hostside/) are uploaded as single
files and cannot import it: hostside/rollback.py reads the three keys it needs itself.

A record of an older kit lacks the keys added since (the first kit wrote service, container,
unit, profile, mode, image, bind_address, port, model_path and model_sha256): those read as
their defaults. A key of a newer kit is ignored, and so is a value of the wrong type.
"""

from __future__ import annotations

import json
import types
import typing
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

# 1: the first record that says its version (before it, none: read as 0)
RECORD_VERSION = 1


def _key(name: str) -> dict[str, str]:
    """A field whose key in deployed.json is not its name (a unit added to the name)."""
    return {"key": name}


@dataclass(frozen=True)
class DeployedService:
    """One service's deployment record."""

    service: str = ""
    # the Docker container (or compose project) name; written in native mode too
    container: str = ""
    # what the runtime knows the service by: a systemd unit, or a supervisord program
    unit: str = ""
    profile: str | None = None
    mode: str = "container"  # "container" | "native" (the first kits: container only)
    image: str = ""  # the image tag, or in native mode the server binary
    # "systemd" | "compose" in container mode, "supervisor" (PID 1 not systemd: `unit` is
    # the supervisord program), None for a native systemd unit (and in records of old kits)
    runtime: str | None = None
    log: str | None = None  # the server's log file (runtime "supervisor"; else journald)
    compose_file: str | None = None  # runtime "compose" only
    bind_address: str = ""
    port: int | None = None
    # the server's context (host data ctx_size, else the profile's): key "ctx_size"
    ctx_size_tokens: int | None = field(default=None, metadata=_key("ctx_size"))
    model_path: str = ""
    model_sha256: str | None = None
    # a file of yours served in place (model_host_path): the uninstall leaves it
    model_is_users: bool = False
    draft_path: str | None = None
    draft_sha256: str | None = None
    # RECORD_VERSION when written; 0: a record of a kit from before it was written
    version: int = 0

    def models(self) -> list[tuple[str, str | None]]:
        """(path, sha256 or None) of the model and of its draft, where it has one."""
        found = [(self.model_path, self.model_sha256)] if self.model_path else []
        return found + ([(self.draft_path, self.draft_sha256)] if self.draft_path else [])

    def to_dict(self) -> dict[str, Any]:
        """The record by its keys in deployed.json."""
        values = asdict(self)
        return {f.metadata.get("key", f.name): values[f.name] for f in fields(self)}

    def to_json(self) -> str:
        """deployed.json's text, as the deploy uploads it (keys sorted, one per line)."""
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, data: str | Mapping[str, Any]) -> DeployedService:
        """A record from deployed.json's text (or its parsed object), of any kit: a missing
        key reads as its default, an unknown key or a value of the wrong type is ignored.
        ValueError when the text is not JSON or not a JSON object."""
        if isinstance(data, str):
            data = json.loads(data)  # json.JSONDecodeError is a ValueError
        if not isinstance(data, Mapping):
            raise ValueError(f"not a JSON object but {type(data).__name__}")
        hints = typing.get_type_hints(cls)
        kept = {}
        for f in fields(cls):
            value = data.get(f.metadata.get("key", f.name), f.default)
            if _is(value, hints[f.name]):
                kept[f.name] = value
        return cls(**kept)


def _is(value: Any, hint: Any) -> bool:
    """Whether `value` is of the type `hint` (a plain type, or `X | None`); a bool is no
    int here."""
    allowed = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    if isinstance(value, bool):
        return bool in allowed
    return isinstance(value, allowed)


def read_record(text: str | None) -> DeployedService | None:
    """The record in `text` (deployed.json's content), or None when there is none or it is
    not a JSON object."""
    if not text:
        return None
    try:
        return DeployedService.from_json(text)
    except ValueError:
        return None
