"""
The gateway (issue 17) on two real sandbox hosts: the first (Debian 12) serves cpu-tiny and
cpu-smollm (answering to its model_alias, SMOL) on its address in the sandboxes' network
(with a key), the second (Debian 13)
serves cpu-tiny on its loopback and runs the gateway (the distro's HAProxy 3.0). One server
image build is shared: the second host gets the first one's image copied in.
Tests run in order and build on each other; the last one removes a service.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from beekeeper import sandbox
from beekeeper.tunnel import ssh_tunnel
from beekeeper.verify.client import ServerClient

from .helpers import (
    BIN,
    ROOT,
    SECOND,
    deploy,
    grand_total,
    provision_and_share,
    results,
    sandbox_exec,
    wait_until,
    why,
)

pytestmark = pytest.mark.integration

INVENTORY = "tests/integration/inventory_gateway.py"
A = sandbox.CONTAINER  # the first host: its name in the inventory is "sandbox"
GW_PORT = 4000
PROMPT = [{"role": "user", "content": "Name three colours."}]
# the name cpu-smollm's server answers to (host data model_alias, its --alias): the gateway
# routes, lists and paths it by that name, with a ':' as in the names people give models
SMOL = "smol:135m"


def _layout(tmp: Path, gw_key: Path, up_key: Path, smol: bool = True) -> dict:
    a_services = [{"service_name": "tiny", "profile": "cpu-tiny", "port": 8083,
                   "bind_address": "0.0.0.0", "api_key_file": str(up_key)}]
    if smol:
        a_services.append({"service_name": "smol", "profile": "cpu-smollm", "port": 8084,
                           "bind_address": "0.0.0.0", "api_key_file": str(up_key),
                           "model_alias": SMOL})
    return {
        # reached by the gateway at its name in the sandboxes' network
        "a": {"services": a_services, "gateway_address": A},
        # the second host's server and gateway on :: in a container with IPv6 off on its
        # loopback (Docker's default: no ::1): both reached at 127.0.0.1 (the deploy's smoke
        # check and gateway wait, HAProxy's upstream, the tests' tunnel)
        "b": {"services": [{"service_name": "tiny", "profile": "cpu-tiny", "port": 8083,
                            "bind_address": "::", "api_key_file": str(up_key)}],
              "gateway": {"port": GW_PORT, "api_key_file": str(gw_key), "bind_address": "::",
                          "check_interval_s": 1}},
    }


def _write_layout(layout: dict) -> None:
    Path(os.environ["BEEKEEPER_GATEWAY_LAYOUT"]).write_text(json.dumps(layout))


def gw_deploy(*extra: str, dry: bool = False):
    return deploy(*extra, dry=dry, inventory=INVENTORY)


class Setup:
    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.gw_key = tmp / "gateway.key"
        self.up_key = tmp / "backend.key"
        # the gateway's: a key a user, one a line (alice's first, bob's second)
        for path, text in ((self.gw_key, f"gw-{os.urandom(12).hex()}\n"
                                         f"gw2-{os.urandom(12).hex()}"),
                           (self.up_key, "be-" + os.urandom(12).hex())):
            path.write_text(text + "\n")
            path.chmod(0o600)
        self.gw, self.gw2 = self.gw_key.read_text().split()
        self.up = self.up_key.read_text().strip()
        os.environ["BEEKEEPER_GATEWAY_LAYOUT"] = str(tmp / "layout.json")
        _write_layout(_layout(tmp, self.gw_key, self.up_key))


@pytest.fixture(scope="module")
def setup(fresh_sandbox, trixie_sandbox, tmp_path_factory):
    s = Setup(tmp_path_factory.mktemp("gateway"))
    t0 = time.monotonic()
    run = gw_deploy("--limit", "sandbox")  # the first host builds the server image
    print(f"\n[figure] first host deploy (build, two services): {run.wall_s:.0f} s")
    assert run.rc == 0, why(run.out)
    t1 = time.monotonic()
    copied = provision_and_share(INVENTORY, SECOND)  # the second gets that image copied in
    print(f"[figure] second host provisioned, image copied ({copied}): "
          f"{time.monotonic() - t1:.0f} s")
    assert copied
    run = gw_deploy()
    print(f"[figure] both hosts and the gateway: {run.wall_s:.0f} s "
          f"(all set-up {time.monotonic() - t0:.0f} s)")
    assert run.rc == 0, why(run.out)
    rows = results(run.out)
    assert not any(k.startswith("Build server image") and v[0] == "1"
                   for k, v in rows.items()), "the second host built its own image"
    s.deploy_out = run.out
    yield s
    # the first host as the other modules know it: the sandbox inventory's one service
    # (this deploy also removes the two services this module made there)
    back = deploy()
    print(f"\n[figure] first host back to the sandbox inventory: {back.wall_s:.0f} s")
    assert back.rc == 0, back.out[-3000:]


@pytest.fixture(scope="module")
def gw_url(setup):
    with ssh_tunnel(sandbox.ssh_options(sandbox.load_state(SECOND)), GW_PORT) as url:
        yield url


def tasks_served(host: str, service: str) -> int:
    """Completion tasks this backend's own llama-server has logged (its journal)."""
    p = sandbox_exec(f"journalctl -u beekeeper-{service}.service -o cat --no-pager | "
                     "grep -c 'processing task' || true", host)
    return int(p.stdout.strip() or 0)


def counts() -> dict[str, int]:
    return {"a/tiny": tasks_served(A, "tiny"), "a/smol": tasks_served(A, "smol"),
            "b/tiny": tasks_served(SECOND, "tiny")}


def chat(url: str, key: str | None, model: str | None, max_tokens: int = 4,
         timeout: float = 120) -> httpx.Response:
    body: dict = {"messages": PROMPT, "max_tokens": max_tokens, "temperature": 0}
    if model:
        body["model"] = model
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.post(f"{url}/v1/chat/completions", json=body, headers=headers,
                      timeout=timeout)


def test_deploy_reports_the_gateway_and_installs_haproxy_from_the_distro(setup):
    assert "beekeeper: gateway on [::]:4000 routes cpu-tiny (2 servers), " \
           f"{SMOL} (1 server)" in setup.deploy_out
    off = sandbox_exec("cat /proc/sys/net/ipv6/conf/lo/disable_ipv6", SECOND).stdout.strip()
    print(f"\n[figure] the second host's loopback: IPv6 {'off (no ::1)' if off == '1' else 'on'}")
    version = sandbox_exec("haproxy -v | head -1", SECOND).stdout
    print(f"\n[figure] gateway engine: {version.strip()}")
    assert re.search(r"HAProxy version 3\.0\.", version), version
    assert sandbox_exec("systemctl is-active beekeeper-gateway.service", SECOND) \
        .stdout.strip() == "active"


def test_gateway_lists_every_model(gw_url, setup):
    r = httpx.get(f"{gw_url}/v1/models", headers={"Authorization": f"Bearer {setup.gw}"})
    assert r.status_code == 200, r.text
    assert sorted(m["id"] for m in r.json()["data"]) == ["cpu-tiny", SMOL]


def test_a_wrong_or_missing_key_is_refused(gw_url, setup):
    assert chat(gw_url, None, "cpu-tiny").status_code == 401
    assert chat(gw_url, "wrong-" + setup.gw, "cpu-tiny").status_code == 401
    assert httpx.get(f"{gw_url}/v1/models").status_code == 401
    assert chat(gw_url, setup.gw, "cpu-tiny").status_code == 200
    assert chat(gw_url, setup.gw2, "cpu-tiny").status_code == 200  # the second user's key
    assert chat(gw_url, setup.gw + setup.gw2, "cpu-tiny").status_code == 401
    # the key is in no config, unit, command line or log; its file is root-only (the
    # keys reach the search on its stdin, so no search's command line holds one)
    for secret in (setup.gw, setup.gw2, setup.up):
        p = subprocess.run(
            ["docker", "exec", "-i", SECOND, "bash", "-c",
             "umask 077; cat > /run/pattern; grep -rlF -f /run/pattern "
             "/etc/beekeeper/gateway/haproxy.cfg /etc/systemd/system/ "
             "/proc/[0-9]*/cmdline 2>/dev/null; "
             "journalctl -o cat --no-pager | grep -cF -f /run/pattern; rm -f /run/pattern"],
            input=secret + "\n", capture_output=True, text=True)
        assert p.stdout.strip() == "0", p.stdout
    modes = sandbox_exec("stat -c '%a %U %n' /etc/beekeeper/gateway/client.key "
                         "/etc/beekeeper/gateway/upstream-keys.map", SECOND).stdout
    assert [line.split()[:2] for line in modes.splitlines()] == [["600", "root"]] * 2, modes


def test_requests_are_routed_by_model_name(gw_url, setup):
    before = counts()
    for _ in range(3):
        r = chat(gw_url, setup.gw, SMOL)
        assert r.status_code == 200, r.text
        assert r.json()["model"] == SMOL  # the server's own answer: its --alias
    mid = counts()
    assert mid["a/smol"] - before["a/smol"] == 3, (before, mid)
    assert mid["a/tiny"] == before["a/tiny"] and mid["b/tiny"] == before["b/tiny"]
    for _ in range(4):
        assert chat(gw_url, setup.gw, "cpu-tiny").status_code == 200
    after = counts()
    assert after["a/smol"] == mid["a/smol"], (mid, after)
    assert after["a/tiny"] + after["b/tiny"] - mid["a/tiny"] - mid["b/tiny"] == 4
    # a model the gateway does not have: 404 naming it, nothing reaches a backend
    r = chat(gw_url, setup.gw, "no-such-model")
    assert r.status_code == 404 and "no-such-model" in r.text, r.text
    assert counts() == after


def test_two_backends_of_one_model_share_the_load(gw_url, setup):
    before = counts()
    n = 12
    for _ in range(n):
        assert chat(gw_url, setup.gw, "cpu-tiny").status_code == 200
    after = counts()
    a, b = after["a/tiny"] - before["a/tiny"], after["b/tiny"] - before["b/tiny"]
    print(f"\n[figure] {n} sequential cpu-tiny requests: {a} to the first host, {b} to the "
          "second (least connections)")
    assert a + b == n and a >= n // 4 and b >= n // 4, (a, b)


def test_verify_works_through_the_gateway_unchanged(gw_url, setup, tmp_path):
    p = subprocess.run([str(BIN / "beekeeper"), "verify", "--url", f"{gw_url}/model/cpu-tiny",
                        "--profile", "cpu-tiny", "--suite", "smoke", "--quick",
                        "--api-key-file", str(setup.gw_key), "--out", str(tmp_path)],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    assert "verify PASSED" in p.stdout


def test_streaming_through_the_gateway_gives_the_tokens_direct_gives(gw_url, setup):
    with ssh_tunnel(sandbox.ssh_options(sandbox.load_state()), 8084) as direct_url, \
            ServerClient(direct_url, api_key=setup.up) as direct, \
            ServerClient(gw_url, api_key=setup.gw) as via:
        kw = dict(max_tokens=48, ignore_eos=True, seed=3, extra={"model": SMOL})
        d = direct.stream_chat(PROMPT, **kw)
        g = via.stream_chat(PROMPT, **kw)
    assert d.ok and g.ok, (d.error, g.error)
    assert g.text == d.text and g.completion_tokens == d.completion_tokens == 48
    # streamed as it was made, not held and sent in bursts: HAProxy without http-no-delay
    # delivered 5 or 6 tokens at once every ~200 ms (gaps of 0 between them)
    gt, dt = g.token_event_times_s, d.token_event_times_s
    gaps = [b - a for a, b in zip(gt, gt[1:], strict=False)]
    bunched = sum(x < 0.002 for x in gaps)
    print(f"\n[figure] 48 tokens streamed: through the gateway first at {gt[0]:.3f} s, last "
          f"at {gt[-1]:.3f} s, {bunched} of {len(gaps)} gaps under 2 ms; direct "
          f"{dt[0]:.3f} s / {dt[-1]:.3f} s")
    assert len(gt) >= 40 and bunched <= len(gaps) // 2, gaps


@pytest.mark.slow  # a benchmark (about 75 s on 2 cores): the slow tier
def test_gateway_overhead_benchmark(gw_url, setup, tmp_path):
    """A benchmark, not a timed test: verify --suite gateway, same run, same server."""
    with ssh_tunnel(sandbox.ssh_options(sandbox.load_state()), 8084) as direct_url:
        p = subprocess.run(
            [str(BIN / "beekeeper"), "verify", "--url", f"{gw_url}/model/{SMOL}",
             "--direct-url", direct_url, "--direct-api-key-file", str(setup.up_key),
             "--api-key-file", str(setup.gw_key), "--profile", "cpu-smollm",
             "--suite", "gateway", "--quick", "--out", str(tmp_path)],
            cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    for line in p.stdout.splitlines():
        if "gateway." in line:
            print(f"\n[figure] {line.strip()}", end="")
    print()
    report = json.loads(next(tmp_path.rglob("report.json")).read_text())
    g = report["suites"]["gateway"]
    assert g["gateway"]["failed"] == 0 and g["direct"]["failed"] == 0


def _gateway_log(since: str) -> str:
    return sandbox_exec(f"journalctl -u beekeeper-gateway.service -o cat --no-pager "
                        f"--since @{since}", SECOND).stdout


def test_a_stopped_backend_is_taken_out_and_comes_back(gw_url, setup):
    since = sandbox_exec("date +%s", SECOND).stdout.strip()
    failed, ok = 0, 0
    stop_at = time.monotonic() + 2
    stopped = False
    end = time.monotonic() + 12
    while time.monotonic() < end:
        if not stopped and time.monotonic() > stop_at:
            sandbox_exec("systemctl stop beekeeper-tiny.service", SECOND)
            stopped = True
        try:
            r = chat(gw_url, setup.gw, "cpu-tiny", max_tokens=2, timeout=30)
            ok, failed = (ok + 1, failed) if r.status_code == 200 else (ok, failed + 1)
        except httpx.HTTPError:
            failed += 1
    print(f"\n[figure] backend stopped mid-run: {ok} requests succeeded, {failed} failed")
    assert failed <= 3 and ok >= 5, (ok, failed)
    log = _gateway_log(since)
    assert f"Server model_cpu-tiny/{SECOND}.tiny is DOWN" in log, log[-2000:]
    # every request now goes to the first host
    before = counts()
    for _ in range(4):
        assert chat(gw_url, setup.gw, "cpu-tiny").status_code == 200
    after = counts()
    assert after["a/tiny"] - before["a/tiny"] == 4
    # it comes back once healthy
    t0 = time.monotonic()
    sandbox_exec("systemctl start beekeeper-tiny.service", SECOND)
    deadline = time.monotonic() + 120
    while "is UP" not in _gateway_log(since) and time.monotonic() < deadline:
        time.sleep(0.5)
    print(f"[figure] back in the gateway {time.monotonic() - t0:.1f} s after its start")
    assert "is UP" in _gateway_log(since)
    before = counts()
    for _ in range(6):
        assert chat(gw_url, setup.gw, "cpu-tiny").status_code == 200
    after = counts()
    assert after["b/tiny"] > before["b/tiny"], (before, after)


def test_second_deploy_changes_nothing(setup):
    run = gw_deploy()
    print(f"\n[figure] second deploy of both hosts and the gateway: {run.wall_s:.1f} s")
    assert run.rc == 0, run.out[-3000:]
    hosts, success, error, no_change = grand_total(run.out)
    assert (success, error) == ("-", "-"), run.out[-3000:]


def test_a_service_dropped_from_the_inventory_is_gone_from_host_and_gateway(gw_url, setup):
    _write_layout(_layout(setup.tmp, setup.gw_key, setup.up_key, smol=False))
    dry = gw_deploy(dry=True)
    assert dry.rc == 0, dry.out[-3000:]
    assert "Remove service smol (gone from the inventory)" in dry.out
    model = json.loads(sandbox_exec("cat /etc/beekeeper/smol/deployed.json", A).stdout)[
        "model_path"]
    run = gw_deploy()
    assert run.rc == 0, run.out[-4000:]
    assert "beekeeper: removed service smol" in run.out
    assert "gateway on [::]:4000 routes cpu-tiny (2 servers)" in run.out
    assert sandbox_exec("systemctl is-active beekeeper-smol.service", A).stdout.strip() \
        == "inactive"
    for path in ("/etc/systemd/system/beekeeper-smol.service", "/etc/beekeeper/smol"):
        assert sandbox_exec(f"test -e {path}", A).returncode == 1, path
    assert "beekeeper-smol" not in sandbox_exec("docker ps -a --format '{{.Names}}'", A).stdout
    assert sandbox_exec(f"test -f {model}", A).returncode == 0, "the model was deleted"
    r = httpx.get(f"{gw_url}/v1/models", headers={"Authorization": f"Bearer {setup.gw}"})
    assert [m["id"] for m in r.json()["data"]] == ["cpu-tiny"]
    r = chat(gw_url, setup.gw, SMOL)
    assert r.status_code == 404, r.text
    # the reload left one worker: the old one stopped (it would serve the old config); the
    # requests above were answered on the new config, so the new worker runs: 2 processes
    # now means the old worker has gone
    def haproxy_processes() -> str:
        return sandbox_exec("pgrep -c -f '^/usr/sbin/haproxy .*/etc/beekeeper/gateway/'",
                            SECOND).stdout.strip()

    wait_until(lambda: haproxy_processes() == "2", 60,
               "HAProxy down to its master and one worker after the reload (the old worker "
               "stopped)")
    procs = sandbox_exec("pgrep -c -f '^/usr/sbin/haproxy .*/etc/beekeeper/gateway/'",
                         SECOND)
    assert procs.stdout.strip() == "2", procs.stdout  # the master and one worker
    # and the next deploy changes nothing
    again = gw_deploy()
    hosts, success, error, no_change = grand_total(again.out)
    assert (success, error) == ("-", "-"), again.out[-3000:]


def test_a_gateway_that_cannot_serve_its_new_config_goes_back_to_the_old_one(gw_url, setup):
    """A config `haproxy -c` accepts can still fail to serve (its port is taken: `-c` binds
    nothing). The deploy fails, and the gateway that worked before goes on working, on the
    config it had, also after a restart."""
    path = Path(os.environ["BEEKEEPER_GATEWAY_LAYOUT"])
    good = json.loads(path.read_text())
    before = sandbox_exec("cat /etc/beekeeper/gateway/haproxy.cfg", SECOND).stdout
    bad = json.loads(json.dumps(good))
    bad["b"]["gateway"]["port"] = 22  # sshd's port on that host
    _write_layout(bad)
    try:
        run = gw_deploy()
    finally:
        _write_layout(good)
    assert run.rc != 0, run.out[-3000:]
    assert "put the previous gateway config back and restarted on it" in run.out, \
        run.out[-3000:]
    assert sandbox_exec("cat /etc/beekeeper/gateway/haproxy.cfg", SECOND).stdout == before
    assert chat(gw_url, setup.gw, "cpu-tiny").status_code == 200
    again = gw_deploy()
    assert again.rc == 0, again.out[-3000:]
    assert chat(gw_url, setup.gw, "cpu-tiny").status_code == 200
