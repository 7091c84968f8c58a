"""
Two sandbox hosts and a gateway (tests/integration/test_gateway.py): the first host
(Debian 12) serves two models, the second (Debian 13) serves one of them and runs the
gateway. The test writes what each host serves to the JSON file BEEKEEPER_GATEWAY_LAYOUT
names: {"a": host data, "b": host data}.
"""

import json
import os

from beekeeper.sandbox import CONTAINER, inventory_host

_layout = json.loads(open(os.environ["BEEKEEPER_GATEWAY_LAYOUT"]).read())

backends = [inventory_host(CONTAINER, **_layout["a"])]
gateway = [inventory_host(f"{CONTAINER}-b", **_layout["b"])]
