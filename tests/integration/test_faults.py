"""
Faults and bad input on the sandbox host (CPU profile): the service recovers by itself,
a failed deploy leaves the old server serving, bad input changes nothing.
"""

import re
import shlex
import signal
import subprocess
import time

import pytest

from beekeeper.core.paths import MODEL_DIR
from beekeeper.core.profiles import PROFILES
from beekeeper.sandbox import CONTAINER

from .helpers import (
    BIN,
    ROOT,
    deploy,
    grand_total,
    healthy,
    port_listener,
    pyinfra,
    sandbox_exec,
    server_instance,
    start_deploy,
    wait_until,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def deployed(fresh_sandbox):
    run = deploy()
    assert run.rc == 0, run.out[-3000:]
    assert healthy()


def replaced_and_healthy(before: str) -> bool:
    """Another server container than `before` runs (see helpers.server_instance), and it
    answers /health: the one that was there went down and a new one serves."""
    return server_instance() not in (None, before) and healthy()


def test_killed_server_process_is_restarted_by_the_unit(deployed):
    before = server_instance()
    assert before is not None and healthy()
    assert sandbox_exec("pkill -9 -f /usr/local/bin/llama-server").returncode == 0
    t0 = time.monotonic()
    wait_until(lambda: not healthy(), 10, "/health to fail after the server was killed")
    back = wait_until(lambda: replaced_and_healthy(before), 90,
                      "a new server container (the killed one's gone) answering /health")
    print(f"\n[figure] server killed -> healthy again in {time.monotonic() - t0:.1f} s "
          f"({back:.1f} s after it went down)")


def test_docker_daemon_restart_brings_the_server_back(deployed):
    before = server_instance()
    assert before is not None and healthy()
    t0 = time.monotonic()
    assert sandbox_exec("systemctl restart docker").returncode == 0
    wait_until(lambda: replaced_and_healthy(before), 120,
               "after the Docker engine's restart: a new server container answering /health")
    print(f"\n[figure] docker restart -> healthy again in {time.monotonic() - t0:.1f} s")


def test_host_reboot_brings_the_service_back(deployed):
    before = server_instance()
    assert before is not None and healthy()
    booted = host_started_at()
    t0 = time.monotonic()
    subprocess.run(["docker", "restart", CONTAINER], check=True, capture_output=True)
    assert host_started_at() != booted, "the sandbox host did not restart"
    wait_until(lambda: replaced_and_healthy(before), 180,
               "after the host's restart: a new server container answering /health")
    print(f"\n[figure] host restart -> healthy again in {time.monotonic() - t0:.1f} s")


def host_started_at() -> str:
    """When the sandbox host (its container, on the controller's Docker) last started."""
    return subprocess.run(["docker", "inspect", "-f", "{{.State.StartedAt}}", CONTAINER],
                          check=True, capture_output=True, text=True).stdout.strip()


def test_model_with_wrong_sha256_is_removed_and_old_server_keeps_serving(deployed):
    run = deploy("--data", "model_sha256=" + "f" * 64)  # digits only would parse as an int
    assert run.rc != 0
    assert "model sha256 mismatch" in run.out
    assert healthy()
    assert sandbox_exec("ls /srv/beekeeper/models/*.partial").returncode != 0


def test_new_server_that_cannot_start_is_rolled_back(deployed):
    run = deploy("--data", 'server_extra_args=["--no-such-flag"]')
    assert run.rc != 0
    assert "rolled back; the previous server is healthy" in run.out, run.out[-3000:]
    # the server exits as it starts: the gate says so at once, not at health_timeout_s
    assert "beekeeper-llm.service exited and was restarted 3 times" in run.out, run.out[-3000:]
    assert healthy()
    unit = sandbox_exec("cat /etc/systemd/system/beekeeper-llm.service").stdout
    assert "--no-such-flag" not in unit
    # the next good run converges: nothing left to change
    again = deploy()
    assert again.rc == 0 and grand_total(again.out)[1] == "-", again.out[-2000:]


def test_full_disk_is_refused_before_any_download(deployed):
    assert sandbox_exec("mkdir -p /srv/tiny && mountpoint -q /srv/tiny || "
                        "mount -t tmpfs -o size=64m tmpfs /srv/tiny").returncode == 0
    run = deploy("--data", "model_dir=/srv/tiny/models")
    assert run.rc != 0
    assert "model_dir /srv/tiny/models has 0.1 GiB free" in run.out, run.out[-2000:]
    assert "--> Starting operation" not in run.out
    assert sandbox_exec("ls -A /srv/tiny").stdout.strip() == ""
    assert healthy()


def test_port_in_use_is_refused_before_any_change(deployed):
    assert port_listener(8090) == "", "port 8090 is taken before the test"
    sandbox_exec("nohup python3 -m http.server 8090 --bind 127.0.0.1 >/dev/null 2>&1 &")
    try:
        # listening, as the preflight sees it (`ss`, with the process name)
        wait_until(lambda: '"python3"' in port_listener(8090), 30,
                   "python3's http.server listening on 127.0.0.1:8090 on the sandbox host")
        run = deploy("--data", "port=8090")
        assert run.rc != 0
        # named by pid, user and program (its executable: /usr/bin/python3.11 on bookworm)
        assert re.search(r"port 8090 on the host is in use by pid \d+ \(user root, program "
                         r"\S*python3", run.out), run.out[-2000:]
        assert "--> Starting operation" not in run.out
    finally:
        sandbox_exec("pkill -f 'http.server 8090'")
    assert healthy()


def test_non_loopback_bind_without_a_key_is_refused(deployed):
    run = deploy("--data", "bind_address=0.0.0.0")
    assert run.rc != 0
    assert "host data `bind_address`: 0.0.0.0 is not loopback and no API key is set" in run.out


def test_interrupted_deploy_converges_on_the_next_run(deployed, tmp_path):
    """A deploy from cpu-tiny to cpu-smollm is killed (SIGKILL) while it changes the host: in
    the upload of the SmolLM2 model, its first change, proven by the deploy's own output
    (that operation started, none after it) and by the host (`<model>.partial` half written,
    the model, the unit and deployed.json not yet changed). The next run converges."""
    smol = PROFILES["cpu-smollm"].model
    dest = f"{MODEL_DIR}/{smol.filename}"
    partial = dest + ".partial"
    unit_file = "/etc/systemd/system/beekeeper-llm.service"
    # An earlier module may have placed it (deploys never delete models): without it, this
    # deploy's first change is its upload (98 MB over SFTP, straight into `.partial`), both
    # when the whole suite runs and when this module runs alone. The cpu-tiny server that
    # runs does not use it.
    assert sandbox_exec(f"rm -f {shlex.quote(dest)} {shlex.quote(partial)}").returncode == 0
    unit_before = sandbox_exec(f"cat {unit_file}").stdout
    assert smol.filename not in unit_before, unit_before
    marker = f"--> Starting operation: Place model {smol.filename}"
    log = tmp_path / "interrupted-deploy.log"
    p = start_deploy(log, "--data", "profile=cpu-smollm")

    def uploading() -> bool:
        """The upload has started (the log says so) and is not finished (the host says so:
        `.partial` shorter than the model, the model not in place)."""
        if p.poll() is not None:
            raise AssertionError(f"the deploy ended (rc {p.returncode}) before the model's "
                                 f"upload was seen in progress:\n{log.read_text()[-3000:]}")
        if marker not in log.read_text():
            return False
        size = sandbox_exec(f"test ! -e {shlex.quote(dest)} && "
                            f"stat -c %s {shlex.quote(partial)}").stdout.strip()
        return size.isdigit() and int(size) < smol.size_bytes

    try:
        wait_until(uploading, 600, f"the deploy uploading {smol.filename} (its log has "
                   f"'{marker}', the host a {partial} shorter than "
                   f"{smol.size_bytes} bytes)", interval_s=0.1)
        p.send_signal(signal.SIGKILL)
        p.wait()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    # killed during that change, not before it nor after it
    after_marker = log.read_text().split(marker, 1)[1]
    assert "--> Starting operation" not in after_marker and \
        not re.search(r"\]\s+(Success|No changes)", after_marker), after_marker[-2000:]
    left = sandbox_exec(f"test ! -e {shlex.quote(dest)} && test -f {shlex.quote(partial)}")
    assert left.returncode == 0, "the kill did not leave the upload half done"
    assert sandbox_exec(f"cat {unit_file}").stdout == unit_before, "the unit was rewritten"
    assert '"profile": "cpu-tiny"' in sandbox_exec("cat /etc/beekeeper/llm/deployed.json").stdout
    assert healthy()  # the server that ran goes on serving
    run = deploy("--data", "profile=cpu-smollm")
    assert run.rc == 0, run.out[-3000:]
    assert sandbox_exec(f"test -f {shlex.quote(dest)} && test ! -e {shlex.quote(partial)}"
                        ).returncode == 0, "the next run left the model unplaced or a .partial"
    again = deploy("--data", "profile=cpu-smollm")
    assert again.rc == 0 and grand_total(again.out)[1] == "-", again.out[-2000:]
    assert deploy().rc == 0 and healthy()


def files_holding(secret: str) -> dict[str, tuple[str, bool]]:
    """Every file on the sandbox host holding `secret` (given on stdin, never on a command
    line), with its owner and whether another user (nobody) can read it, folders and all;
    the kernel's views and Docker's image layers (which the kit never writes a key into:
    its builds take no secret) are not read."""
    scan = ("grep -rlsF -f /dev/stdin --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev "
            "--exclude-dir=overlay2 / | while read -r f; do "
            "if setpriv --reuid=nobody --regid=nogroup --clear-groups test -r \"$f\"; "
            "then r=readable; else r=closed; fi; echo \"$r $(stat -c %U \"$f\") $f\"; done")
    out = subprocess.run(["docker", "exec", "-i", CONTAINER, "bash", "-c", scan],
                         input=secret + "\n", capture_output=True, text=True, timeout=600)
    found = {}
    for line in out.stdout.splitlines():
        words = line.split(" ", 2)
        if len(words) == 3 and words[0] in ("readable", "closed"):  # (gone before its stat)
            found[words[2]] = (words[1], words[0] == "readable")
    return found


def test_api_key_never_reaches_a_command_line_log_or_report(deployed, tmp_path):
    secret = "bk-" + "7f3a9c1e5d" * 3
    key = tmp_path / "api_key"
    key.write_text(secret + "\n")
    key.chmod(0o600)
    # at -vv pyinfra prints every fact's output and every command it runs
    run = deploy("--data", "bind_address=0.0.0.0", "--data", f"api_key_file={key}", "-vv")
    try:
        assert run.rc == 0, run.out[-3000:]
        assert secret not in run.out
        assert secret not in sandbox_exec("ps auxww").stdout
        # every file on the host that holds the key is root's and no other user can read
        # it: the kit's two (the key and the env file), and the container engine's own
        # records of the container's environment (Docker's config.v2.json, containerd's
        # meta.db: 0644 itself, in a 0700 folder), which `--env-file` always makes
        holders = files_holding(secret)
        assert {"/etc/beekeeper/llm/api_key", "/etc/beekeeper/llm/secrets.env"} <= set(holders)
        for path, (owner, readable) in holders.items():
            assert owner == "root" and not readable, (path, owner, readable)
            assert path.startswith(("/etc/beekeeper/", "/var/lib/docker/",
                                    "/var/lib/containerd/", "/run/containerd/",
                                    "/run/docker/")), path
        unit = sandbox_exec("cat /etc/systemd/system/beekeeper-llm.service").stdout
        assert secret not in unit and "--env-file /etc/beekeeper/llm/secrets.env" in unit
        for f in ("api_key", "secrets.env"):
            st = sandbox_exec(f"stat -c '%a %U' /etc/beekeeper/llm/{f}").stdout.split()
            assert st == ["600", "root"], (f, st)
        assert secret not in sandbox_exec("journalctl -u beekeeper-llm --no-pager").stdout
        url = "http://127.0.0.1:8083/v1/models"
        assert sandbox_exec(f"curl -s -o /dev/null -w '%{{http_code}}' {url}").stdout == "401"
        ok = sandbox_exec(f"curl -s -o /dev/null -w '%{{http_code}}' -H @- {url} <<EOF\n"
                          f"Authorization: Bearer {secret}\nEOF")
        assert ok.stdout == "200"
        again = deploy("--data", "bind_address=0.0.0.0", "--data", f"api_key_file={key}")
        assert again.rc == 0 and grand_total(again.out)[1] == "-", again.out[-2000:]
        assert secret not in again.out
    finally:
        back = deploy()
        assert back.rc == 0, back.out[-3000:]
    assert healthy()


@pytest.mark.slow  # a load benchmark (about 75 s on 2 cores: two deploys, three rounds)
def test_four_slot_server_under_concurrent_load(deployed):
    from beekeeper.core.profiles import PROFILES
    from beekeeper.sandbox import load_state, ssh_options
    from beekeeper.tunnel import ssh_tunnel
    from beekeeper.verify.client import ServerClient
    from beekeeper.verify.suites import run_load

    assert deploy("--data", "profile=cpu-tiny-4slot").rc == 0
    try:
        restarts = sandbox_exec("systemctl show -p NRestarts --value beekeeper-llm").stdout
        rss = []
        with ssh_tunnel(ssh_options(load_state()), 8083) as url, ServerClient(url) as client:
            run_load(client, 4, 3, 8)  # warm-up
            rss.append(int(sandbox_exec("ps -o rss= -C llama-server").stdout.split()[0]))
            for _ in range(3):
                load = run_load(client, 4, 10, 16).to_json()
                rss.append(int(sandbox_exec("ps -o rss= -C llama-server").stdout.split()[0]))
                assert load["failed"] == 0 and load["requests"] > 0, load["errors"]
        print(f"\n[figure] load, {PROFILES['cpu-tiny-4slot'].server.parallel} slots, 4 clients:"
              f" {load['requests']} requests in {load['seconds']} s, "
              f"{load['aggregate_tok_s']:.1f} tok/s aggregate, p95 TTFT "
              f"{load['ttft_s_p95']:.2f} s; server RSS {min(rss)}..{max(rss)} KiB")
        assert sandbox_exec("systemctl show -p NRestarts --value beekeeper-llm").stdout == \
            restarts
        assert max(rss[1:]) <= rss[0] * 1.10  # steady after warm-up
    finally:
        assert deploy().rc == 0


def test_rollback_command_returns_to_the_previous_unit_without_a_rebuild(deployed):
    assert deploy("--data", "profile=cpu-smollm").rc == 0
    p = subprocess.run([str(BIN / "beekeeper"), "rollback", "--sandbox"], cwd=ROOT,
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    manifest = sandbox_exec("cat /etc/beekeeper/llm/deployed.json").stdout
    assert '"profile": "cpu-tiny"' in manifest
    assert healthy()
    again = deploy()
    assert again.rc == 0 and grand_total(again.out)[1] == "-", again.out[-2000:]


def test_rollback_over_a_login_that_is_not_root(deployed):
    """The example WSL box logs in as `me` with `_sudo`: `beekeeper rollback --ssh` as such a
    login goes through passwordless sudo (here with fish as its login shell, which parses no
    POSIX `if`); a login without sudo gets one line naming the user and the fix, and the
    host is left as it was. The users, their sudo rule and fish are removed after."""
    import shlex

    from beekeeper.sandbox import load_state, ssh_options

    made = sandbox_exec(
        "DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fish >/dev/null && "
        "useradd -m -s /usr/bin/fish me && useradd -m -s /bin/bash plain && "
        "for u in me plain; do install -d -m 700 -o $u -g $u /home/$u/.ssh; install -m 600 "
        "-o $u -g $u /root/.ssh/authorized_keys /home/$u/.ssh/authorized_keys; done && "
        "echo 'me ALL=(ALL) NOPASSWD:ALL' > /etc/sudoers.d/me && chmod 440 /etc/sudoers.d/me")
    try:
        assert made.returncode == 0, made.stdout + made.stderr
        assert deploy("--data", "profile=cpu-smollm").rc == 0
        opts = shlex.join(ssh_options(load_state())[:-1])  # all but root@127.0.0.1

        def rollback(user: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run([str(BIN / "beekeeper"), "rollback", "--ssh",
                                   f"{opts} {user}@127.0.0.1"], cwd=ROOT,
                                  capture_output=True, text=True)

        def profile() -> str:
            return sandbox_exec("cat /etc/beekeeper/llm/deployed.json").stdout

        refused = rollback("plain")
        assert refused.returncode != 0, refused.stdout + refused.stderr
        assert "needs root on the host" in refused.stderr and "let plain use sudo" in \
            refused.stderr, refused.stderr
        assert '"profile": "cpu-smollm"' in profile() and healthy()
        done = rollback("me")
        assert done.returncode == 0, done.stdout + done.stderr
        assert '"profile": "cpu-tiny"' in profile() and healthy()
        again = deploy()
        assert again.rc == 0 and grand_total(again.out)[1] == "-", again.out[-2000:]
    finally:
        sandbox_exec("userdel -r me; userdel -r plain; rm -f /etc/sudoers.d/me; "
                     "DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq fish >/dev/null")


def test_unreachable_host_is_named_and_the_others_still_deployed(deployed):
    run = pyinfra("-y", "tests/integration/inventory_unreachable.py", "deploy.py")
    assert "[unreachable]" in run.out and "Could not connect" in run.out, run.out[-2000:]
    # pyinfra pads host names to the longest: "[sandbox]     No changes"
    assert re.search(r"\[sandbox\]\s+(No changes|Success)", run.out), run.out[-2000:]
    assert healthy()
