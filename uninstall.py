"""
beekeeper uninstall: return a host to what it was before the kit (tasks/uninstall.py says
what goes and how the kit knows which packages it installed).

    pyinfra inventories/home.py uninstall.py --dry                      # lists it all first
    pyinfra inventories/home.py uninstall.py
    pyinfra inventories/home.py uninstall.py --data keep_models=true    # models stay
    pyinfra inventories/home.py uninstall.py --data keep_driver=true    # the NVIDIA driver stays

Several inventory hosts on one machine: the first one uninstalls it, the others say so.
"""

from typing import Any

from pyinfra import host, state
from pyinfra.context import ctx_host

from beekeeper.core.config import host_data_keys, load_host_config
from beekeeper.core.errors import ConfigError, host_data
from beekeeper.core.machines import machine_of
from beekeeper.tasks import uninstall
from beekeeper.tasks.hostfail import on_this_host

KEEP_MODELS = "keep_models"  # read here only: keep the model files (default: removed)
# read here only: keep the NVIDIA driver the kit installed, whole (default: purged; see
# tasks/uninstall.py for why)
KEEP_DRIVER = "keep_driver"
KEEPS = {KEEP_MODELS: "the models", KEEP_DRIVER: "the NVIDIA driver"}


def keep(data: Any, key: str) -> bool:
    value = data.get(key, False)
    if not isinstance(value, bool):
        raise ConfigError(host_data(key), f"{value!r} is not True or False",
                          f"--data {key}=true to keep {KEEPS[key]}, or leave it out")
    return value


def uninstall_host() -> None:
    # bad host data stops here, with one line naming the key and the fix: nothing has run
    data = {k: host.data.get(k) for k in host_data_keys(host.data) if k not in KEEPS}
    cfg = load_host_config(data)
    models, driver = keep(host.data, KEEP_MODELS), keep(host.data, KEEP_DRIVER)
    this = ctx_host.get().name
    where = machine_of(this, host.data)
    first = next(h.name for h in state.inventory if machine_of(h.name, h.data) == where)
    if first != this:
        host.noop(f"uninstall: done by inventory host {first} (the same machine, {where})")
        return
    uninstall.ensure(cfg, models, driver)


on_this_host(uninstall_host)
