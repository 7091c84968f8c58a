"""
apt operations beyond pyinfra's: packages installed once apt is free, package holds, and
which packages are missing.
"""

from __future__ import annotations

from pyinfra import host
from pyinfra.api import operation
from pyinfra.facts.deb import DebPackages
from pyinfra.operations import apt

from beekeeper.core.distro import apt_wait
from beekeeper.core.paths import HOLDS_RECORD
from beekeeper.facts.host import AptHolds

from .shell import StreamedCommand, q


@operation()
def packages(packages: list[str], update: bool = False, cache_time: int | None = None,
             no_recommends: bool = False):
    """
    pyinfra's apt.packages, run only once no other process holds apt's or dpkg's locks
    (distro.apt_wait: unattended-upgrades on a freshly booted box; its lines reach the
    terminal). Nothing to do: nothing run, not even the wait. The install line stays as
    pyinfra writes it: the uninstall knows the kit's packages by that line in apt's history
    (facts/lifecycle.py PYINFRA_INSTALL).
    """
    commands = list(apt.packages._inner(
        packages=packages, update=update, cache_time=cache_time, no_recommends=no_recommends))
    if commands:
        yield StreamedCommand(apt_wait())
        yield from commands


@operation()
def held(packages: list[str]):
    """
    Hold packages at their installed version (apt-mark hold), unless already held, and
    record the holds it set (the uninstall releases them).
    """
    missing = [p for p in packages if p not in host.get_fact(AptHolds)]
    if not missing:
        host.noop(f"{', '.join(packages)} already held")
        return
    names = " ".join(q(p) for p in missing)
    yield StreamedCommand(apt_wait())
    yield (f"apt-mark hold {names} && mkdir -p {q(HOLDS_RECORD.rsplit('/', 1)[0])} && "
           f"printf '%s\\n' {names} >> {q(HOLDS_RECORD)}")

def missing_packages(specs: list[str]) -> list[str]:
    """Of `name` or `name=version` specs, those not installed (at that version)."""

    installed = host.get_fact(DebPackages) or {}
    out = []
    for spec in specs:
        name, _, version = spec.partition("=")
        if name not in installed or (version and version not in installed[name]):
            out.append(spec)
    return out
