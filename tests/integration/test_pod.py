"""
A host in a GPU container's state, on CPU: PID 1 is sshd (no systemd), no Docker engine, the
build tools there and no apt lists, a volume at /workspace (what a rented pod keeps when it
restarts) with a model file of the user's already on it. The kit runs cpu-tiny natively
under its own supervisord, its folders on the volume (the persistent root
/workspace/beekeeper): the deploy, a crash and the restart, a second run that changes
nothing, a killed supervisord, unsupervised servers on the port, the pod recreated from its
image with only the volume kept, a bad change rolled back, `beekeeper rollback`, and an
uninstall that leaves the box as it was found (the user's model included).

The build is shared, as the tier's other hosts share it: the main sandbox host's server
image has the same inputs and so the same tag as this host's native build, and its two
binaries are put in the versioned folder the native build would fill (the kit then finds
them built). The native build itself runs in test_native.py (slow tier).
"""

import hashlib
import re
import shlex
import subprocess
import time

import pytest

from beekeeper import sandbox
from beekeeper.core.cache import pypi_model
from beekeeper.core.paths import NATIVE_PREFIX
from beekeeper.core.profiles import PROFILES

from .conftest import standins_host_data
from .helpers import (
    BIN,
    ROOT,
    deploy,
    grand_total,
    place_the_build,
    sandbox_exec,
    wait_until,
)

pytestmark = pytest.mark.integration

POD = f"{sandbox.CONTAINER}-pod"
PORT = sandbox.DEFAULT_SSH_PORT + 5
INVENTORY = "tests/integration/inventory_pod.py"
MODEL = "/workspace/models/own-gemma.gguf"  # the user's file, on the pod's volume
ROOT_ON_VOLUME = "/workspace/beekeeper"  # the persistent root the kit picks there
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


def supervisord_pid() -> str:
    return pod_exec("cat /run/beekeeper-supervisord.pid").stdout.strip()


def ppid(pid: str) -> str:
    return pod_exec(f"ps -o ppid= -p {pid}").stdout.strip()


def binary_of(pid: str) -> str:
    """The server's binary as its command line names it, resolved (root in a container
    without CAP_SYS_PTRACE cannot read another user's /proc/PID/exe)."""
    return pod_exec(f"readlink -f \"$(tr '\\0' '\\n' < /proc/{pid}/cmdline | head -n 1)\""
                    ).stdout.strip()


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
    subprocess.run(["docker", "exec", POD, "mkdir", "-p", "/workspace/models"], check=True)
    subprocess.run(["docker", "cp", str(model), f"{POD}:{MODEL}"], check=True)
    pod_exec(f"chmod 644 {MODEL}")
    before = pod_exec(SNAPSHOT).stdout
    dest = f"{NATIVE_PREFIX}/{tag.split(':', 1)[1]}"
    place_the_build(tag, POD, dest)
    data = {**standins_host_data(standins), "mode": "native", "model_host_path": MODEL,
            "model_sha256": sha}
    sandbox.write_host_data(data, POD)
    yield {"before": before, "dest": dest, "sha": sha, "host_data": data}
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


def test_the_kits_folders_live_on_the_pods_volume(deployed):
    for path, name in (("/opt/beekeeper", "opt"), ("/etc/beekeeper", "etc"),
                       ("/var/lib/beekeeper", "state"), ("/var/log/beekeeper", "log")):
        assert pod_exec(f"readlink {path}").stdout.strip() == f"{ROOT_ON_VOLUME}/{name}"
    # the shared build put in /opt/beekeeper before the first deploy moved onto the volume
    real = binary_of(server_pid())
    assert real.startswith(f"{ROOT_ON_VOLUME}/opt/llama-server/"), real
    assert pod_exec(f"test -x {ROOT_ON_VOLUME}/start").returncode == 0


def test_a_killed_supervisord_takes_its_server_and_the_next_deploy_leaves_one(deployed):
    """kill -9 of supervisord: the server dies with it (never unsupervised); the next
    deploy starts both again: exactly one server, supervisord's child, serving."""
    server, sup = server_pid(), supervisord_pid()
    assert server and sup and ppid(server) == sup
    pod_exec(f"kill -9 {sup}")
    wait_until(lambda: not server_pid(), 20, "the server to die with its supervisord")
    run = pod_deploy()
    assert run.rc == 0, run.out[-3000:]
    pids = server_pid().split()
    assert len(pids) == 1 and ppid(pids[0]) == supervisord_pid(), pids
    assert healthy()


def _start_by_hand(user: str, alias: str) -> None:
    """A llama-server on the service's port with no supervisor: the kit's own binary and
    model, started as `user` (setsid, so nothing of the kit's is its parent)."""
    binary = pod_exec("readlink -f /opt/beekeeper/llama-server/current/llama-server || "
                      "ls /opt/beekeeper/llama-server/*/llama-server | head -1").stdout.split()[0]
    drop = f"setpriv --reuid={user} --regid={user} --init-groups -- " if user != "root" else ""
    pod_exec(f"setsid nohup {drop}{binary} -m {MODEL} --host 127.0.0.1 --port 8083 "
             f"--alias {alias} -c 512 --no-jinja --chat-template gemma >/tmp/by-hand.log "
             "2>&1 < /dev/null &")
    wait_until(healthy, 60, "the server started by hand to answer")


def test_an_unsupervised_server_of_the_kits_is_ended_and_replaced(deployed):
    """What a killed supervisord of an earlier kit left: the kit's binary as user beekeeper
    on the port, no supervisor. The deploy ends it and its own server takes the port (the
    smoke gate checks the pid that answers and the model it lists)."""
    pod_exec(f"{CTL} shutdown")
    wait_until(lambda: not server_pid(), 30, "supervisord to stop its server")
    _start_by_hand("beekeeper", "left-over")
    orphan = server_pid()
    run = pod_deploy()
    assert run.rc == 0, run.out[-3000:]
    assert (f"End the kit's unsupervised server on a service's port (pid {orphan})"
            in run.out), run.out[-3000:]
    pids = server_pid().split()
    assert len(pids) == 1 and pids[0] != orphan and ppid(pids[0]) == supervisord_pid()
    models = pod_exec("curl -sf http://127.0.0.1:8083/v1/models").stdout
    assert '"cpu-tiny"' in models and "left-over" not in models


def test_a_server_the_kit_did_not_start_is_refused_before_any_change(deployed):
    """A llama-server a user started by hand (as root) on the service's port: one line,
    nothing changed, and that server left running."""
    pod_exec(f"{CTL} shutdown")
    wait_until(lambda: not server_pid(), 30, "supervisord to stop its server")
    _start_by_hand("root", "by-hand")
    mine = server_pid()
    try:
        run = pod_deploy()
        assert run.rc != 0
        assert "port 8083" in run.out and mine in run.out, run.out[-3000:]
        assert server_pid() == mine and not supervisord_pid()
    finally:
        pod_exec(f"kill {mine}")
    wait_until(lambda: not server_pid(), 30, "the server started by hand to stop")
    back = pod_deploy()
    assert back.rc == 0, back.out[-3000:]


def test_the_pod_recreated_with_only_its_volume_serves_again_without_a_rebuild(pod, deployed):
    """The pod restarted as RunPod and Kubernetes restart one: a new container from the
    image, only /workspace kept (the kit's user, links and launchers gone). Its start
    command is the line docs/gpu-containers.md gives: the kit's start script, then the
    image's own start command (sshd here, RunPod's /start.sh there)."""
    binary = binary_of(server_pid())
    assert binary.startswith(f"{ROOT_ON_VOLUME}/opt/llama-server/"), binary
    sandbox.down(purge=False, name=POD)
    assert subprocess.run(["docker", "volume", "inspect", sandbox.workspace_volume(POD)],
                          capture_output=True).returncode == 0
    t0 = time.monotonic()
    sandbox.up(ssh_port=PORT, name=POD, init="sshd",
               pod_command=[f"{ROOT_ON_VOLUME}/start", "--", *sandbox.POD_START])
    sandbox.write_host_data(pod["host_data"], POD)  # the inventory's, as before
    waited = wait_until(healthy, 120, "the server to answer after the pod's restart")
    print(f"\n[figure] pod recreated -> healthy: {time.monotonic() - t0:.1f} s "
          f"(after the container started: {waited:.1f} s)")
    assert pod_exec("cat /proc/1/comm").stdout.strip() == "sshd"  # the image's own, exec'd
    assert binary_of(server_pid()) == binary
    assert pod_exec("ps -o user= -C llama-server").stdout.split() == ["beekeeper"]
    again = pod_deploy()  # nothing to rebuild, nothing to change
    assert again.rc == 0 and grand_total(again.out)[1] == "-", again.out[-3000:]


def test_the_pod_recreated_before_its_start_command_is_set_deploys_from_its_volume(pod,
                                                                                  deployed):
    """The pod restarted with only its volume while its start command is still the image's
    own (the kit's start script not set yet: docs/gpu-containers.md says a deploy run starts
    the services then): the kit's folders are not linked, /opt/beekeeper is no more. The
    deploy links them again and starts the server from the build on the volume: no build
    tools asked for, no source placed, no rebuild."""
    binary = binary_of(server_pid())
    sandbox.down(purge=False, name=POD)
    sandbox.up(ssh_port=PORT, name=POD, init="sshd")  # the image's own start command alone
    sandbox.write_host_data(pod["host_data"], POD)
    assert pod_exec("test -e /opt/beekeeper").returncode != 0
    assert not healthy()
    run = pod_deploy()
    assert run.rc == 0, run.out[-3000:]
    tag = pod["dest"].rsplit("/", 1)[1]
    assert re.search(rf"Build llama-server {re.escape(tag)} natively .*\n\s+\[{POD}\] "
                     r"No changes", run.out), run.out[-3000:]
    assert "Upload source tree" not in run.out and "Fetch the server source" not in run.out
    wait_until(healthy, 120, "the server to answer after the deploy")
    assert binary_of(server_pid()) == binary


def test_the_start_scripts_foreground_form_is_a_containers_whole_command(pod, deployed):
    """Kubernetes or `docker run`: the start script in the foreground is the container's
    command, supervisord its PID 1, and the server comes back from the volume alone."""
    sandbox.down(purge=False, name=POD)
    run = subprocess.run(
        ["docker", "run", "-d", "--name", POD, "--network", sandbox.NETWORK, "-v",
         f"{sandbox.workspace_volume(POD)}:/workspace", sandbox.host_image("bookworm", "sshd"),
         f"{ROOT_ON_VOLUME}/start", "--foreground"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    try:
        wait_until(healthy, 120, "the server to answer under supervisord in the foreground")
        assert "supervisord" in pod_exec("tr '\\0' ' ' < /proc/1/cmdline").stdout
        assert ppid(server_pid()) == "1"
    finally:  # the pod as the other tests know it: the RunPod form, sshd after the kit
        sandbox.down(purge=False, name=POD)
        sandbox.up(ssh_port=PORT, name=POD, init="sshd",
                   pod_command=[f"{ROOT_ON_VOLUME}/start", "--", *sandbox.POD_START])
        sandbox.write_host_data(pod["host_data"], POD)
    wait_until(healthy, 120, "the server to answer after the pod's restart")


@pytest.mark.quiet  # llama-bench's decode
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


# the slow tier (CI time, issue 41): supervisord's rollback (rollback.py --restore) stays in
# the main tier through the server that cannot start above, and the `beekeeper rollback`
# command through test_faults.py (a unit); two deploys and the rollback, 21 s
@pytest.mark.slow
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
