"""verify's engine suite stops and starts the deployed server as its runtime is told to
(core/runtime.py, the Runtime its record names), reading the host's deployed.json:
systemctl for a unit, the kit's supervisorctl for a supervisord program on a host whose
PID 1 is not systemd (a GPU container). The manifests are the ones the deploy writes
(deploy.py on canned facts: the H200 pod, a native Linux box)."""

import json

import pytest

from beekeeper.core.paths import ServicePaths
from beekeeper.core.profiles import PROFILES
from beekeeper.verify.engine import EngineError, deployed_engine, read_deployed

from .harness import (
    POD_DATA,
    SYSTEMD,
    HostWithManifest,
    pod,
    written_manifest,
)


def test_a_supervisor_hosts_server_is_stopped_and_started_through_supervisorctl():
    text = written_manifest(POD_DATA, pod())
    d = json.loads(text)
    assert d["runtime"] == "supervisor" and d["log"]
    shell = HostWithManifest(text)
    dep = read_deployed(shell)
    assert dep.runtime == "supervisor" and dep.log == d["log"]
    engine = deployed_engine(shell, PROFILES["q8-turbo4-64k"])
    ctl = "/usr/local/sbin/beekeeper-supervisorctl"
    assert engine.stop == f"{ctl} stop {d['unit']}"
    assert engine.start == f"{ctl} start {d['unit']}"
    assert "systemctl" not in engine.stop + engine.start
    # where its output is, said when it does not come back: the log file, not journald
    assert engine.log_hint == f"{d['log']} (and {ctl} status {d['unit']})"
    assert engine.log_hint.startswith("/var/log/beekeeper/beekeeper-llm")
    assert "supervisor" in engine.placement


def test_a_systemd_hosts_unit_is_stopped_with_systemctl_and_its_log_is_journald():
    text = written_manifest(POD_DATA, pod(InitSystem=SYSTEMD))  # the same box, systemd PID 1
    d = json.loads(text)
    assert d["runtime"] is None and d["mode"] == "native" and d["log"] is None
    engine = deployed_engine(HostWithManifest(text), PROFILES["q8-turbo4-64k"])
    assert engine.stop == f"systemctl stop {d['unit']}" and d["unit"].endswith(".service")
    assert engine.start == f"systemctl start {d['unit']}"
    assert engine.log_hint == f"journalctl -u {d['unit']}"


def test_engine_gpu_leaves_the_program_running():
    text = written_manifest(POD_DATA, pod())
    engine = deployed_engine(HostWithManifest(text), PROFILES["q8-turbo4-64k"], "1")
    assert engine.stop is None and engine.start is None
    assert engine.prefix[:2] == ["env", "CUDA_VISIBLE_DEVICES=1"]


def test_a_record_naming_no_way_of_running_is_one_line():
    d = json.loads(written_manifest(POD_DATA, pod()))
    d["runtime"] = "compose"  # compose around a native server: no kit writes it
    with pytest.raises(EngineError) as e:
        deployed_engine(HostWithManifest(json.dumps(d)), PROFILES["q8-turbo4-64k"])
    assert str(e.value) == (
        f"{ServicePaths('llm').manifest} on the pod names mode 'native' with runtime "
        "'compose', which is no way the kit runs a server: deploy with the kit again")
