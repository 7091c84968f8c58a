"""A model file of yours served in place (host data `model_host_path`) that you replace on
the host after a deploy (a new fine-tune written to the same path), with host data's
`model_sha256` changed to the new file's: the next deploy checks the new file, records its
sha256, and must restart the server, which still holds the old weights. The unit renders the
same (the path is the same) and nothing is placed, so only the sha256 tells."""

from __future__ import annotations

import hashlib
import json

from .harness import CPU_GIT, CPU_HOST, facts, run_deploy, uploaded

UNIT = "/etc/systemd/system/beekeeper-llm.service"
MANIFEST = "/etc/beekeeper/llm/deployed.json"
START = "Start and enable beekeeper-llm.service"
MINE = "/srv/beekeeper/models/my-finetune-Q8_0.gguf"
OLD, NEW = "a" * 64, "b" * 64


def _sha1(text: str) -> str:
    return hashlib.sha1(text.encode(), usedforsecurity=False).hexdigest()


def _host(on_disk: str, **over):
    return facts(**CPU_HOST, FileHead=b"GGUF\x03\x00\x00\x00",
                 File=lambda path=None, **_: {"size": 1} if path == MINE else None,
                 ModelTarget=lambda path=None, **_: path,
                 Sha256File=lambda path=None, **_: on_disk if path == MINE else None, **over)


def _again(sha: str, unit_sha: str, record: str) -> dict[str, list[str]]:
    """The next run with model_sha256 `sha`, the file on the host now that one; the unit
    and record the first run wrote are there, the service running and healthy."""
    return dict(run_deploy({**CPU_GIT, "model_host_path": MINE, "model_sha256": sha},
                           _host(sha, **_running(unit_sha, record))))


def _running(unit_sha: str, record: str) -> dict:
    """The facts of a host where the first run's unit and record are, the service running
    and healthy."""
    return dict(DeployedServices=["llm"],
                Sha1File=lambda path: unit_sha if path == UNIT else None,
                FileContents=lambda path: record.splitlines() if path == MANIFEST else None,
                Directory=lambda path: {"mode": 755, "user": "root", "group": "root"}
                if path == "/srv/beekeeper/models" else None,
                SystemdStatus={"beekeeper-llm.service": True},
                SystemdEnabled={"beekeeper-llm.service": True},
                ServerSmoke={"ok": True, "completion_tokens": 4})


def _first() -> tuple[str, str]:
    first = run_deploy({**CPU_GIT, "model_host_path": MINE, "model_sha256": OLD}, _host(OLD))
    unit_sha = _sha1(uploaded(first, "Render systemd unit"))
    record = uploaded(first, "Record what beekeeper-llm.service runs")
    assert json.loads(record)["model_sha256"] == OLD
    return unit_sha, record


def test_the_same_file_of_yours_on_a_second_run_changes_nothing():
    ops = _again(OLD, *_first())
    start = next(cmds for name, cmds in ops.items() if name.startswith(START))
    assert "systemctl restart beekeeper-llm.service" not in start, start


def test_a_file_of_yours_replaced_on_the_host_restarts_the_server():
    ops = _again(NEW, *_first())
    record = json.loads(uploaded(list(ops.items()), "Record what beekeeper-llm.service"))
    assert record["model_sha256"] == NEW  # the record says the new file is served ...
    start = next(cmds for name, cmds in ops.items() if name.startswith(START))
    # ... so the server must load it
    assert "systemctl restart beekeeper-llm.service" in start, (list(ops), start)
    smoke = ops["Wait for /health on port 8083 and smoke-check the API"]
    assert smoke and "--restore" in smoke[0], smoke


def test_model_sha256_added_for_the_same_uploaded_file_restarts_nothing(tmp_path):
    """A file of yours on the controller (model_path) deployed without model_sha256 (the
    upload checks it by its own sha256, the record names none), then with model_sha256 set
    to that same file's: the same file, the same unit, so no restart."""
    mine = tmp_path / "mine-Q8_0.gguf"
    mine.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\x00" * 64)
    sha = hashlib.sha256(mine.read_bytes()).hexdigest()
    dest = "/srv/beekeeper/models/mine-Q8_0.gguf"

    def host(**over):
        return facts(**CPU_HOST, FileHead=b"GGUF\x03\x00\x00\x00",
                     Sha256File=lambda path=None, **_: sha if path == dest else None, **over)

    first = run_deploy({**CPU_GIT, "model_path": str(mine)}, host())
    unit_sha = _sha1(uploaded(first, "Render systemd unit"))
    record = uploaded(first, "Record what beekeeper-llm.service runs")
    assert json.loads(record)["model_sha256"] is None
    ops = dict(run_deploy({**CPU_GIT, "model_path": str(mine), "model_sha256": sha},
                          host(**_running(unit_sha, record))))
    start = next(cmds for name, cmds in ops.items() if name.startswith(START))
    assert "systemctl restart beekeeper-llm.service" not in start, start
