"""
GPU stack provisioning on the sandbox host, from a signed local apt repository that holds
stand-in packages under NVIDIA's names (NVIDIA's repositories cannot be reached here). A
stand-in nvidia-smi, installed by this test only, feeds the GPU facts.
"""

import json
import re
import subprocess

import pytest

from beekeeper.core import cudacompat
from beekeeper.core.config import group_all, load_host_config
from beekeeper.core.distro import headers_meta
from beekeeper.sandbox import CONTAINER

from . import aptrepo
from .helpers import deploy, grand_total, results, sandbox_exec

pytestmark = pytest.mark.integration

FAKE_SMI = """#!/bin/sh
# stand-in nvidia-smi (tests only): an RTX 4090 on driver 596.21 / CUDA 13.2
case "$*" in
  *--query-gpu*) echo "NVIDIA GeForce RTX 4090, 596.21, 8.9, 24564" ;;
  *) echo "| NVIDIA-SMI 596.21    Driver Version: 596.21    CUDA Version: 13.2 |" ;;
esac
"""
REPOS = json.dumps({"toolkit": "http://127.0.0.1:8799/toolkit",
                    "toolkit_key": "http://127.0.0.1:8799/gpgkey"})
# the branch the kit installs for the cuda_version every host gets
BRANCH = int(cudacompat.branch_for_cuda(load_host_config(group_all()).data.cuda_version)
             or 0)
ARGS = ("--data", "profile=q8-turbo4-64k", "--data", 'stages=["provision"]',
        "--data", f"nvidia_repos={REPOS}")


@pytest.fixture(scope="module")
def gpu_host(fresh_sandbox, tmp_path_factory):
    kernel = sandbox_exec("uname -r").stdout.strip()
    os_release = dict(line.split("=", 1) for line in sandbox_exec(
        ". /etc/os-release; echo id=$ID").stdout.split())
    repo = aptrepo.build(tmp_path_factory.mktemp("apt") / "repo",
                         tmp_path_factory.mktemp("gnupg"), kernel_release=kernel,
                         headers_meta=headers_meta(os_release, kernel), branch=BRANCH)
    subprocess.run(["docker", "cp", str(repo), f"{CONTAINER}:/srv/aptrepo"], check=True)
    sandbox_exec("nohup python3 -m http.server 8799 --bind 127.0.0.1 --directory /srv/aptrepo "
                 ">/dev/null 2>&1 &")
    sandbox_exec(f"cat > /usr/local/bin/nvidia-smi <<'EOF'\n{FAKE_SMI}EOF\n"
                 "chmod 755 /usr/local/bin/nvidia-smi")
    # what a user may have: a daemon.json of their own, and a legacy list file
    sandbox_exec("mkdir -p /etc/docker && [ -f /etc/docker/daemon.json ] || "
                 "echo '{\"log-opts\": {\"max-size\": \"10m\"}}' > /etc/docker/daemon.json; "
                 "echo '# legacy' > /etc/apt/sources.list.d/nvidia-docker.list")
    yield
    sandbox_exec("rm -f /usr/local/bin/nvidia-smi; pkill -f 'http.server 8799'")


# another package manager at work, as unattended-upgrades is on a freshly booted box: dpkg's
# lock held (fcntl, as dpkg takes it) until the kit's wait for it runs, at most 300 s
BUSY_APT = """
import fcntl, os, time
f = open("/var/lib/dpkg/lock-frontend", "w")
fcntl.lockf(f, fcntl.LOCK_EX)
state = open("/run/apt-busy.state", "w", buffering=1)
state.write("held\\n")
mark, t0 = b"bk_w" + b"=0", time.time()
while time.time() - t0 < 300:
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            seen = mark in open(f"/proc/{pid}/cmdline", "rb").read()
        except OSError:
            seen = False
        if seen:
            state.write("released: the kit was waiting\\n")
            raise SystemExit
    time.sleep(0.2)
"""


def test_container_toolkit_from_the_signed_repo_while_apt_is_busy_then_nothing_changes(
        gpu_host):
    sandbox_exec(f"cat > /run/apt-busy.py <<'EOF'\n{BUSY_APT}EOF\n"
                 "nohup python3 /run/apt-busy.py >/dev/null 2>&1 & "
                 "for i in $(seq 50); do [ -s /run/apt-busy.state ] && break; sleep 0.1; done")
    assert sandbox_exec("cat /run/apt-busy.state").stdout == "held\n"
    run = deploy(*ARGS)
    assert run.rc == 0, run.out[-4000:]
    # the deploy met the held lock and waited for it (without the wait: "Could not get lock")
    assert sandbox_exec("cat /run/apt-busy.state").stdout.splitlines() == [
        "held", "released: the kit was waiting"]
    rows = results(run.out)
    for name in ("Add the NVIDIA Container Toolkit key (own keyring)",
                 "Add the NVIDIA Container Toolkit repository (signed-by)",
                 "Install the NVIDIA Container Toolkit 1.18.0-1 (pinned)",
                 "Hold the Container Toolkit packages at the pinned version",
                 "Register the nvidia runtime with Docker",
                 "Restart Docker to load the nvidia runtime",
                 "Remove legacy list file nvidia-docker.list"):
        assert rows[name][0] == "1", (name, rows.get(name))
    daemon = json.loads(sandbox_exec("cat /etc/docker/daemon.json").stdout)
    assert daemon["runtimes"]["nvidia"]["path"] == "nvidia-container-runtime"
    assert daemon["log-opts"] == {"max-size": "10m"}  # the user's key survived
    assert "nvidia" in sandbox_exec("docker info --format '{{json .Runtimes}}'").stdout
    holds = sandbox_exec("apt-mark showhold").stdout.split()
    assert {"nvidia-container-toolkit", "libnvidia-container1"} <= set(holds)
    # recorded for the uninstall, which releases the holds the kit set
    record = sandbox_exec("cat /etc/beekeeper/apt-holds").stdout.split()
    assert {"nvidia-container-toolkit", "libnvidia-container1"} <= set(record), record
    sources = sandbox_exec("cat /etc/apt/sources.list.d/nvidia-container-toolkit.sources").stdout
    assert "Signed-By: /etc/apt/keyrings/nvidia-container-toolkit.gpg" in sources
    assert sandbox_exec("test -e /etc/apt/sources.list.d/nvidia-docker.list").returncode == 1
    assert sandbox_exec("systemctl is-enabled nvidia-cdi-refresh.path").stdout.strip() == \
        "enabled"
    again = deploy(*ARGS)
    assert again.rc == 0, again.out[-3000:]
    assert grand_total(again.out)[1] == "-", again.out[-3000:]


def test_driver_older_than_the_image_cuda_is_refused_before_any_change(gpu_host):
    sandbox_exec("sed -i 's/596.21/570.86/g' /usr/local/bin/nvidia-smi")
    try:
        run = deploy(*ARGS)
        assert run.rc != 0
        assert "driver 570.86 is older than 580" in run.out
        assert "--> Starting operation" not in run.out
    finally:
        sandbox_exec("sed -i 's/570.86/596.21/g' /usr/local/bin/nvidia-smi")


CUDA_URL = "http://127.0.0.1:8799/cuda/"
CUDA_REPOS = json.dumps({"toolkit": "http://127.0.0.1:8799/toolkit",
                         "toolkit_key": "http://127.0.0.1:8799/gpgkey",
                         "cuda": CUDA_URL, "cuda_key": "http://127.0.0.1:8799/gpgkey"})
CUDA_ARGS = ("--data", "profile=q8-turbo4-64k", "--data", 'stages=["provision"]',
             "--data", "install_cuda_toolkit=true", "--data", f"nvidia_repos={CUDA_REPOS}")
KEYRING_LIST = "/etc/apt/sources.list.d/cuda-debian12-x86_64.list"


def test_an_existing_cuda_keyring_source_is_used_not_duplicated(gpu_host):
    # what NVIDIA's cuda-keyring package leaves: its own list file and keyring path for the
    # same repository URL and key the kit would add
    sandbox_exec("cp /srv/aptrepo/gpgkey.gpg /usr/share/keyrings/cuda-archive-keyring.gpg && "
                 "echo 'deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] "
                 f"{CUDA_URL} /' > {KEYRING_LIST}")
    run = deploy(*CUDA_ARGS)
    assert run.rc == 0, run.out[-4000:]
    rows = results(run.out)
    assert "Use the CUDA repository already configured (cuda-debian12-x86_64.list)" in rows, rows
    assert rows["Install the CUDA toolkit (cuda-toolkit-13-2 only)"][0] == "1", rows
    assert sandbox_exec("test -e /etc/apt/sources.list.d/nvidia-cuda.sources").returncode == 1
    assert sandbox_exec(f"test -e {KEYRING_LIST}").returncode == 0  # the user's source stays
    update = sandbox_exec("apt-get update")
    assert update.returncode == 0 and "Conflicting values" not in update.stderr, update.stderr
    assert "install ok installed" in sandbox_exec(
        "dpkg-query -W -f '${Status}' cuda-toolkit-13-2").stdout
    again = deploy(*CUDA_ARGS)
    assert again.rc == 0, again.out[-3000:]
    assert grand_total(again.out)[1] == "-", again.out[-3000:]


def test_docker_desktop_unit_is_valid_for_the_hosts_systemd(gpu_host, tmp_path):
    """The unit rendered for Docker Desktop's WSL integration (no docker.service there) is
    one systemd accepts: `systemd-analyze verify` on the sandbox host."""
    from beekeeper.core.config import load_host_config
    from beekeeper.core.runtime import runtime_of
    from beekeeper.tasks.service import render_unit

    cfg = load_host_config({"profile": "q8-turbo4-64k", "use_docker_desktop": True,
                            "source": {"git": "https://github.com/Anbeeld/beellama.cpp",
                                       "ref": "ba1fdce591f5a845cdbf6642767ecc1f8238519d"}})
    unit = render_unit(cfg, runtime_of(cfg.data.mode, cfg.requested_way.runtime), cfg.service,
                       "beekeeper/llama-server:x", "docker-desktop")
    assert "Requires=docker.service" not in unit
    path = tmp_path / "beekeeper-desktop-check.service"
    path.write_text(unit)
    subprocess.run(["docker", "cp", str(path), f"{CONTAINER}:/var/tmp/{path.name}"], check=True)
    check = sandbox_exec(f"systemd-analyze verify /var/tmp/{path.name}; echo rc=$?")
    assert "rc=0" in check.stdout, check.stdout + check.stderr
    sandbox_exec(f"rm -f /var/tmp/{path.name}")


DISTRO_SOURCE = "/etc/apt/sources.list.d/distro-stand-in.list"
UPGRADE_ARGS = ("--data", "profile=q8-turbo4-64k", "--data", 'stages=["provision"]',
                "--data", f"nvidia_repos={CUDA_REPOS}", "--data", "upgrade_driver=true")


def status(package: str) -> str:
    """dpkg's status and version of `package` on the sandbox host ("" when it never was)."""
    return sandbox_exec(f"dpkg-query -W -f '${{Status}} ${{Version}}' {package} "
                        "2>/dev/null").stdout.strip()


# the slow tier (CI time, issue 41): `upgrade_driver` is an opt-in of host data; its
# decisions are held in the unit tier (test_driver_preflight_rules.py, test_hosts_found.py),
# this one runs them through the host's real apt and dpkg (about 23 s on 2 cores)
@pytest.mark.slow
def test_upgrade_driver_replaces_debians_driver_with_the_pinned_branch(gpu_host):
    """A Debian 12 host as users have it: Debian's own driver (535, held by its user) and a
    package that needs its libcuda, installed with the host's real apt and dpkg. upgrade_driver
    first stops without purging anything, naming that package; once it is gone, purges
    Debian's driver, installs NVIDIA's at the pinned branch (not the newer one the
    repository also has), pins it without a hold and asks for the reboot; after the reboot it
    releases the driver holds an earlier kit recorded and otherwise leaves the
    driver alone."""
    # no NVIDIA repository yet (an earlier test of this module added one)
    sandbox_exec(f"rm -f {KEYRING_LIST} /etc/apt/sources.list.d/nvidia-cuda.sources "
                 "/usr/share/keyrings/cuda-archive-keyring.gpg; "
                 "mv /usr/local/bin/nvidia-smi /usr/local/bin/nvidia-smi.aside")
    sandbox_exec(f"echo 'deb [signed-by=/srv/aptrepo/gpgkey.gpg] http://127.0.0.1:8799/distro/ /' "
                 f"> {DISTRO_SOURCE}")
    try:
        setup = sandbox_exec("apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get "
                             "install -y -q nvidia-driver nvidia-cuda-dev && "
                             "apt-mark hold nvidia-driver")
        assert setup.returncode == 0, setup.stdout[-2000:] + setup.stderr[-2000:]
        assert aptrepo.DISTRO_DRIVER in sandbox_exec("nvidia-smi").stdout

        kept = deploy(*UPGRADE_ARGS)
        assert kept.rc != 0, kept.out[-3000:]
        assert "apt would remove: nvidia-cuda-dev" in kept.out, kept.out[-3000:]
        assert status("nvidia-driver") == f"hold ok installed {aptrepo.DISTRO_DEB}", \
            "purged anyway"

        assert sandbox_exec("apt-get purge -y -q nvidia-cuda-dev").returncode == 0
        run = deploy(*UPGRADE_ARGS)
        assert run.rc != 0, run.out[-3000:]  # stops for the reboot
        assert "NVIDIA driver installed; reboot the host" in run.out, run.out[-3000:]
        purge = f"Purge the installed NVIDIA driver ({aptrepo.DISTRO_DRIVER}, upgrade_driver)"
        assert re.search(rf"Starting operation: {re.escape(purge)} \n\s+\[sandbox\] Success",
                         run.out), run.out[-3000:]
        for gone in ("nvidia-driver", "nvidia-kernel-dkms"):
            assert "ok installed" not in status(gone), (gone, status(gone))
        pinned = f"{BRANCH}.21.01-1"
        carriers = ("nvidia-open", "nvidia-kernel-open-dkms", "libcuda1", "nvidia-smi")
        for package in carriers:  # pinned to the branch, not held: its updates can come in
            assert status(package) == f"install ok installed {pinned}", (package,
                                                                          status(package))
        assert "ok installed" in status(f"nvidia-driver-pinning-{BRANCH}")
        holds = set(sandbox_exec("apt-mark showhold").stdout.split())
        assert not holds & {*carriers, "nvidia-driver"}, holds
        # the pin, not a hold, keeps the newer branch the repository has out
        policy = sandbox_exec("apt-cache policy nvidia-open").stdout
        assert f"Candidate: {pinned}" in policy, policy
        assert f"Driver Version: {BRANCH}.21.01" in sandbox_exec("nvidia-smi").stdout

        # what an earlier beekeeper left: the driver's packages held, and recorded as its own
        sandbox_exec("apt-mark hold nvidia-open libcuda1 >/dev/null && mkdir -p /etc/beekeeper "
                     "&& printf '%s\\n' nvidia-open libcuda1 >> /etc/beekeeper/apt-holds")
        after = deploy(*UPGRADE_ARGS)  # the host rebooted: the new driver answers
        assert after.rc == 0, after.out[-3000:]
        assert "Starting operation: Purge the installed NVIDIA driver" not in after.out
        assert "Starting operation: Install the NVIDIA driver" not in after.out, after.out[-3000:]
        assert "Release the holds an earlier beekeeper set on 2 NVIDIA driver packages" in \
            after.out, after.out[-3000:]
        assert status("nvidia-open") == f"install ok installed {pinned}"
        assert status("libcuda1") == f"install ok installed {pinned}"
        record = sandbox_exec("cat /etc/beekeeper/apt-holds").stdout.split()
        assert "nvidia-open" not in record and "libcuda1" not in record, record
    finally:
        _driver_gone()


def _driver_gone() -> None:
    sandbox_exec("pkgs=$(dpkg-query -W -f '${Package}\\n' 'nvidia-*' 'libcuda1' "
                 "2>/dev/null | grep -v container); apt-mark unhold $pkgs >/dev/null; "
                 "DEBIAN_FRONTEND=noninteractive apt-get purge -y -q $pkgs; "
                 f"rm -f {DISTRO_SOURCE} {KEYRING_LIST}; apt-get update -qq; "
                 "mv /usr/local/bin/nvidia-smi.aside /usr/local/bin/nvidia-smi")


# the slow tier (CI time, issue 41): as the test above (about 15 s on 2 cores)
@pytest.mark.slow
def test_upgrade_driver_replaces_nvidias_older_branch_and_its_lock(gpu_host):
    """NVIDIA's own driver, an older branch (570) locked by its pinning package, all held,
    from NVIDIA's repository the user configured (cuda-keyring's list file): the purge takes
    the old lock too, the new branch is installed and locked by its pin (not held)."""
    old = aptrepo.NVIDIA_OLDER.split(".")[0]
    sandbox_exec("rm -f /etc/apt/sources.list.d/nvidia-cuda.sources; "
                 "cp /srv/aptrepo/gpgkey.gpg /usr/share/keyrings/cuda-archive-keyring.gpg && "
                 "echo 'deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] "
                 f"{CUDA_URL} /' > {KEYRING_LIST}; "
                 "mv /usr/local/bin/nvidia-smi /usr/local/bin/nvidia-smi.aside")
    try:
        setup = sandbox_exec("apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get "
                             f"install -y -q nvidia-driver-pinning-{old} && "
                             "DEBIAN_FRONTEND=noninteractive apt-get install -y -q nvidia-open && "
                             "apt-mark hold nvidia-open nvidia-kernel-open-dkms libcuda1 "
                             "nvidia-smi")
        assert setup.returncode == 0, setup.stdout[-2000:] + setup.stderr[-2000:]
        assert status("nvidia-open") == f"hold ok installed {aptrepo.NVIDIA_OLDER}-1"

        run = deploy(*UPGRADE_ARGS)
        assert run.rc != 0 and "NVIDIA driver installed; reboot the host" in run.out, \
            run.out[-3000:]
        assert "ok installed" not in status(f"nvidia-driver-pinning-{old}")
        assert sandbox_exec("ls /etc/apt/preferences.d/").stdout.split() == \
            [f"nvidia-driver-pinning-{BRANCH}"]
        for package in ("nvidia-open", "nvidia-kernel-open-dkms", "libcuda1", "nvidia-smi"):
            assert status(package) == f"install ok installed {BRANCH}.21.01-1", \
                (package, status(package))
        after = deploy(*UPGRADE_ARGS)
        assert after.rc == 0, after.out[-3000:]
        assert "Starting operation: Install the NVIDIA driver" not in after.out
    finally:
        _driver_gone()
