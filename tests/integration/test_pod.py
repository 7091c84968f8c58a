"""
A host in a GPU container's state, on CPU: PID 1 is sshd (no systemd), no Docker engine, the
build tools there and no apt lists, a model file of the user's already on it. The kit runs
cpu-tiny natively under its own supervisord: the deploy, a crash and the restart, a second
run that changes nothing, a bad change rolled back, `beekeeper rollback`, and an uninstall
that leaves the box as it was found (the user's model included).

The build is shared, as the tier's other hosts share it: the main sandbox host's server
image has the same inputs and so the same tag as this host's native build, and its two
binaries are put in the versioned folder the native build would fill (the kit then finds
them built). The native build itself runs in test_native.py (slow tier).
"""

import hashlib
import re
import shlex
import subprocess

import pytest

from beekeeper import sandbox
from beekeeper.core.cache import pypi_model
from beekeeper.core.paths import NATIVE_PREFIX
from beekeeper.core.profiles import PROFILES

from .conftest import standins_host_data
from .helpers import BIN, ROOT, deploy, grand_total, sandbox_exec, wait_until

pytestmark = pytest.mark.integration

POD = f"{sandbox.CONTAINER}-pod"
PORT = sandbox.DEFAULT_SSH_PORT + 5
INVENTORY = "tests/integration/inventory_pod.py"
MODEL = "/data/models/own-gemma.gguf"  # the user's file, where the user keeps it
CTL = "/usr/local/sbin/beekeeper-supervisorctl"
# what is on a box, to compare before and after: every path outside the kernel's and the
# run-time folders, the accounts
SNAPSHOT = ("find / -xdev \\( -path /proc -o -path /sys -o -path /dev -o -path /run -o -path "
            "/tmp -o -path /var/tmp \\) -prune -o -print | sort; getent passwd | cut -d: -f1; "
            "getent group | cut -d: -f1")


def pod_exec(cmd: str) -> subprocess.CompletedProcess:
    return sandbox_exec(cmd, name=POD)


def pod_deploy(*extra: str):
    return deploy(*extra, inventory=INVENTORY)


def healthy() -> bool:
    return pod_exec("curl -sf -o /dev/null http://127.0.0.1:8083/health").returncode == 0


def server_pid() -> str:
    return pod_exec("pgrep -x llama-server").stdout.strip()


@pytest.fixture(scope="module")
def pod(fresh_sandbox, standins):
    """The pod host, new, with the user's model on it, and the main host's build shared."""
    first = deploy()  # the main host's server image: built once for the tier
    assert first.rc == 0, first.out[-3000:]
    tag = sandbox_exec("python3 -c \"import json; print(json.load(open("
                       "'/etc/beekeeper/llm/deployed.json'))['image'])\"").stdout.strip()
    sandbox.down(purge=True, name=POD)
    sandbox.up(ssh_port=PORT, name=POD, init="sshd")
    model = pypi_model(PROFILES["cpu-tiny"].model)
    sha = hashlib.sha256(model.read_bytes()).hexdigest()
    subprocess.run(["docker", "exec", POD, "mkdir", "-p", "/data/models"], check=True)
    subprocess.run(["docker", "cp", str(model), f"{POD}:{MODEL}"], check=True)
    pod_exec(f"chmod 644 {MODEL}")
    before = pod_exec(SNAPSHOT).stdout
    dest = f"{NATIVE_PREFIX}/{tag.split(':', 1)[1]}"
    share = (f"set -e; id=$(docker create {shlex.quote(tag)}); d=$(mktemp -d); for b in "
             f"llama-server llama-bench; do docker cp $id:/usr/local/bin/$b $d/; done; "
             f"docker rm $id >/dev/null; tar -C $d -c .; rm -rf $d")
    p = subprocess.run(f"docker exec {sandbox.CONTAINER} sh -c {shlex.quote(share)} | "
                       f"docker exec -i {POD} sh -c 'mkdir -p {dest} && tar -x -C {dest}'",
                       shell=True, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    sandbox.write_host_data({**standins_host_data(standins), "mode": "native",
                             "model_host_path": MODEL, "model_sha256": sha}, POD)
    yield {"before": before, "dest": dest, "sha": sha}
    sandbox.write_host_data(None, POD)
    sandbox.down(purge=True, name=POD)


@pytest.fixture(scope="module")
def deployed(pod):
    run = pod_deploy()
    print(f"\n[figure] pod deploy (supervisor runtime, shared build): {run.wall_s:.0f} s")
    assert run.rc == 0, run.out[-4000:]
    return run


def test_the_pod_is_a_gpu_container_state(pod):
    assert pod_exec("cat /proc/1/comm").stdout.strip() == "sshd"
    assert pod_exec("command -v systemctl docker").returncode != 0
    assert pod_exec("ls /var/lib/apt/lists | grep -c _Packages").stdout.strip() == "0"


def test_deploy_runs_the_server_under_the_kits_supervisord(pod, deployed):
    out = deployed.out
    assert "runs under the kit's supervisord, and nothing starts it again" in out
    # the shared build is found where the native build would put it: no compile
    tag = pod["dest"].rsplit("/", 1)[1]
    assert re.search(rf"Build llama-server {re.escape(tag)} natively .*\n\s+\[{POD}\] "
                     r"No changes", out), out[-3000:]
    status = pod_exec(f"{CTL} status").stdout
    assert status.split()[:2] == ["beekeeper-llm", "RUNNING"], status
    assert pod_exec("ps -o user= -C llama-server").stdout.split() == ["beekeeper"]
    conf = pod_exec("cat /etc/beekeeper/supervisor/programs/beekeeper-llm.conf").stdout
    assert f"-m {MODEL}" in conf and f"{pod['dest']}/llama-server" in conf
    assert healthy()
    reply = pod_exec("curl -sf http://127.0.0.1:8083/v1/chat/completions -H 'Content-Type: "
                     "application/json' -d '{\"messages\":[{\"role\":\"user\",\"content\":"
                     "\"Hi\"}],\"max_tokens\":4}'")
    assert reply.returncode == 0 and '"choices"' in reply.stdout, reply.stdout
    # the server's output where the README's log table says
    assert pod_exec("grep -c 'HTTP server\\|listening' /var/log/beekeeper/beekeeper-llm.log"
                    ).stdout.strip() not in ("", "0")
    # no apt transaction: the pod has no package lists, and nothing was missing
    assert "apt-get" not in out


def test_a_crashed_server_is_started_again_by_supervisord(deployed):
    before = server_pid()
    assert before
    pod_exec(f"kill -9 {before}")
    wait_until(lambda: server_pid() not in ("", before) and healthy(), 60,
               "supervisord to start the server again")


def test_a_second_run_changes_nothing(deployed):
    pid = server_pid()
    again = pod_deploy()
    assert again.rc == 0 and grand_total(again.out)[1] == "-", again.out[-3000:]
    assert server_pid() == pid  # not restarted


def test_verifys_engine_suite_stops_and_starts_the_program_through_supervisorctl(deployed,
                                                                              tmp_path):
    """llama-bench on the host with the service stopped (the kit's supervisorctl, not
    systemctl), the served smoke checks after it: the program is back and serving."""
    ssh = shlex.join(sandbox.ssh_options(sandbox.load_state(POD)))
    p = subprocess.run([str(BIN / "beekeeper"), "verify", "--ssh", ssh, "--profile",
                        "cpu-tiny", "--suite", "engine,smoke", "--quick", "--settle-budget-s",
                        "0", "--out", str(tmp_path)], cwd=ROOT, capture_output=True,
                       text=True, timeout=900)
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    assert "stopped while llama-bench ran" in p.stdout, p.stdout[-3000:]
    assert "[PASS] smoke.stream" in p.stdout
    assert pod_exec(f"{CTL} status").stdout.split()[:2] == ["beekeeper-llm", "RUNNING"]
    assert healthy()


def test_a_server_that_cannot_start_is_rolled_back(deployed):
    run = pod_deploy("--data", 'server_extra_args=["--no-such-flag"]')
    assert run.rc != 0
    assert "rolled back; the previous server is healthy" in run.out, run.out[-3000:]
    assert healthy()
    conf = pod_exec("cat /etc/beekeeper/supervisor/programs/beekeeper-llm.conf").stdout
    assert "--no-such-flag" not in conf


def test_beekeeper_rollback_returns_to_the_previous_program(deployed):
    changed = pod_deploy("--data", 'server_extra_args=["--metrics"]')
    assert changed.rc == 0, changed.out[-3000:]
    conf = "/etc/beekeeper/supervisor/programs/beekeeper-llm.conf"
    assert "--metrics" in pod_exec(f"cat {conf}").stdout
    ssh = shlex.join(sandbox.ssh_options(sandbox.load_state(POD)))
    p = subprocess.run([str(BIN / "beekeeper"), "rollback", "--ssh", ssh], cwd=ROOT,
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "--metrics" not in pod_exec(f"cat {conf}").stdout and healthy()
    back = pod_deploy()  # the inventory's server again (the rollback kept --metrics as .prev)
    assert back.rc == 0, back.out[-3000:]


def test_a_service_marked_absent_goes_from_supervisord(pod, deployed):
    run = pod_deploy("--data", "state=absent")
    assert run.rc == 0, run.out[-3000:]
    assert "removed service llm" in run.out
    assert "beekeeper-llm" not in pod_exec(f"{CTL} status").stdout
    assert pod_exec("ls /etc/beekeeper/supervisor/programs").stdout.split() == []
    assert not healthy() and not server_pid()
    assert pod_exec(f"sha256sum {MODEL}").stdout.split()[0] == pod["sha"]  # yours: stays


def test_uninstall_leaves_the_box_as_it_was_found_and_the_users_model(pod, deployed):
    run = subprocess.run([str(BIN / "pyinfra"), "-y", INVENTORY, "uninstall.py"], cwd=ROOT,
                         capture_output=True, text=True)
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    assert pod_exec("pgrep -f supervisord").returncode != 0
    assert not healthy()
    after = pod_exec(SNAPSHOT).stdout
    # the shared build went too (the kit's folder); nothing else differs
    gone, new = set(pod["before"].split()) - set(after.split()), \
        set(after.split()) - set(pod["before"].split())
    assert not gone and not new, (sorted(gone)[:20], sorted(new)[:20])
    assert pod_exec(f"sha256sum {MODEL}").stdout.split()[0] == pod["sha"]
