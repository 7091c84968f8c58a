"""
The local sandbox host (see `beekeeper sandbox up`), reached over SSH on 127.0.0.1 exactly
like a remote box. Deploys the CPU profile: no GPU needed.
"""

from beekeeper.sandbox import inventory_host

# its data: beekeeper.sandbox.inventory_host (SSH on 127.0.0.1, the CPU profile, the base
# images from the controller, and what `beekeeper sandbox` was told to add: the tests point
# the source at a git server at a full commit and the models at a Hub endpoint)
sandbox = [inventory_host()]
