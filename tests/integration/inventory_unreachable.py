"""Test inventory: the sandbox host plus one that cannot be reached."""

import runpy
from pathlib import Path

_sandbox = runpy.run_path(str(Path(__file__).resolve().parents[2] / "inventories" /
                              "sandbox.py"))["sandbox"]

hosts = [*_sandbox, ("unreachable", {**_sandbox[0][1], "ssh_port": 1,
                                     "ssh_connect_timeout": 3})]
