"""The second sandbox host (Debian 13, conftest's trixie_sandbox), alone."""

from beekeeper.sandbox import CONTAINER, inventory_host

trixie = [inventory_host(f"{CONTAINER}-b")]
