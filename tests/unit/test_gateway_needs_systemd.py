"""
The gateway is HAProxy under its own systemd unit: a host whose PID 1 is not systemd (a GPU
pod, WSL2 without systemd) is refused in one line naming `gateway`, before any change, on a
gateway-only host (`services = []`) as on one with services; a host whose PID 1 is systemd
runs it, whatever runs its model servers (runtime = 'supervisor' included).
"""

from __future__ import annotations

from beekeeper.facts.gpu import NvidiaSmiInfo

from .harness import (
    DEFAULTS,
    NATIVE,
    PROCESS_API,
    _backend,
    facts,
    gateway_with as with_,
    run_deploy_hosts_stdin,
)

REFUSAL = "host data `gateway`: the gateway runs HAProxy as a systemd unit, and PID 1 here is"


def test_a_gateway_only_host_without_systemd_is_refused_before_any_change(keys, capsys):
    failed, ops = run_deploy_hosts_stdin({
        "gw": (with_(services=[], gateway={}),
               {"DeployedServices": [], "InitSystem": PROCESS_API}),
        "gpu": _backend(keys)})
    names = [n for n, _, _ in ops["gw"]]
    # before: HAProxy installed, its config and unit written, then systemctl failing
    assert "Install HAProxy from the distro" not in names, names
    assert failed == {"gw"}
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("host gw: ")]
    assert len(lines) == 1 and REFUSAL in lines[0] and "'process_api'" in lines[0], lines


def test_a_systemd_host_whose_servers_run_under_supervisord_runs_the_gateway(keys, capsys):
    """runtime = 'supervisor' on a host whose PID 1 is systemd: the gateway's unit runs there
    (before: refused with 'PID 1 here is 'systemd'; fix: give `gateway` to an inventory host
    with systemd')."""
    data = {**DEFAULTS, "services": [{"service_name": "tiny", "profile": "cpu-tiny"}],
            "gateway": {}, "runtime": "supervisor", "mode": "native"}
    failed, ops = run_deploy_hosts_stdin({
        "gw": (data, facts(Wsl=NATIVE, GpuInfo=NvidiaSmiInfo(path="/usr/bin/nvidia-smi"))),
        "gpu": _backend(keys)})
    err = capsys.readouterr().err
    assert "PID 1 here is 'systemd'" not in err, err
    assert failed == set(), err
    assert "Render systemd unit beekeeper-gateway.service" in [n for n, _, _ in ops["gw"]]
