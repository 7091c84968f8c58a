"""The lifecycle test's own sandbox host (tests/integration/test_lifecycle.py), alone."""

from beekeeper.sandbox import inventory_host

life = [inventory_host("beekeeper-lifecycle")]
