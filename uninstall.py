"""
beekeeper uninstall: return a host to what it was before the kit (docs/lifecycle.md,
"Uninstall"). Several inventory hosts on one machine: the first one uninstalls it.
"""

from typing import Any

from pyinfra import host, state
from pyinfra.context import ctx_host

from beekeeper.core.config import load_host_config
from beekeeper.core.errors import ConfigError, host_data
from beekeeper.core.machines import machine_of
from beekeeper.tasks import uninstall
from beekeeper.tasks.hostfail import on_this_host

# the uninstall's own keys, read here only (default False: removed)
KEEPS = {"keep_models": "the models", "keep_driver": "the NVIDIA driver"}


def keep(data: Any, key: str) -> bool:
    value = data.get(key, False)
    if not isinstance(value, bool):
        raise ConfigError(host_data(key), f"{value!r} is not True or False",
                          f"--data {key}=true to keep {KEEPS[key]}, or leave it out")
    return value


def uninstall_host() -> None:
    # bad host data stops here, with one line naming the key and the fix: nothing has run
    cfg = load_host_config(host.data, own=frozenset(KEEPS))
    models, driver = keep(host.data, "keep_models"), keep(host.data, "keep_driver")
    this = ctx_host.get().name
    where = machine_of(this, host.data)
    first = next(h.name for h in state.inventory if machine_of(h.name, h.data) == where)
    if first != this:
        host.noop(f"uninstall: done by inventory host {first} (the same machine, {where})")
        return
    uninstall.ensure(cfg, models, driver)


on_this_host(uninstall_host)
