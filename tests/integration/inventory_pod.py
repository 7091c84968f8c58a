"""The GPU-container sandbox host (PID 1 sshd, no systemd, no Docker: test_pod.py), alone."""

from beekeeper.sandbox import CONTAINER, inventory_host

pods = [inventory_host(f"{CONTAINER}-pod")]
