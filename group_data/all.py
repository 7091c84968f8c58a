"""
This kit's choices for every host: what to serve and what it is built from. Host data in
inventories/ overrides them per host.

Every other key keeps the default the kit declares once, in its schema
(beekeeper/core/hostdata.py; the table of keys, defaults and checks: README, "Host data
keys", or `python -m beekeeper.core.hostdata`). Set one here to change it for every host,
e.g. `vram_budget_gib = 8` or `port = 8090`.

Every module-level name here becomes host data, and host data is checked whole: a name the
kit (or pyinfra) does not read is refused with the closest known key. Keep helpers out, or
list the exported names in __all__.
"""

# Which profile to serve (`beekeeper profiles` lists them); the seed's production config.
profile = "q8-turbo4-64k"

# beellama (llama.cpp fork with TurboQuant KV types), pinned to a commit.
source = {
    "git": "https://github.com/Anbeeld/beellama.cpp",
    "ref": "ba1fdce591f5a845cdbf6642767ecc1f8238519d",
}
