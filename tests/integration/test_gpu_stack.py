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
