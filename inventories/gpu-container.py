"""
Inventory for a rented GPU container (RunPod, Vast.ai, a Kubernetes pod): PID 1 is not
systemd and there is no Docker, so the kit builds the server natively and runs it under its
own supervisord (docs/gpu-containers.md). pyinfra runs on the container itself (`@local`);
from another machine, put the container's SSH address in place of "@local".

    BEEKEEPER_MODEL=/workspace/models/Qwen3.5-9B-Q8_0.gguf \\
    BEEKEEPER_MODEL_SHA256=$(sha256sum /workspace/models/Qwen3.5-9B-Q8_0.gguf | cut -d' ' -f1) \\
    BEEKEEPER_SOURCE=/workspace/beellama-src.tar.gz BEEKEEPER_SOURCE_REF=ba1fdce591f5 \\
    pyinfra -y inventories/gpu-container.py deploy.py

Each variable is optional: without BEEKEEPER_MODEL the profile's model comes from the Hub
(the container needs the network then), without BEEKEEPER_SOURCE beellama's pinned commit is
fetched with git.
"""

import os

data: dict = {
    "mode": "native",  # no Docker here: the server is built on the host
    "profile": os.environ.get("BEEKEEPER_PROFILE", "q8-turbo4-64k"),
}
if os.environ.get("BEEKEEPER_MODEL"):
    # a GGUF already on the container, served where it is (the server user must read it)
    data["model_host_path"] = os.environ["BEEKEEPER_MODEL"]
    data["model_sha256"] = os.environ.get("BEEKEEPER_MODEL_SHA256")
if os.environ.get("BEEKEEPER_SOURCE"):
    # a source tarball on the controller (here: the container itself), e.g. packed offline
    data["source"] = {"path": os.environ["BEEKEEPER_SOURCE"],
                      "ref": os.environ.get("BEEKEEPER_SOURCE_REF", "local")}
if os.environ.get("BEEKEEPER_PORT"):
    data["port"] = int(os.environ["BEEKEEPER_PORT"])

gpu_containers = [(os.environ.get("BEEKEEPER_HOST", "@local"), data)]
