"""
GPU stack provisioning on the sandbox host, from a signed local apt repository that holds
stand-in packages under NVIDIA's names (NVIDIA's repositories cannot be reached here). A
stand-in nvidia-smi, installed by this test only, feeds the GPU facts.
"""

import json
import subprocess

import pytest

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
ARGS = ("--data", "profile=q8-turbo4-64k", "--data", 'stages=["provision"]',
        "--data", f"nvidia_repos={REPOS}")


@pytest.fixture(scope="module")
def gpu_host(fresh_sandbox, tmp_path_factory):
    repo = aptrepo.build(tmp_path_factory.mktemp("apt") / "repo",
                         tmp_path_factory.mktemp("gnupg"))
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


def test_container_toolkit_from_the_signed_repo_then_nothing_changes(gpu_host):
    run = deploy(*ARGS)
    assert run.rc == 0, run.out[-4000:]
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
    from beekeeper.tasks.service import render_unit

    cfg = load_host_config({"profile": "q8-turbo4-64k", "use_docker_desktop": True,
                            "source": {"git": "https://github.com/Anbeeld/beellama.cpp",
                                       "ref": "ba1fdce591f5a845cdbf6642767ecc1f8238519d"}})
    unit = render_unit(cfg, cfg.service, "beekeeper/llama-server:x", "docker-desktop")
    assert "Requires=docker.service" not in unit
    path = tmp_path / "beekeeper-desktop-check.service"
    path.write_text(unit)
    subprocess.run(["docker", "cp", str(path), f"{CONTAINER}:/var/tmp/{path.name}"], check=True)
    check = sandbox_exec(f"systemd-analyze verify /var/tmp/{path.name}; echo rc=$?")
    assert "rc=0" in check.stdout, check.stdout + check.stderr
    sandbox_exec(f"rm -f /var/tmp/{path.name}")
