"""Each host's data is validated once a run, however many neighbours read it (the services
kept on a shared machine, a gateway's routes): config.memoized_loader, used by deploy.py for
kept_by_neighbours and the gateway's plan."""

import pytest

from beekeeper.core import config
from beekeeper.core.errors import ConfigError
from beekeeper.core.machines import kept_by_neighbours

from .harness import with_


def test_a_hosts_data_is_validated_once_and_its_refusal_kept(monkeypatch):
    calls: list[int] = []
    real = config.load_host_config

    def counted(data):
        calls.append(id(data))
        return real(data)

    monkeypatch.setattr(config, "load_host_config", counted)
    load = config.memoized_loader()
    # five hosts on one machine (@local), each asking what the others keep
    hosts = [(f"@local/{i}", {**with_(service_name=f"s{i}", port=8100 + i)})
             for i in range(5)]
    for name, _ in hosts:
        kept = kept_by_neighbours(name, hosts, load)
        assert kept == {f"s{i}" for i in range(5)} - {f"s{name[-1]}"}
    assert len(calls) == 5  # was 20: each host's data once per neighbour
    bad = with_(port="eighty")
    for _ in range(3):
        with pytest.raises(ConfigError, match="host data `port`"):
            load(bad)
    assert len(calls) == 6
    # another object, even with equal data, is its own host: loaded afresh
    load(dict(hosts[0][1]))
    assert len(calls) == 7
    # a neighbour with bad data: what it keeps is unknown, nothing may be removed
    assert kept_by_neighbours("@local/0", [*hosts, ("@local/9", bad)], load) is None


def test_a_run_of_several_hosts_validates_each_hosts_data_once(monkeypatch):
    """pyinfra executes deploy.py afresh for each host: a loader kept in deploy.py's own
    globals lasted one host, and each host validated every neighbour again."""
    from .harness import CPU_GIT, CPU_HOST, facts, run_deploy_hosts

    calls: list[int] = []
    real = config.load_host_config

    def counted(data, pin=None):
        if pin is None:  # with `pin`: the host's own models pinned, once (deploy.py)
            calls.append(id(data))
        return real(data, pin)

    monkeypatch.setattr(config, "load_host_config", counted)
    # three inventory hosts of one machine: each asks what the other two keep
    cases = {f"llm{i}": ({**CPU_GIT, "ssh_hostname": "box", "service_name": f"s{i}",
                          "port": 8100 + i}, facts(**CPU_HOST)) for i in range(3)}
    failed, ops = run_deploy_hosts(cases)
    assert failed == set() and all(ops.values())
    assert len(calls) == len(set(calls)) == 3, calls
