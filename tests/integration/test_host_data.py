"""
Host data on the sandbox host (issue 12): hostile path values deploy correctly or are
refused before any change, a port another container publishes is refused in preflight
naming it, the rollback says which server serves, one bad host of three fails alone.
"""

import json
import re
import shlex
import time

import pytest

from beekeeper.sandbox import BASE

from .helpers import deploy, grand_total, healthy, pyinfra, sandbox_exec

pytestmark = pytest.mark.integration

UNIT = "/etc/systemd/system/beekeeper-llm.service"
MANIFEST = "/etc/beekeeper/llm/deployed.json"
HOSTILE_DIR = "/srv/bee keeper/mod'els $HOME %h"


def fingerprint() -> str:
    """What a refused deploy must leave as it was: the unit's and manifest's mtime and
    content hash, and the model folders."""
    return sandbox_exec(f"stat -c '%n %Y' {UNIT} {MANIFEST}; sha1sum {UNIT} {MANIFEST}; "
                        "ls -la /srv /srv/beekeeper/models").stdout


@pytest.fixture(scope="module")
def deployed(fresh_sandbox):
    t0 = time.monotonic()
    run = deploy()
    print(f"\n[figure] first deploy into the fresh sandbox: {time.monotonic() - t0:.0f} s")
    assert run.rc == 0, run.out[-3000:]
    assert healthy()
    if grand_total(run.out)[1] != "-":  # it changed the service: the end says what serves
        assert "beekeeper: serving cpu-tiny on 127.0.0.1:8083" in run.out, run.out[-3000:]


def test_hostile_model_dir_deploys_and_the_container_mounts_it(deployed):
    run = deploy("--data", f"model_dir={HOSTILE_DIR}", "--data", "health_timeout_s=60")
    try:
        assert run.rc == 0, run.out[-3000:]
        assert healthy()
        assert "beekeeper: serving cpu-tiny on 127.0.0.1:8083" in run.out, run.out[-3000:]
        model = f"{HOSTILE_DIR}/gemma-3-270m-q4_k_m.gguf"
        assert sandbox_exec(f"test -f {shlex.quote(model)}").returncode == 0
        mounts = json.loads(sandbox_exec(
            "docker inspect --format '{{json .Mounts}}' beekeeper-llm").stdout)
        assert [m["Source"] for m in mounts] == [HOSTILE_DIR], mounts
        manifest = json.loads(sandbox_exec(f"cat {MANIFEST}").stdout)
        assert manifest["model_path"] == model
        again = deploy("--data", f"model_dir={HOSTILE_DIR}", "--data", "health_timeout_s=60")
        assert again.rc == 0 and grand_total(again.out)[1] == "-", again.out[-2000:]
    finally:
        back = deploy()
        assert back.rc == 0, back.out[-3000:]
    assert healthy()


@pytest.mark.parametrize(("value", "problem"), [
    ("/srv/models\nExecStartPre=/bin/false", "control character"),
    ("~/models", "relative to a home folder"),
    ("srv/models", "not an absolute path"),
    ("/srv/../etc/models", "not a normalized path"),
    ("/srv/a:b", "Docker's --volume separator"),
])
def test_unrepresentable_model_dir_is_refused_before_any_change(deployed, value, problem):
    before = fingerprint()
    run = deploy("--data", f"model_dir={value}")
    assert run.rc != 0
    assert "host sandbox: host data `model_dir`" in run.out and problem in run.out, \
        run.out[-2000:]
    assert "Traceback" not in run.out
    assert "--> Starting operation" not in run.out
    assert fingerprint() == before
    assert healthy()


def test_unknown_key_is_refused_with_the_closest_one(deployed):
    before = fingerprint()
    run = deploy("--data", "prot=8090")
    assert run.rc != 0
    assert re.search(r"host sandbox: host data `prot`: unknown key.*did you mean `port`",
                     run.out), run.out[-2000:]
    assert "--> Starting operation" not in run.out
    assert fingerprint() == before


def test_port_published_by_another_container_is_refused_naming_it(deployed):
    name = "bk-test-other-web"
    image = BASE if sandbox_exec(f"docker image inspect {BASE}").returncode == 0 else \
        json.loads(sandbox_exec(f"cat {MANIFEST}").stdout)["image"]
    started = sandbox_exec(f"docker rm -f {name} >/dev/null 2>&1; docker run -d --name {name} "
                           f"-p 127.0.0.1:8091:80 --entrypoint sleep {image} infinity")
    assert started.returncode == 0, started.stderr
    try:
        before = fingerprint()
        run = deploy("--data", "port=8091")
        assert run.rc != 0
        assert f"port 8091 on the host is published by the Docker container '{name}'" \
            in run.out, run.out[-2000:]
        assert "host sandbox:" in run.out
        assert "--> Starting operation" not in run.out
        assert fingerprint() == before
    finally:
        sandbox_exec(f"docker rm -f {name}")
    assert healthy()


def test_failed_deploy_on_a_new_port_rolls_back_and_names_the_serving_server(deployed):
    run = deploy("--data", "port=8092", "--data", 'server_extra_args=["--no-such-flag"]',
                 "--data", "health_timeout_s=20")
    assert run.rc != 0
    # the restored unit serves on 8083, not the failed deploy's 8092
    assert "rolled back; the previous server is healthy" in run.out, run.out[-3000:]
    assert "beekeeper: serving cpu-tiny on 127.0.0.1:8083 (previous unit restored)" \
        in run.out, run.out[-3000:]
    assert healthy(8083)
    assert json.loads(sandbox_exec(f"cat {MANIFEST}").stdout)["port"] == 8083
    unit = sandbox_exec(f"cat {UNIT}").stdout
    assert "--no-such-flag" not in unit and "127.0.0.1:8083:8083" in unit
    again = deploy()
    assert again.rc == 0 and grand_total(again.out)[1] == "-", again.out[-2000:]


def test_one_bad_host_of_three_fails_alone_and_the_others_deploy(deployed, monkeypatch):
    try:
        run = pyinfra("-y", "tests/integration/inventory_three.py", "deploy.py")
        assert run.rc != 0  # a failed host fails the run
        assert re.search(r"host bad: host data `prot`: unknown key.*did you mean `port`",
                         run.out), run.out[-3000:]
        assert re.search(r"\[good\]\s+(No changes|Success)", run.out), run.out[-3000:]
        assert re.search(r"\[good-llm2\]\s+Success", run.out), run.out[-3000:]
        assert healthy(8083) and healthy(8085)
        assert "beekeeper: serving cpu-tiny on 127.0.0.1:8085" in run.out
        assert "removed service" not in run.out
        # the two good hosts alone: one machine, each host keeps the other's service (CI
        # found each removing the other once the inventory became the truth)
        monkeypatch.setenv("BEEKEEPER_TEST_GOOD_ONLY", "1")
        again = pyinfra("-y", "tests/integration/inventory_three.py", "deploy.py")
        assert again.rc == 0, again.out[-3000:]
        assert "removed service" not in again.out and "Remove service" not in again.out
        assert re.search(r"\[good\]\s+No changes", again.out), again.out[-3000:]
        assert re.search(r"\[good-llm2\]\s+No changes", again.out), again.out[-3000:]
        assert healthy(8083) and healthy(8085)
    finally:
        sandbox_exec("systemctl disable --now beekeeper-llm2.service; "
                     "rm -rf /etc/systemd/system/beekeeper-llm2.service* /etc/beekeeper/llm2; "
                     "systemctl daemon-reload; docker rm -f beekeeper-llm2")
    assert healthy()
