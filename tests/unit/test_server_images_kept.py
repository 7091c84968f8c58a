"""The server images a deploy removes ("beyond the newest two", tasks/server_image.py) never
include one a service on this machine runs or would roll back to (docs/lifecycle.md: "Server
images: the newest two, always the running and the rollback one"), the services of another
inventory host on the same machine included (tasks/prune.py keeps their services: two
inventory entries over one SSH address, one per model)."""

from __future__ import annotations

from beekeeper.core.deployed import DeployedService
from beekeeper.facts.gpu import NvidiaSmiInfo

from .harness import DEFAULTS, NATIVE, facts, run_deploy_hosts_stdin

REPO = "beekeeper/llama-server"
# what each service's manifest (and `.prev` copy) on the machine says it runs
RUNS = {"/etc/beekeeper/llm/deployed.json": f"{REPO}:one-now",
        "/etc/beekeeper/llm/deployed.json.prev": f"{REPO}:one-before",
        "/etc/beekeeper/llm2/deployed.json": f"{REPO}:two-now",
        "/etc/beekeeper/llm2/deployed.json.prev": f"{REPO}:two-before"}


def _manifest(path: str) -> list[str] | None:
    image = RUNS.get(path)
    if image is None:
        return None
    name = path.split("/")[3]
    return DeployedService(service=name, container=f"beekeeper-{name}",
                           unit=f"beekeeper-{name}.service", profile="cpu-tiny", image=image,
                           bind_address="127.0.0.1", port=8083 if name == "llm" else 8085,
                           model_path="/srv/beekeeper/models/m.gguf").to_json().splitlines()


def test_a_neighbours_running_and_rollback_images_are_not_removed():
    """Host `one` (service llm) and host `two` (service llm2) share a machine. Before this
    deploy the machine's images, newest first: this deploy's build, llm's running and
    rollback images, then llm2's. Each host's prune may remove neither llm2's nor llm's:
    `docker rmi` of the image llm2's container runs fails the other host's deploy (the
    container uses it), and one only llm2's `.prev` unit runs breaks `beekeeper rollback`."""
    box = {"ssh_hostname": "10.0.0.5"}
    one = {**DEFAULTS, **box, "services": [{"service_name": "llm", "profile": "cpu-tiny"}]}
    two = {**DEFAULTS, **box, "services": [{"service_name": "llm2", "profile": "cpu-tiny",
                                            "port": 8085}]}
    machine = facts(Wsl=NATIVE, GpuInfo=NvidiaSmiInfo(path="/usr/bin/nvidia-smi"),
                    DeployedServices=["llm", "llm2"], FileContents=_manifest,
                    ImageTags=[f"{REPO}:newest", f"{REPO}:one-now", f"{REPO}:one-before",
                               f"{REPO}:two-now", f"{REPO}:two-before"])
    failed, ops = run_deploy_hosts_stdin({"one": (one, machine), "two": (two, machine)})
    assert failed == set()
    for host, host_ops in ops.items():
        prune = [c for n, cs, _ in host_ops if n == "Remove server images beyond the newest two"
                 for c in cs]
        for image in RUNS.values():
            assert not any(image in c for c in prune), (host, prune)
