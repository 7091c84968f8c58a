"""The lifecycle test's own sandbox host (tests/integration/test_lifecycle.py), alone."""

from beekeeper.sandbox import CONTAINER, inventory_host

life = [inventory_host(f"{CONTAINER}-life")]
