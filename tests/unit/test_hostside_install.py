"""Where a deploy installs the host-side scripts (tasks/smoke.install): their folder once,
each script by its own operation, named for its own host under pyinfra's command line."""

from __future__ import annotations

from unittest import mock

import pyinfra
import pytest
from pyinfra.api import Config, Inventory, State
from pyinfra.api.state import StateStage
from pyinfra.context import ctx_host, ctx_state

from beekeeper.core.config import load_host_config
from beekeeper.core.paths import HOSTSIDE_DIR
from beekeeper.tasks import smoke

from .harness import CPU_GIT, CPU_HOST, DEFAULTS, facts, run_deploy

HUB = {"model_repo": "o/r", "model_file": "m.gguf", "model_revision": "a" * 40,
       "model_sha256": "b" * 64}
SCRIPTS = ("Upload the model downloader", "Install the host-side smoke check",
           "Install the host-side rollback")


def test_two_hosts_under_pyinfras_command_line_get_each_upload_under_its_own_name(monkeypatch):
    """pyinfra's CLI names an operation by where it is called: one call in a loop over a
    list that differs per host (a Hub model on one host, none on the other) gave the two
    hosts' different uploads one merged name ("Install the host-side smoke check, Upload the
    model downloader")."""
    monkeypatch.setattr(pyinfra, "is_cli", True)
    cfgs = {"hub": load_host_config({**DEFAULTS, **CPU_GIT, **HUB}),
            "plain": load_host_config({**DEFAULTS, **CPU_GIT})}
    inventory = Inventory(([(name, {}) for name in cfgs], {}))
    state = State(inventory, Config())
    state.current_op_file_number = 0
    state.set_stage(StateStage.Prepare)
    with ctx_state.use(state):
        for name, cfg in cfgs.items():
            h = inventory.get_host(name)
            h.connected = True
            with ctx_host.use(h), mock.patch.object(h, "get_fact", return_value={}):
                smoke.install(cfg)
    ops = {next(iter(state.get_op_meta(op).names)): {h.name for h in inventory
                                                     if op in state.ops.get(h, {})}
           for op in state.get_op_order()}
    assert all(len(state.get_op_meta(op).names) == 1 for op in state.get_op_order()), ops
    assert ops == {f"Create {HOSTSIDE_DIR}": {"hub", "plain"},
                   "Upload the model downloader": {"hub"},
                   "Install the host-side smoke check": {"hub", "plain"},
                   "Install the host-side rollback": {"hub", "plain"}}


@pytest.mark.parametrize("more, stages, expected", [
    (HUB, None, SCRIPTS),
    ({}, None, SCRIPTS[1:]),
    (HUB, ["provision", "build", "model"], SCRIPTS[:1]),
    ({}, ["provision", "build", "model"], ()),
])
def test_the_scripts_a_deploy_needs_come_first_in_the_model_stage_in_one_folder(
        more, stages, expected):
    """The downloader for a Hub model, the smoke check and rollback where the service stage
    runs; their folder created once, before them, and all before the model's folder."""
    data = {**DEFAULTS, **CPU_GIT, **more, **({"stages": stages} if stages else {})}
    names = [n for n, _ in run_deploy(data, facts(**CPU_HOST))]
    folder = f"Create {HOSTSIDE_DIR}"
    assert [n for n in names if n in SCRIPTS] == list(expected)
    assert names.count(folder) == (1 if expected else 0)
    if expected:
        first = names.index(folder)
        model_folder = next(i for i, n in enumerate(names) if n.startswith("Create the model"))
        assert names[first + 1:first + 1 + len(expected)] == list(expected)
        assert first + len(expected) < model_folder
