"""A deploy cut short after it wrote a service's new unit and before it wrote the record
beside it (deployed.json) and restarted the service: an SSH connection lost, Ctrl-C, a
failed upload. The unit on the host is already the one the next run renders, so comparing
the unit alone finds nothing to change, and the old server would go on serving under a
record that says it runs the new one. The record left behind tells: it still names what
the old unit ran."""

from __future__ import annotations

import hashlib
import json

from beekeeper.core.config import load_host_config
from beekeeper.core.deployed import REQUIRED

from .harness import CPU, CPU_GIT, CPU_HOST, facts, run_deploy, uploaded

UNIT = "/etc/systemd/system/beekeeper-llm.service"
MANIFEST = "/etc/beekeeper/llm/deployed.json"
START = "Start and enable beekeeper-llm.service"


def _sha1(text: str) -> str:
    return hashlib.sha1(text.encode(), usedforsecurity=False).hexdigest()


def _again(unit_sha: str, manifest: str, smoke: dict | None = None,
           on_disk: str | None = None) -> list[tuple[str, list[str]]]:
    """The next run, on the host the cut-short one left: the new unit and `manifest`, the
    model in place, the service running (the old server, healthy unless `smoke` says)."""
    sha = load_host_config(CPU).service.model.sha256
    return run_deploy(CPU_GIT, facts(
        **CPU_HOST, DeployedServices=["llm"],
        Sha1File=lambda path: unit_sha if path == UNIT else None,
        File=lambda path: {"mode": 644, "size": 1} if path == UNIT else None,
        FileContents=lambda path: manifest.splitlines() if path == MANIFEST else None,
        Sha256File=lambda path, stamps: (on_disk or sha) if path.endswith(".gguf") else None,
        Directory=lambda path: {"mode": 755, "user": "root", "group": "root"}
        if path in ("/srv/beekeeper/models", "/etc/systemd/system") else None,
        SystemdStatus={"beekeeper-llm.service": True},
        SystemdEnabled={"beekeeper-llm.service": True},
        ServerSmoke=smoke or {"ok": True, "completion_tokens": 4}))


def test_a_unit_written_without_its_record_is_started_on_the_next_run():
    first = run_deploy(CPU_GIT, facts(**CPU_HOST))
    unit_sha = _sha1(uploaded(first, "Render systemd unit"))
    record = uploaded(first, "Record what beekeeper-llm.service runs")
    # the run was cut short before the record: it still names the image the old unit ran
    old = {**json.loads(record), "image": "beekeeper/llama-server:older-build"}
    assert set(REQUIRED) <= set(old)
    ops = dict(_again(unit_sha, json.dumps(old, indent=2, sort_keys=True) + "\n"))
    start = next(cmds for name, cmds in ops.items() if name.startswith(START))
    # systemd still holds the unit before the cut-short run's: read again, then restarted
    assert start.index("systemctl daemon-reload") < start.index(
        "systemctl restart beekeeper-llm.service"), start
    smoke = ops["Wait for /health on port 8083 and smoke-check the API"]
    assert smoke and "--restore" in smoke[0]  # checked, and rolled back if it fails
    # the `.prev` the cut-short run kept is what runs: not replaced by the new unit
    assert not any(name.startswith("Keep the running beekeeper-llm.service") for name in ops)


def test_a_second_run_after_a_whole_deploy_still_changes_nothing():
    first = run_deploy(CPU_GIT, facts(**CPU_HOST))
    unit_sha = _sha1(uploaded(first, "Render systemd unit"))
    record = uploaded(first, "Record what beekeeper-llm.service runs")
    ops = _again(unit_sha, record)
    assert not any("(restart: inputs changed)" in n for n, _ in ops)
    start = next(cmds for name, cmds in ops if name.startswith(START))
    assert "systemctl restart beekeeper-llm.service" not in start
    assert dict(ops)["Wait for /health on port 8083 and smoke-check the API"] == []


def test_a_server_this_run_leaves_unchanged_and_unhealthy_fails_the_run_without_a_rollback():
    """Nothing changed, and the server does not answer (it crashed, or is still loading after
    a reboot): the gate waits for it and fails the run, but does not put the previous unit
    back, which is not what host data asks for (a second run would change the service)."""
    first = run_deploy(CPU_GIT, facts(**CPU_HOST))
    unit_sha = _sha1(uploaded(first, "Render systemd unit"))
    record = uploaded(first, "Record what beekeeper-llm.service runs")
    ops = dict(_again(unit_sha, record, smoke={"ok": False, "error": "connection refused"}))
    smoke = ops["Wait for /health on port 8083 and smoke-check the API"]
    assert len(smoke) == 1 and "hostcheck.py" in smoke[0], smoke
    assert "--restore" not in smoke[0] and "rollback.py" not in smoke[0], smoke[0]
    assert "which this deploy did not change" in smoke[0] and "exit 1" in smoke[0]


def test_a_model_replaced_in_place_keeps_the_running_unit_for_rollback():
    """The unit renders the same and the record's model sha256 differs because the model
    file changes (a new file at the same path): that is a change of this run, not a run cut
    short, so the unit running now is kept as `.prev` before the restart, as for any change."""
    first = run_deploy(CPU_GIT, facts(**CPU_HOST))
    unit_sha = _sha1(uploaded(first, "Render systemd unit"))
    record = json.loads(uploaded(first, "Record what beekeeper-llm.service runs"))
    old = {**record, "model_sha256": "e" * 64}  # what the last deploy served
    ops = dict(_again(unit_sha, json.dumps(old, indent=2, sort_keys=True) + "\n",
                      on_disk="e" * 64))
    assert any(name.startswith("Keep the running beekeeper-llm.service") for name in ops), \
        list(ops)
    start = next(cmds for name, cmds in ops.items() if name.startswith(START))
    assert "systemctl restart beekeeper-llm.service" in start, start
