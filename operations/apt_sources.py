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


def component_command(component: str) -> str:
    """Add an archive area to each Debian source that lacks it: `Components:` of the deb822
    .sources files that name a Debian mirror, and the `deb` lines of /etc/apt/sources.list;
    then refresh apt's lists."""
    if not re.fullmatch(r"[a-z][a-z-]*", component):
        raise ValueError(f"not an archive area: {component!r}")
    add = f"/ {component}( |$)/!s/$/ {component}/"
    return (f"for f in /etc/apt/sources.list.d/*.sources; do [ -f \"$f\" ] && grep -q debian "
            f"\"$f\" && sed -i -E '/^Components:/{{{add}}}' \"$f\"; done; "
            "[ -f /etc/apt/sources.list ] && sed -i -E "
            f"'/^deb(-src)? .*debian/{{{add}}}' /etc/apt/sources.list; apt-get update -qq; "
            f"echo enabled {shlex.quote(component)}")


@operation()
def component_enabled(component: str):
    """
    Enable an archive area (Debian's `contrib`) on the host's Debian sources, as NVIDIA's
    Debian steps do (`add-apt-repository contrib`): see component_command.

    + component: the archive area
    """
    from beekeeper.facts.host import DebianComponents

    if component in host.get_fact(DebianComponents):
        host.noop(f"Debian's {component} area is enabled")
        return
    yield StringCommand(component_command(component))
