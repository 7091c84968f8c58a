"""
apt source operations beyond pyinfra's: use a source the host already has.
"""

from __future__ import annotations

import re
import shlex

from pyinfra import host
from pyinfra.api import StringCommand, operation


@operation()
def source_reused(path: str, signed_by: str | None):
    """
    Use an apt source for the repository that the host already has.

    + path: the source file found
    + signed_by: the keyring it names
    """
    host.noop(f"{path} already provides this repository (signed by {signed_by or 'apt'})")
    return
    yield  # an operation is a generator


@operation()
def component_enabled(component: str):
    """
    Enable an archive area (Debian's `contrib`) on the host's Debian sources, as NVIDIA's
    Debian steps do (`add-apt-repository contrib`): the area is added to each Debian source
    that lacks it, in /etc/apt/sources.list and the deb822 .sources files; the apt lists are
    refreshed by the next install.

    + component: the archive area
    """
    from beekeeper.facts.host import DebianComponents

    if not re.fullmatch(r"[a-z][a-z-]*", component):
        raise ValueError(f"not an archive area: {component!r}")
    if component in host.get_fact(DebianComponents):
        host.noop(f"Debian's {component} area is enabled")
        return
    c = shlex.quote(component)
    yield StringCommand(
        f"for f in /etc/apt/sources.list.d/*.sources; do [ -f \"$f\" ] && grep -q "
        f"'debian' \"$f\" && sed -i -E '/^Components:/{{/ {component}( |$)/!s/$/ {component}/}}' "
        f"\"$f\"; done; [ -f /etc/apt/sources.list ] && sed -i -E "
        f"'/^deb(-src)? .*debian/{{/ {component}( |$)/!s/$/ {component}/}}' /etc/apt/sources.list;"
        f" apt-get update -qq; echo enabled {c}")
