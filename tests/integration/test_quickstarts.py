"""
The quickstarts followed on the sandbox hosts as written (issue 43): each page's copy-paste
commands, taken from the page (tests/unit/test_readme.py's extraction) in the page's order,
run with only what a sandbox host cannot be replaced. PLAN names, for every command of every
quickstart, the test that runs it or why none does; test_every_command_is_run_or_said_why
fails on a command the page gains that PLAN does not place. The fast tier checks the same
commands against the kit (tests/unit/test_quickstarts.py).

- docs/quickstart-ssh.md on the main sandbox host (Debian 12, systemd, Docker), reached as
  the page reaches a GPU box: a login `me` whose sudo asks no password, `BEEKEEPER_HOSTS=
  gpu-box.lan pyinfra inventories/home.py deploy.py --ssh-user me --sudo` (the dry run, then
  the deploy, answering pyinfra's question), `ssh me@… sudo -n true`, the tunnel and the first
  request through it, `beekeeper verify --on-host --ssh me@…`. Its step 7 (the family: two
  models behind one keyed gateway) deploys there as the page writes it, in the slow tier.
- docs/quickstart-pod.md on the pod sandbox host (PID 1 sshd, no systemd, no Docker, no apt
  lists, a /workspace volume): the kit inside the pod (@local through
  inventories/gpu-container.py and the page's variables), the user's own GGUF on the volume
  under its alias, the first request in the pod and through a tunnel from outside, the keyed
  bind of step 6 reached over the network, verify run in the pod.
- docs/quickstart-wsl2.md: a Windows machine; nothing of it runs here (PLAN says why, line
  by line). Its @local deploy is the pod's in form, without --sudo.

What a sandbox replaces (SUBSTITUTED): the GPU profiles by the CPU ones (q8-turbo4-64k ->
cpu-tiny, q4km-f16-32k -> cpu-smollm); gpu-box.lan and the pod's address by the sandbox
host's SSH (its port, key and pinned host key: `--data` for pyinfra, ssh options for ssh);
the network's source and models by the tier's stand-ins (the pod: the CPU source tarball as
BEEKEEPER_SOURCE, the variable gpu-containers.md gives for an offline pod); a local port the
controller has free for 8083; verify's `--suite all` by `--suite smoke --quick` (the full
suites on cpu-tiny: test_deploy.py and the slow tier). The one server image the tier builds
is used everywhere: the pod gets its two binaries where its native build would put them, as
test_pod.py does. Nothing here builds llama.cpp a second time.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from beekeeper import sandbox
from beekeeper.core.cache import CPU_SOURCE_REF, cpu_source_tarball, pypi_model
from beekeeper.core.paths import DEFAULT_PORT, NATIVE_PREFIX
from beekeeper.core.profiles import PROFILES
from tests.unit.harness import ENV_PREFIX, page_commands, python_blocks

from . import helpers
from .helpers import BIN, ROOT, deploy, sandbox_exec, wait_until

pytestmark = pytest.mark.integration

SSH_PAGE, POD_PAGE, WSL_PAGE = "quickstart-ssh.md", "quickstart-pod.md", "quickstart-wsl2.md"
GPU_TO_CPU = {"q8-turbo4-64k": "cpu-tiny", "q4km-f16-32k": "cpu-smollm"}
CHECKS_ELSEWHERE = "tests/unit/test_setup_script.py runs the script (its macOS path too)"

SSH_T = "test_ssh_quickstart_on_the_sandbox_host"
FAMILY_T = "test_the_family_example_deploys_on_debian_12"
POD_T = "test_pod_quickstart_in_the_pod"

# Every command of each page, by a pattern of its text: the test that runs it, or why none does
PLAN: dict[str, list[tuple[str, str]]] = {
    SSH_PAGE: [
        (r"^cd beekeeper$", "not run: the tests run in this checkout"),
        (r"^\./scripts/setup\.sh$", f"not run: this checkout's .venv is its "
                                    f"own; {CHECKS_ELSEWHERE}"),
        (r"^\. \.venv/bin/activate$", "not run: the tests call .venv/bin's programs by path"),
        (r"^beekeeper profiles$", SSH_T),
        (r"^brew install ", "not run: macOS's package manager"),
        (r"^PYTHON=python3\.12 \./scripts/setup\.sh$", f"not run: macOS; {CHECKS_ELSEWHERE}"),
        (r"^ssh-copy-id ", "not run: the sandbox takes keys only; the fixture puts the key in "
                           "place as ssh-copy-id would"),
        (r"^ssh me@gpu-box\.lan sudo -n true$", SSH_T),
        (r"^BEEKEEPER_HOSTS=gpu-box\.lan pyinfra inventories/home\.py deploy\.py --ssh-user me "
         r"--sudo( --dry)?$", SSH_T),
        (r"--data upgrade_driver=true", "not run: no NVIDIA driver on a CPU sandbox host (the "
                                        "driver's refusals and plans: the fast tier's "
                                        "test_driver_preflight_rules.py)"),
        (r"^ssh -N -L 8083:127\.0\.0\.1:8083 me@gpu-box\.lan$",
         SSH_T),
        (r"^curl -s http://127\.0\.0\.1:8083/", SSH_T),
        (r"^beekeeper verify --on-host --ssh me@gpu-box\.lan ",
         SSH_T),
        (r"^mkdir -p keys && openssl rand ", FAMILY_T),
        (r"^pyinfra inventories/family\.py deploy\.py", FAMILY_T),
        (r"^curl -s http://192\.168\.1\.50:4000/", FAMILY_T),
    ],
    POD_PAGE: [
        (r"^nvidia-smi$", "not run: no GPU on the sandbox"),
        (r"^mkdir -p /workspace/src && cd /workspace/src$", POD_T),
        (r"^cd beekeeper$", POD_T),
        (r"^\./scripts/setup\.sh$", "not run: the pod sandbox has no apt lists and its python3 "
                                    "no venv module's pip (as many images); the fixture makes "
                                    f".venv from the controller's packages; {CHECKS_ELSEWHERE}"),
        (r"^\. \.venv/bin/activate$", POD_T),
        (r"^chmod o\+x /workspace ", POD_T),
        (r"^beekeeper plan --profile \S+ --gguf ", POD_T),
        (r"^export BEEKEEPER_", POD_T),
        (r"^export -p \| grep ' BEEKEEPER_' > /workspace/beekeeper\.env$",
         "not run: it keeps step 3's variables on the pod's volume; the fast tier writes and "
         "reads them back with bash (tests/unit/test_quickstarts.py)"),
        (r"^pyinfra (-y )?inventories/gpu-container\.py deploy\.py", POD_T),
        (r"^curl -s http://127\.0\.0\.1:8083/", POD_T),
        (r"^ssh -N -L 8083:127\.0\.0\.1:8083 root@", POD_T),
        (r"^mkdir -p /workspace/keys && openssl rand ", POD_T),
        (r"^beekeeper verify --on-host --suite all( --api-key-file \S+)?$", POD_T),
    ],
    WSL_PAGE: [
        (r"^nvidia-smi$", "not run: no GPU, and the page's is WSL's (the Windows driver's)"),
        (r"^sudo sh -c 'printf .*wsl\.conf'$", "not run: WSL's own configuration"),
        (r"^wsl\.exe ", "not run: a Windows command"),
        (r"^systemctl is-system-running$", "not run: WSL's systemd (the sandbox host's runs "
                                           "the same units: the SSH page's test)"),
        (r"^cd beekeeper$", "not run: the tests run in this checkout"),
        (r"^\./scripts/setup\.sh$", f"not run: {CHECKS_ELSEWHERE}"),
        (r"^\. \.venv/bin/activate$", "not run: the tests call .venv/bin's programs by path"),
        (r"^beekeeper profiles$", "not run here: the fast tier runs it (test_readme.py)"),
        (r"^BEEKEEPER_HOSTS=@local pyinfra inventories/home\.py deploy\.py --sudo",
         "not run: @local is WSL itself; the pod's test runs the @local form, and the SSH "
         "page's the same deploy with --sudo"),
        (r"^curl -s http://127\.0\.0\.1:8083/", "not run: a GPU profile's server on WSL (the "
                                                "same line runs in the SSH page's test)"),
        (r"^beekeeper verify --on-host --suite all$", "not run: on WSL (the pod's test runs "
                                                      "this line's @local form)"),
    ],
}


def placed(page: str) -> list[tuple[str, str]]:
    """(command, where) for every command of the page, by PLAN's first pattern it matches."""
    out = []
    for text in page_commands(page):
        where = next((w for pattern, w in PLAN[page] if re.search(pattern, text)), None)
        assert where, f"{page}: `{text}` is in no PLAN entry: run it in a test or say why not"
        out.append((text, where))
    return out


def followed(page: str, pattern: str, test: str) -> list[str]:
    """The page's commands PLAN gives to `test` that match `pattern`, as written (at least
    one: a pattern that finds none means the page changed)."""
    found = [t for t, where in placed(page) if where == test and re.search(pattern, t)]
    assert found, f"{page}: no command matching {pattern!r} for {test}"
    return found


@pytest.mark.parametrize("page", [SSH_PAGE, POD_PAGE, WSL_PAGE])
def test_every_command_is_run_or_said_why(page):
    here = {n for n in globals() if n.startswith("test_")}
    for text, where in placed(page):
        assert where.startswith("not run") or where in here, f"{page}: `{text}`: {where}"
    # and every pattern still finds its command (a stale entry hides nothing)
    for pattern, _where in PLAN[page]:
        assert any(re.search(pattern, t) for t in page_commands(page)), (page, pattern)


# --- what a sandbox replaces ------------------------------------------------------------------

def cpu_profiles(text: str) -> str:
    for gpu, cpu in GPU_TO_CPU.items():
        text = text.replace(gpu, cpu)
    return text


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ssh_as(user: str, name: str | None = None) -> list[str]:
    """ssh's options that reach a sandbox host as `user` (its port, key, pinned host key)."""
    opts = sandbox.ssh_options(sandbox.load_state(name))
    assert opts[-1] == "root@127.0.0.1", opts
    return [*opts[:-1], f"{user}@127.0.0.1"]


def sandbox_data(name: str | None = None, drop: tuple[str, ...] = ("ssh_user",)) -> dict:
    """The sandbox host's connection and stand-in data (beekeeper.sandbox.inventory_host),
    what `gpu-box.lan` and the network stand for here."""
    return {k: v for k, v in sandbox.inventory_host(name)[1].items() if k not in drop}


def as_data_args(data: dict) -> list[str]:
    return [a for k, v in data.items() for a in ("--data", f"{k}={json.dumps(v)}")]


def run_pyinfra(text: str, *extra: str, cwd: Path = ROOT, answer: bool = True,
                timeout: int = 1800) -> helpers.Run:
    """A page's pyinfra line: its variables, its words, then `extra`; pyinfra's question
    before changes ("Press enter to execute...") answered with Enter on its standard input
    (`answer`), as a user would (any other input stops it, and it still exits 0)."""
    env_part, rest = ENV_PREFIX.match(text).groups()
    env = dict(a.split("=", 1) for a in env_part.split())
    words = shlex.split(rest)
    assert words[0] == "pyinfra", text
    if helpers.STANDINS is not None:
        helpers.STANDINS.ensure_tunnel()
    t0 = time.monotonic()
    p = subprocess.run([str(BIN / "pyinfra"), *words[1:], *extra], cwd=cwd,
                       env={**os.environ, **env}, input="\n" if answer else "",
                       capture_output=True, text=True, timeout=timeout)
    return helpers.Run(p.returncode, p.stdout + p.stderr, time.monotonic() - t0)


def reply_text(stdout: str) -> str:
    reply = json.loads(stdout)
    text = reply["choices"][0]["message"]["content"]
    assert isinstance(text, str) and text.strip(), reply
    return text


class Tunnel:
    """A page's `ssh -N -L 8083:127.0.0.1:8083 WHO` with the sandbox's options for WHO and a
    free local port for the first 8083; `.port` is that local port."""

    def __init__(self, text: str, who: str, options: list[str]):
        words = shlex.split(text)
        assert words[:3] == ["ssh", "-N", "-L"] and who in words, text
        self.port = free_port()
        forward = words[3].replace(f"{DEFAULT_PORT}:", f"{self.port}:", 1)
        rest = [w for w in words[4:] if w != who]
        if "-p" in rest:  # the provider's port, which the options give here
            i = rest.index("-p")
            del rest[i:i + 2]
        assert rest == [], text
        self.proc = subprocess.Popen(["ssh", "-N", "-o", "ExitOnForwardFailure=yes", "-L",
                                      forward, *options], stdin=subprocess.DEVNULL)
        wait_until(self._open, 30, "the page's tunnel to listen")

    def _open(self) -> bool:
        assert self.proc.poll() is None, "the tunnel's ssh exited"
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", self.port)) == 0

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


# --- docs/quickstart-ssh.md on the main sandbox host ----------------------------------------

@pytest.fixture(scope="module")
def me_on_the_box(fresh_sandbox) -> Iterator[list[str]]:
    """Step 2's state of the host: a login `me` that takes the controller's key, whose sudo
    asks no password (the page's sudoers line). Removed afterwards. Yields ssh's options."""
    setup = ("id me >/dev/null 2>&1 || useradd -m -s /bin/bash me; "
             "install -d -m 700 -o me -g me /home/me/.ssh; "
             "install -m 600 -o me -g me /root/.ssh/authorized_keys /home/me/.ssh/authorized_keys; "
             "echo 'me ALL=(ALL) NOPASSWD: ALL' > /etc/sudoers.d/me; chmod 440 /etc/sudoers.d/me")
    p = sandbox_exec(setup)
    assert p.returncode == 0, p.stderr
    yield ssh_as("me")
    sandbox_exec("rm -f /etc/sudoers.d/me; pkill -u me; userdel -r me 2>/dev/null; true")


def test_ssh_quickstart_on_the_sandbox_host(me_on_the_box, tmp_path):
    me = me_on_the_box
    test = "test_ssh_quickstart_on_the_sandbox_host"
    (profiles,) = followed(SSH_PAGE, r"^beekeeper profiles$", test)
    p = subprocess.run([str(BIN / "beekeeper"), *shlex.split(profiles)[1:]], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and "q8-turbo4-64k" in p.stdout, p.stderr

    (sudo_n,) = followed(SSH_PAGE, r"sudo -n true$", test)
    p = subprocess.run(["ssh", *me, *shlex.split(sudo_n)[2:]], capture_output=True, text=True,
                       timeout=60)
    assert (p.returncode, p.stdout) == (0, ""), p.stderr  # "prints nothing and exits 0"

    dry, real = followed(SSH_PAGE, r"^BEEKEEPER_HOSTS=", test)
    assert dry.endswith(" --dry") and not real.endswith(" --dry")
    extra = as_data_args(sandbox_data())
    run = run_pyinfra(dry, *extra)
    assert run.rc == 0, run.out[-4000:]
    assert "[gpu-box.lan]" in run.out and "Loading: deploy.py" in run.out
    run = run_pyinfra(real, *extra)
    print(f"\n[figure] the SSH quickstart's deploy on the sandbox host: {run.wall_s:.0f} s")
    assert run.rc == 0, run.out[-4000:]
    assert helpers.healthy(), run.out[-4000:]
    # the deploy went through sudo as `me`: the record is root's, the login stayed `me`'s
    d = json.loads(sandbox_exec("cat /etc/beekeeper/llm/deployed.json").stdout)
    assert d["profile"] == "cpu-tiny" and d["port"] == DEFAULT_PORT

    (tunnel_line,) = followed(SSH_PAGE, r"^ssh -N -L ", test)
    (curl,) = followed(SSH_PAGE, r"^curl ", test)
    tunnel = Tunnel(tunnel_line, "me@gpu-box.lan", me)
    try:
        p = subprocess.run(["bash", "-c", cpu_profiles(curl).replace(
            f"127.0.0.1:{DEFAULT_PORT}", f"127.0.0.1:{tunnel.port}")],
            capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr
        print(f"[figure] the SSH quickstart's first reply: {reply_text(p.stdout)!r}")
    finally:
        tunnel.close()

    (verify,) = followed(SSH_PAGE, r"^beekeeper verify ", test)
    words = shlex.split(verify.replace("--suite all", "--suite smoke --quick"))
    i = words.index("me@gpu-box.lan")
    words[i] = shlex.join(me)
    p = subprocess.run([str(BIN / "beekeeper"), *words[1:], "--out", str(tmp_path)], cwd=ROOT,
                       capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    # the verdict, then (from the host) where the report came back to
    *_, verdict, back = p.stdout.strip().splitlines()
    assert verdict.startswith("verify PASSED") and back.startswith("[verify] report: "), \
        p.stdout[-2000:]
    assert list(tmp_path.rglob("report.json")), "the report did not come back"


# --- step 7: the family example, two models behind one keyed gateway -------------------------

def family_farm(tmp: Path) -> Path:
    """A folder to run the page's family lines in, as in a checkout: the kit's files linked,
    and inventories/family.py as the page writes it, the sandbox host in place of gpu-box.lan
    (appended after the page's own lines, which stay as written)."""
    farm = tmp / "beekeeper"
    farm.mkdir()
    for entry in ROOT.iterdir():
        if entry.name not in ("inventories", "keys", ".git", ".sandbox"):
            (farm / entry.name).symlink_to(entry)
    (farm / "inventories").mkdir()
    (block,) = [b for b in python_blocks(SSH_PAGE) if "inventories/family.py" in b]
    address = subprocess.run(
        ["docker", "inspect", "-f", f"{{{{(index .NetworkSettings.Networks \"{sandbox.NETWORK}\")"
         ".IPAddress}}", sandbox.CONTAINER], capture_output=True, text=True).stdout.strip()
    assert address, "the sandbox host has no address on the sandboxes' network"
    connect = sandbox_data(drop=("ssh_user", "profile"))
    (farm / "inventories" / "family.py").write_text(
        block + "\n# --- the sandbox host in place of gpu-box.lan (tests/integration/"
        "test_quickstarts.py)\nimport json as _json\n"
        f"_connect = _json.loads({json.dumps(json.dumps(connect))})\n"
        f"_cpu = {GPU_TO_CPU!r}\n"
        "for _name, _data in gpu_boxes:\n"
        "    _data.update(_connect)\n"
        "    for _svc in _data['services']:\n"
        "        _svc['profile'] = _cpu[_svc['profile']]\n"
        f"    _data['gateway']['bind_address'] = {address!r}\n")
    return farm


@pytest.fixture
def family_on_the_box(me_on_the_box, tmp_path) -> Iterator[tuple[Path, str]]:
    """The family deployed over the main host's single service; afterwards the host as the
    tier's other modules know it: the gateway's unit and files removed (a deploy without the
    role leaves them), the sandbox inventory deployed again (its `llm`, the family's two
    services removed)."""
    farm = family_farm(tmp_path)
    yield farm, re.search(r"_data\['gateway'\]\['bind_address'\] = '([\d.]+)'",
                          (farm / "inventories" / "family.py").read_text()).group(1)
    sandbox_exec("systemctl disable --now beekeeper-gateway.service; "
                 "rm -rf /etc/systemd/system/beekeeper-gateway.service /etc/beekeeper/gateway; "
                 "systemctl daemon-reload")
    back = deploy()
    assert back.rc == 0, back.out[-3000:]


# Slow tier: HAProxy from Debian's archive, a second model and two servers on the 2-core host
# (about two minutes beside the main tier's single service), and a redeploy of the sandbox
# inventory after it; no second build (the tier's image serves both).
@pytest.mark.slow
def test_the_family_example_deploys_on_debian_12(family_on_the_box):
    farm, address = family_on_the_box
    test = "test_the_family_example_deploys_on_debian_12"
    (key_line,) = followed(SSH_PAGE, r"^mkdir -p keys ", test)
    p = subprocess.run(["bash", "-c", key_line], cwd=farm, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    key_file = farm / "keys" / "family.key"
    assert oct(key_file.stat().st_mode & 0o777) == "0o600"
    key = key_file.read_text().strip()

    dry, real = followed(SSH_PAGE, r"^pyinfra inventories/family\.py ", test)
    run = run_pyinfra(dry, cwd=farm)
    assert run.rc == 0, run.out[-4000:]
    run = run_pyinfra(real, cwd=farm)
    print(f"\n[figure] the family example's deploy (two services, the gateway): "
          f"{run.wall_s:.0f} s")
    assert run.rc == 0, run.out[-4000:]
    assert "removed service llm" in run.out, run.out[-3000:]
    for port in (8083, 8084):  # both servers on the host's loopback only
        assert f"127.0.0.1:{port}" in helpers.port_listener(port), helpers.port_listener(port)
    assert sandbox_exec("systemctl is-active beekeeper-gateway.service").stdout.strip() == \
        "active"

    models_line, chat_line = followed(SSH_PAGE, r"^curl -s http://192\.168\.1\.50:4000/", test)
    wait_until(lambda: httpx.get(f"http://{address}:4000/v1/models", timeout=5,
                                 headers={"Authorization": f"Bearer {key}"}).status_code == 200,
               60, "the gateway to list the models")
    for line, check in ((models_line, "models"), (chat_line, "chat")):
        cmd = cpu_profiles(line).replace("192.168.1.50", address)
        p = subprocess.run(["bash", "-c", cmd], cwd=farm, capture_output=True, text=True,
                           timeout=300)
        assert p.returncode == 0, p.stderr
        if check == "models":
            ids = {m["id"] for m in json.loads(p.stdout)["data"]}
            assert ids == set(GPU_TO_CPU.values()), p.stdout
        else:
            # the page's request names q4km-f16-32k: the qwen-fast server answers
            assert json.loads(p.stdout)["model"] == GPU_TO_CPU["q4km-f16-32k"], p.stdout
            print(f"[figure] the family's first reply through the gateway: "
                  f"{reply_text(p.stdout)!r}")
    # "A request without the key, or with a wrong one, is a 401"
    for headers in ({}, {"Authorization": "Bearer wrong"}):
        r = httpx.get(f"http://{address}:4000/v1/models", headers=headers, timeout=10)
        assert r.status_code == 401, (headers, r.status_code)


# --- docs/quickstart-pod.md inside the pod sandbox host ---------------------------------------

POD = f"{sandbox.CONTAINER}-pod"  # test_pod.py's host: made new here, as there
POD_SSH_PORT = sandbox.DEFAULT_SSH_PORT + 5
KIT = "/workspace/src/beekeeper"
OWN_MODEL = "/workspace/models/my-finetune-Q8_0.gguf"  # the page's file name
SOURCE = "/workspace/llama-src.tar.gz"
# the controller's packages the kit does not need in the pod (type checker, plots, ...)
NOT_CARRIED = ("a1_coverage.pth", "mypy*", "*__mypyc*", "matplotlib*",
               "fontTools*", "ruff*", "mutmut*", "pip", "pip-*", "_pytest", "pytest*")


def pod_exec(cmd: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", "exec", POD, "bash", "-c", cmd], capture_output=True,
                          text=True, **kw)


def _carry_the_kit() -> None:
    """The page's clone and set-up, as an offline pod gets them: this checkout's files (what
    git tracks and what it does not ignore) in /workspace/src/beekeeper, and .venv made with
    the pod's python3 and the controller's packages (the kit's editable install pointed at
    the pod's checkout), with pyinfra and beekeeper in .venv/bin."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT,
                           capture_output=True, check=True).stdout
    assert pod_exec(f"mkdir -p {KIT}").returncode == 0
    pack = subprocess.Popen(["tar", "-c", "--null", "-T", "-", "-f", "-"], cwd=ROOT,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    unpack = subprocess.Popen(["docker", "exec", "-i", POD, "tar", "-x", "-C", KIT],
                              stdin=pack.stdout)
    assert pack.stdin is not None
    pack.stdin.write(files)
    pack.stdin.close()
    assert unpack.wait(120) == 0 and pack.wait(120) == 0
    p = pod_exec(f"python3 -m venv --without-pip {KIT}/.venv && {KIT}/.venv/bin/python -c "
                 "'import sys; print(\"%d.%d\" % sys.version_info[:2])'")
    assert p.returncode == 0 and p.stdout.strip() == "3.11", (p.stdout, p.stderr)
    site = ROOT / ".venv" / "lib" / "python3.11" / "site-packages"
    excludes = [a for x in NOT_CARRIED for a in ("--exclude", f"./{x}")]
    dest = f"{KIT}/.venv/lib/python3.11/site-packages"
    p = subprocess.run(f"tar -C {shlex.quote(str(site))} {shlex.join(excludes)} -c . | "
                       f"docker exec -i {POD} tar -x -C {dest}", shell=True,
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    scripts = "".join(
        f"printf '%s\\n' {shlex.quote(f'#!{KIT}/.venv/bin/python3')} "
        f"{shlex.quote(''.join((ROOT / '.venv' / 'bin' / name).read_text().splitlines(True)[1:]))}"
        f" > {KIT}/.venv/bin/{name} && chmod 755 {KIT}/.venv/bin/{name} && "
        for name in ("pyinfra", "beekeeper"))
    # the editable install's finder, pointed at the pod's checkout instead of this one
    finder = f"{dest}/__editable___beekeeper_0_1_0_finder.py"
    p = pod_exec(f"sed -i 's#{ROOT}/#{KIT}/#g' {finder} && {scripts}"
                 f"{KIT}/.venv/bin/beekeeper --version && {KIT}/.venv/bin/pyinfra --version")
    assert p.returncode == 0, p.stdout + p.stderr


@pytest.fixture(scope="module")
def pod_sandbox(fresh_sandbox) -> Iterator[str]:
    """The pod host, new, with the user's GGUF on its volume (readable by root only, as an
    upload leaves it: the page's chmod makes it the server's), the kit carried in, and the
    tier's server image built on the main host (the pod gets its binaries). Yields the image
    tag of the main host's build."""
    tag = sandbox_exec("docker images --format '{{.Repository}}:{{.Tag}}' "
                       f"{helpers.SERVER_REPO} | head -n 1").stdout.strip()
    if not tag:
        first = deploy()  # the tier's one build, when no module has made it yet
        assert first.rc == 0, first.out[-3000:]
        tag = json.loads(sandbox_exec("cat /etc/beekeeper/llm/deployed.json").stdout)["image"]
    sandbox.down(purge=True, name=POD)
    sandbox.up(ssh_port=POD_SSH_PORT, name=POD, init="sshd")
    model = pypi_model(PROFILES["cpu-tiny"].model)
    assert pod_exec("mkdir -p /workspace/models && chmod 700 /workspace/models").returncode == 0
    subprocess.run(["docker", "cp", str(model), f"{POD}:{OWN_MODEL}"], check=True)
    subprocess.run(["docker", "cp", str(cpu_source_tarball()), f"{POD}:{SOURCE}"], check=True)
    pod_exec(f"chown root:root {OWN_MODEL} {SOURCE} && chmod 600 {OWN_MODEL} && "
             "chmod 700 /workspace")
    t0 = time.monotonic()
    _carry_the_kit()
    print(f"\n[pod] {time.monotonic() - t0:.0f} s: the kit carried in")
    yield tag
    if os.environ.get("BEEKEEPER_TEST_REUSE_SANDBOX") != "1":  # kept to look at, re-runs
        sandbox.down(purge=True, name=POD)


class PodShell:
    """The page's commands in the pod, one `docker exec` each, in one shell's state: the
    folder the page's `cd` lines left, the venv it activated, the variables it exported
    (`keep`: said again before each later command, so only lines that change the shell and
    nothing else; `once`: a line that acts, run once)."""

    def __init__(self):
        self.state: list[str] = []

    def keep(self, cmd: str) -> None:
        assert re.match(r"^(mkdir -p \S+ && )?(cd \S+|\. \S+|export [A-Z0-9_]+=.*)$", cmd), cmd
        self.once(cmd)
        self.state.append(cmd.split(" && ")[-1])

    def once(self, cmd: str) -> None:
        p = self.run(cmd)
        assert p.returncode == 0, (cmd, p.stdout, p.stderr)

    def run(self, cmd: str, timeout: int = 1800) -> subprocess.CompletedProcess:
        script = " && ".join([*self.state, cmd]) if self.state else cmd
        t0 = time.monotonic()
        p = pod_exec(script, timeout=timeout)
        if time.monotonic() - t0 >= 5:  # where the test's time goes
            print(f"\n[pod] {time.monotonic() - t0:.0f} s: {cmd[:70]}")
        return p


# the slow tier (CI time, issue 41): the pod's mechanics as a user meets them (supervisord,
# the volume, a restart, the keyed bind) stay in the main tier in test_pod.py; this follows
# the page's own lines in their order (a pod host of its own, two deploys and two verifies:
# 440 s on 2 busy cores)
@pytest.mark.slow
def test_pod_quickstart_in_the_pod(pod_sandbox, tmp_path):
    test = "test_pod_quickstart_in_the_pod"
    sh = PodShell()
    left = followed(POD_PAGE, r".", test)  # in the page's order

    def next_cmd(pattern: str) -> str:
        """The page's next command matching `pattern` (the page's order, but for verify's
        plain line, which runs before step 6's keyed bind, as the page says)."""
        i = next(i for i, c in enumerate(left) if re.search(pattern, c))
        assert pattern.startswith("^beekeeper verify") or i == 0, (pattern, left[:i + 1])
        return left.pop(i)

    sh.keep(next_cmd(r"^mkdir -p /workspace/src && cd /workspace/src$"))
    sh.keep(next_cmd(r"^cd beekeeper$"))  # the clone: carried in by the fixture
    sh.keep(next_cmd(r"^\. \.venv/bin/activate$"))
    sh.once(next_cmd(r"^chmod o\+x "))
    p = sh.run(cpu_profiles(next_cmd(r"^beekeeper plan ")))
    assert p.returncode == 0 and "cpu-tiny" in p.stdout, p.stdout + p.stderr
    for _ in range(5):
        sh.keep(cpu_profiles(next_cmd(r"^export BEEKEEPER_")))
    # the offline pod's source (gpu-containers.md): the tier's CPU tree, no git fetch
    sh.keep(f"export BEEKEEPER_SOURCE={SOURCE}")
    sh.keep(f"export BEEKEEPER_SOURCE_REF={CPU_SOURCE_REF}")

    dry = next_cmd(r"deploy\.py --dry$")
    p = sh.run(dry)
    assert p.returncode == 0, (p.stdout + p.stderr)[-4000:]
    out = p.stdout + p.stderr  # pyinfra writes its lines to stderr
    built = re.search(r"Build llama-server (\S+) natively", out)
    assert built, out[-4000:]
    helpers.place_the_build(pod_sandbox, POD, f"{NATIVE_PREFIX}/{built.group(1)}")
    t0 = time.monotonic()
    p = sh.run(next_cmd(r"^pyinfra -y inventories/gpu-container\.py deploy\.py$"))
    print(f"\n[figure] the pod quickstart's deploy in the pod (@local, shared build): "
          f"{time.monotonic() - t0:.0f} s")
    assert p.returncode == 0, (p.stdout + p.stderr)[-4000:]
    out = p.stdout + p.stderr
    assert re.search(rf"Build llama-server {re.escape(built.group(1))} natively .*\n\s+"
                     r"\[@local\] No changes", out), out[-3000:]
    assert "/workspace/beekeeper" in out  # the persistent root preflight names

    curl = next_cmd(r"^curl -s http://127\.0\.0\.1:8083/")
    assert '"model": "my-finetune"' in curl  # the alias the page exported, sent as written
    p = sh.run(curl, timeout=300)
    assert p.returncode == 0, p.stderr
    print(f"[figure] the pod quickstart's first reply: {reply_text(p.stdout)!r}")
    models = json.loads(sh.run("curl -s http://127.0.0.1:8083/v1/models").stdout)
    assert [m["id"] for m in models["data"]] == ["my-finetune"], models

    tunnel = Tunnel(next_cmd(r"^ssh -N -L "), "root@203.0.113.7", ssh_as("root", POD))
    try:  # "from your own machine": the same request through the provider's SSH
        p = subprocess.run(["bash", "-c", curl.replace(f"127.0.0.1:{DEFAULT_PORT}",
                                                       f"127.0.0.1:{tunnel.port}")],
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == 0 and reply_text(p.stdout), p.stderr
    finally:
        tunnel.close()

    verify = next_cmd(r"^beekeeper verify --on-host --suite all$")  # before step 6: no key
    p = sh.run(verify.replace("--suite all", "--suite smoke --quick") + " --out /tmp/reports",
               timeout=900)
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    assert "verify PASSED" in p.stdout.strip().splitlines()[-1], p.stdout[-2000:]

    # step 6: the keyed bind, then the same deploy; the pod image has no openssl (a RunPod
    # image does): Python's secrets makes the same 64 hex characters
    key_line = next_cmd(r"^mkdir -p /workspace/keys && openssl rand ")
    sh.once(key_line.replace("openssl rand -hex 32",
                             "python3 -c 'import secrets; print(secrets.token_hex(32))'"))
    sh.keep(next_cmd(r"^export BEEKEEPER_BIND_ADDRESS=0\.0\.0\.0$"))
    sh.keep(next_cmd(r"^export BEEKEEPER_API_KEY_FILE="))
    p = sh.run(next_cmd(r"^pyinfra -y inventories/gpu-container\.py deploy\.py$"))
    assert p.returncode == 0, (p.stdout + p.stderr)[-4000:]
    key = pod_exec("cat /workspace/keys/api.key").stdout.strip()
    address = subprocess.run(
        ["docker", "inspect", "-f", f"{{{{(index .NetworkSettings.Networks \"{sandbox.NETWORK}\")"
         ".IPAddress}}", POD], capture_output=True, text=True).stdout.strip()
    url = f"http://{address}:{DEFAULT_PORT}/v1/models"
    assert httpx.get(url, timeout=10).status_code == 401  # the network, without the key
    r = httpx.get(url, headers={"Authorization": f"Bearer {key}"}, timeout=10)
    assert r.status_code == 200 and r.json()["data"][0]["id"] == "my-finetune", r.text

    verify = next_cmd(r"^beekeeper verify --on-host --suite all --api-key-file ")
    p = sh.run(verify.replace("--suite all", "--suite smoke --quick") + " --out /tmp/reports",
               timeout=900)
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    assert "verify PASSED" in p.stdout.strip().splitlines()[-1], p.stdout[-2000:]
    assert left == []  # every command of the page was reached
