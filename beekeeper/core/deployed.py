"""
The deployment record (/etc/beekeeper/<name>/deployed.json): written by tasks/service.py,
read by attribute everywhere else. Standard library only, Python 3.8 or later: verify's kit
ships beekeeper/core to the host, and the host-side rollback carries this module written in
(hostside.text). A key added since the first kit, missing, reads as its default
(what it meant then); a key of a newer kit is ignored.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

# 1: the first record that says its version (before it, none: read as 0); 2: `api_key`
RECORD_VERSION = 2

# The keys of every record the kit has written (the first kit's, tasks/service.py at 58006fc);
# a record without one was not written by the kit, or was cut short.
REQUIRED = frozenset({"service", "container", "unit", "profile", "mode", "image",
                      "bind_address", "port", "model_path", "model_sha256"})

# what each refusal says to do: the deploy writes the record whole
FIX = "redeploy the service with the kit (pyinfra INVENTORY deploy.py) to rewrite it"


class RecordError(ValueError):
    """A deployment record refused. `str()` is one line: the record (`source`), what is wrong
    with it, the fix. `key` names the key (None: the text is not a JSON object, `detail`
    says why)."""

    def __init__(self, source: str, problem: str, key: str | None = None, detail: str = ""):
        self.source, self.problem, self.key, self.detail = source, problem, key, detail
        super().__init__(f"{source}: {problem}: {FIX}")


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
    # the server's context (host data ctx_size, else the profile's); metadata "key": its key
    # in deployed.json where that is not the field's name (a unit added to the name)
    ctx_size_tokens: int | None = field(default=None, metadata={"key": "ctx_size"})
    # the server's request slots, llama-server's -np (host data slots, else the profile's);
    # None in records of kits before it was written: the profile's
    slots: int | None = None
    model_path: str = ""
    model_sha256: str | None = None
    # a file of yours served in place (model_host_path): the uninstall leaves it
    model_is_users: bool = False
    draft_path: str | None = None
    draft_sha256: str | None = None
    # whether the server takes the API key the deploy keeps beside this record
    # (ServicePaths.api_key); False in records before version 2, which did not say
    api_key: bool = False
    # the host's VRAM budget (host data vram_budget_gib) verify judges by; None in records
    # of kits before it was written: verify's default
    vram_budget_gib: float | None = None
    # RECORD_VERSION when written; 0: a record of a kit from before it was written
    version: int = 0

    @staticmethod
    def reached_at(bind_address: str) -> str:
        """Where the host itself reaches a listener of the kit's (a server, the gateway) on
        `bind_address`: that address where it listens on one address only, else 127.0.0.1 (a
        wildcard bind, 0.0.0.0 or ::; an old record's ""; host data refuses anything else
        that is not an address). Each listener on :: takes IPv4 too (llama-server's HTTP
        library turns IPV6_V6ONLY off, the gateway binds with HAProxy's `v4v6`, a container's
        port is published on every address: container.published_on), and 127.0.0.1 is there
        where ::1 is not (IPv6 off on loopback, as in Docker's containers)."""
        import ipaddress

        try:
            wildcard = ipaddress.ip_address(bind_address).is_unspecified
        except ValueError:
            return "127.0.0.1"
        return "127.0.0.1" if wildcard else bind_address

    @staticmethod
    def hostcheck_host(bind_address: str) -> list[str]:
        """hostcheck.py's `--host` for a server listening on `bind_address` (reached_at): none
        where that is 127.0.0.1, hostcheck's default, so those command lines stay as an older
        kit's hostcheck.py, which takes no --host, is asked."""
        at = DeployedService.reached_at(bind_address)
        return [] if at == "127.0.0.1" else ["--host", at]

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
    def from_json(cls, data: str | Mapping[str, Any],
                  source: str = "deployed.json") -> DeployedService:
        """A record from deployed.json's text (or its parsed object); RecordError (`source`
        naming it) for no JSON object, a key of REQUIRED missing, or a value mistyped."""
        if isinstance(data, str):
            try:
                data = json.loads(data)
            except ValueError as e:  # json.JSONDecodeError
                raise RecordError(source, f"is not JSON ({e})", detail=str(e)) from None
        if not isinstance(data, Mapping):
            why = f"not a JSON object but {type(data).__name__}"
            raise RecordError(source, f"is {why}", detail=why)
        kept = {}
        for f in fields(cls):
            key = f.metadata.get("key", f.name)
            if key not in data:
                if key in REQUIRED:
                    raise RecordError(source, f"has no key {key!r} (not a record the kit "
                                      "wrote, or one cut short)", key)
                continue
            value = data[key]
            if not _is(value, f.type):
                raise RecordError(source, f"key {key!r} is {json.dumps(value)[:60]}, not "
                                  f"{_type_name(f.type)}", key)
            kept[f.name] = value
        return cls(**kept)

    @classmethod
    def load(cls, path: str) -> DeployedService:
        """The record in the file `path` on this machine (OSError when it cannot be read,
        RecordError naming `path` when it is refused)."""
        with open(path, encoding="utf-8") as f:
            return cls.from_json(f.read(), source=path)


_TYPES = {"str": str, "int": int, "float": float, "bool": bool, "None": type(None)}


def _allowed(hint: Any) -> tuple[Any, ...]:
    """The types of a field's annotation, as this module's `from __future__` line leaves it:
    its text, `int` or `str | None` (read so, not by typing.get_type_hints, which cannot
    evaluate `X | None` before Python 3.10: the host-side rollback runs on 3.8 too)."""
    return tuple(_TYPES[name.strip()] for name in str(hint).split("|"))


def _is(value: Any, hint: Any) -> bool:
    """Whether `value` is of the type `hint`; a bool is no int here, a whole number is a
    float (JSON has one number)."""
    allowed = _allowed(hint)
    if isinstance(value, bool):
        return bool in allowed
    return isinstance(value, allowed) or (float in allowed and isinstance(value, int))


_JSON_NAMES = {str: "a string", int: "a whole number", float: "a number",
               bool: "true or false", type(None): "null"}


def _type_name(hint: Any) -> str:
    """`hint` in deployed.json's words: "a whole number or null"."""
    return " or ".join(_JSON_NAMES[t] for t in _allowed(hint))


def read_record(text: str | None) -> DeployedService | None:
    """The record in `text` (deployed.json's content), or None when there is none or it is
    refused (RecordError: not a JSON object, a key missing or mistyped)."""
    if not text:
        return None
    try:
        return DeployedService.from_json(text)
    except RecordError:
        return None
