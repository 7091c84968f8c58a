"""
apt source operations beyond pyinfra's: an archive area enabled on the Debian sources.
"""

from __future__ import annotations

import shlex

from pyinfra import host
from pyinfra.api import StringCommand, operation

from beekeeper.core.distro import apt_free
from beekeeper.facts.host import DebianComponents
from beekeeper.facts.lifecycle import component_mark


def component_command(component: str) -> str:
    """Add an archive area to each Debian source that lacks it (deb822 `Components:`,
    sources.list `deb` lines), with the kit's record line (COMPONENT_MARK) in each file it
    changes; then refresh apt's lists. A second run changes nothing."""
    mark = shlex.quote(component_mark(component))  # checks the name: it reaches sed unquoted
    add = f"/ {component}( |$)/!s/$/ {component}/"

    def edit(lines: str, file: str) -> str:
        lacks = f"grep -E '{lines}' {file} | grep -qvE ' {component}( |$)'"
        return (f"[ -f {file} ] && {lacks} && sed -i -E '/{lines}/{{{add}}}' {file} && "
                f"echo {mark} >> {file}")

    each = edit("^Components:", '"$f"')
    listed = edit("^deb(-src)? .*debian", "/etc/apt/sources.list")
    return (f"for f in /etc/apt/sources.list.d/*.sources; do grep -qs debian \"$f\" && "
            f"{each}; done; {listed}; {apt_free('apt-get update -qq')}; "
            f"echo enabled {shlex.quote(component)}")


@operation()
def component_enabled(component: str):
    """
    Enable an archive area (Debian's `contrib`) on the host's Debian sources, as NVIDIA's
    Debian steps do (`add-apt-repository contrib`): see component_command.
    """
    if component in host.get_fact(DebianComponents):
        host.noop(f"Debian's {component} area is enabled")
        return
    yield StringCommand(component_command(component))
