"""
Several inventory hosts can land on one machine (core/machines.py: one SSH address and port,
e.g. one entry per model). A gateway on one of them reaches the services of the others on
that machine as it reaches its own host's: on the machine's loopback. It is not refused as
if they were on another box (which would need a private address with a key, or an SSH
forward to itself).
"""

from __future__ import annotations

import pytest

from beekeeper.core import gateway as gw
from beekeeper.core.errors import ConfigError
from beekeeper.facts.gpu import NvidiaSmiInfo

from .harness import DEFAULTS, NATIVE, facts, gateway_with as with_, run_deploy_hosts

TINY = {"service_name": "tiny", "profile": "cpu-tiny"}  # on 127.0.0.1:8083, no key


def _hosts(where: dict, models_where: dict | None = None, svc: dict | None = None):
    return [("gw", with_(services=[], gateway={}, **where)),
            ("models", with_(services=[svc or TINY], **(models_where or where)))]


def test_a_loopback_service_of_another_entry_on_the_gateways_machine_is_reached_there():
    plan = gw.plan("gw", _hosts({"ssh_hostname": "box.lan"}))
    assert [(u.server_name, u.haproxy_address) for u in plan.routes[0].upstreams] == [
        ("models.tiny", "127.0.0.1:8083")]


def test_a_forwarded_machine_on_the_controllers_loopback_is_one_machine(keys):
    """A pod or sandbox reached at 127.0.0.1:2222: its wildcard-bound service is on the
    gateway's own box, not on the controller's loopback."""
    svc = {**TINY, "bind_address": "0.0.0.0", "api_key_file": keys["be"]}
    where = {"ssh_hostname": "127.0.0.1", "ssh_port": 2222}
    plan = gw.plan("gw", _hosts(where, svc=svc))
    assert plan.routes[0].upstreams[0].haproxy_address == "127.0.0.1:8083"


def test_another_machine_is_still_refused():
    with pytest.raises(ConfigError, match="listens on 127.0.0.1 only"):
        gw.plan("gw", _hosts({"ssh_hostname": "box.lan"}, {"ssh_hostname": "other.lan"}))
    with pytest.raises(ConfigError, match="listens on 127.0.0.1 only"):  # another SSH port
        gw.plan("gw", _hosts({"ssh_hostname": "box.lan"},
                             {"ssh_hostname": "box.lan", "ssh_port": 2222}))


def test_the_deploy_of_both_entries_queues_the_gateway():
    where = {"ssh_hostname": "box.lan"}
    host_facts = facts(Wsl=NATIVE, GpuInfo=NvidiaSmiInfo(path="/usr/bin/nvidia-smi"))
    failed, ops = run_deploy_hosts({
        "gw": (with_(services=[], gateway={}, **where), {"DeployedServices": []}),
        "models": ({**DEFAULTS, "services": [TINY], **where}, host_facts)})
    assert failed == set()
    assert "Start and enable beekeeper-gateway.service (reload: config changed)" in ops["gw"]
