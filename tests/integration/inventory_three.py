"""Test inventory (issue 12): three hosts over the one sandbox host. `good` is the sandbox
as deployed, `good-llm2` deploys a second service on port 8085, `bad` has a misspelled key
and must fail alone, named, while the other two deploy. With BEEKEEPER_TEST_GOOD_ONLY set,
only the two good ones: two inventory hosts on one machine, each keeping the other's
service."""

import os
import runpy
from pathlib import Path

_sandbox = runpy.run_path(str(Path(__file__).resolve().parents[2] / "inventories" /
                              "sandbox.py"))["sandbox"]
_data = _sandbox[0][1]

hosts = [
    ("good", dict(_data)),
    ("bad", {**_data, "prot": 8086}),
    ("good-llm2", {**_data, "service_name": "llm2", "port": 8085}),
]
if os.environ.get("BEEKEEPER_TEST_GOOD_ONLY"):
    hosts = [h for h in hosts if h[0] != "bad"]
