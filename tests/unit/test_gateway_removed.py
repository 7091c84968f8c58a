"""
The inventory is the truth for the gateway too: a host whose data drops `gateway` has the
gateway an earlier deploy put there removed (its unit and its folder: config and the
clients' key), unless another inventory host on the same machine still has one, or one of
them has bad data (what it wants is unknown). Before, the old gateway went on serving
(found by following docs/quickstart-ssh.md, issue 43).
"""

from __future__ import annotations

from typing import Any

from beekeeper.core.machines import gateway_kept_by_neighbours
from beekeeper.core.paths import GatewayPaths

from .harness import _backend, gateway_with as with_, run_deploy_hosts

GP = GatewayPaths()
REMOVE_UNIT = f"Remove the gateway {GP.unit_name} (host data has no `gateway`)"
REMOVE_FOLDER = f"Remove the gateway's folder {GP.conf_dir} (its config and keys)"
THERE = {GP.unit: 4, GP.conf_dir: 12}  # PresentPaths: the gateway an earlier deploy left


def present(paths: dict[str, int]) -> Any:
    """The PresentPaths fact of a host holding `paths` (of those asked for)."""
    return lambda **asked: {p: s for p, s in paths.items() if p in asked["paths"]}


def deploy(hosts: dict[str, tuple[dict, dict]]) -> dict[str, list[str]]:
    failed, ops = run_deploy_hosts(hosts)
    assert failed == set(), failed
    return ops


def test_a_gateway_the_host_data_dropped_is_removed(keys):  # noqa: F811
    data, facts = _backend(keys)
    ops = deploy({"gpu": (data, {**facts, "PresentPaths": present(THERE)})})["gpu"]
    assert REMOVE_UNIT in ops and REMOVE_FOLDER in ops, ops
    # after the services' smoke checks: what serves is settled before the old gateway goes
    assert ops.index(REMOVE_UNIT) > max(i for i, n in enumerate(ops) if "smoke" in n)


def test_nothing_is_queued_where_no_gateway_was_put(keys):  # noqa: F811
    data, facts = _backend(keys)
    ops = deploy({"gpu": (data, {**facts, "PresentPaths": present({})})})["gpu"]
    assert not any("gateway" in n.lower() for n in ops), ops


def test_a_neighbour_on_the_same_machine_keeps_its_gateway(keys):  # noqa: F811
    """Two inventory entries land on one machine (one SSH address): the one without
    `gateway` leaves the machine's gateway to the one that has it."""
    data, facts = _backend(keys)
    gw_data = with_(services=[], gateway={"api_key_file": keys["gw"]},
                    ssh_hostname="gpu.lan")
    ops = deploy({"gpu": ({**data, "ssh_hostname": "gpu.lan"},
                          {**facts, "PresentPaths": present(THERE)}),
                  "gw": (gw_data, {"DeployedServices": ["tiny"],
                                   "PresentPaths": present(THERE)})})
    assert REMOVE_UNIT not in ops["gpu"] and REMOVE_FOLDER not in ops["gpu"], ops["gpu"]
    assert any(n.startswith("Render systemd unit beekeeper-gateway") for n in ops["gw"])


def test_whether_a_neighbour_keeps_the_gateway():
    load = {"a": with_(), "b": with_(gateway={}), "bad": {"profile": 3}}
    hosts = [("a", {"ssh_hostname": "m", "d": "a"}), ("b", {"ssh_hostname": "m", "d": "b"}),
             ("c", {"ssh_hostname": "other", "d": "b"})]

    def loader(data: Any):
        from beekeeper.core.config import load_host_config
        return load_host_config(load[data["d"]])

    assert gateway_kept_by_neighbours("a", hosts, loader) is True
    # another machine's gateway does not count, nor does the host's own
    assert gateway_kept_by_neighbours("a", [hosts[0], hosts[2]], loader) is False
    assert gateway_kept_by_neighbours("b", [hosts[1]], loader) is False
    # a neighbour with bad data: unknown, nothing may be removed
    bad = ("x", {"ssh_hostname": "m", "d": "bad"})
    assert gateway_kept_by_neighbours("a", [hosts[0], bad], loader) is None
