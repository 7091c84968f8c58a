"""
Facts about what the kit has deployed on a host: its model services.
"""

from __future__ import annotations

from pyinfra import host
from pyinfra.facts.files import FileContents

from beekeeper.core.deployed import DeployedService, read_record
from beekeeper.core.hostdata import SERVICE_NAME, full
from beekeeper.core.paths import ServicePaths, manifest_glob, prev

from . import ListFact


class DeployedServices(ListFact[str]):
    """Names of the model services a deploy of the kit left on the host: each has its
    manifest (ServicePaths.manifest, written with its unit)."""

    def command(self) -> str:
        return (f'for f in {manifest_glob()}; do '
                '[ -f "$f" ] && basename "$(dirname "$f")"; done; true')

    def process(self, output: list[str]) -> list[str]:
        return sorted({line.strip() for line in output if full(SERVICE_NAME, line.strip())})


def deployed_manifest(path: str) -> DeployedService | None:
    """A deployed service's record (ServicePaths.manifest, or its `.prev`) as the kit wrote
    it, of any kit; None when it is missing or cannot be read."""
    text = host.get_fact(FileContents, path=path)
    return read_record("\n".join(text)) if text else None


def deployed_records(service: str) -> list[DeployedService]:
    """The service's records that can be read: the running unit's, then the previous one's."""
    manifest = ServicePaths(service).manifest
    return [r for r in (deployed_manifest(manifest), deployed_manifest(prev(manifest))) if r]
