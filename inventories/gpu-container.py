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
fetched with git. The others set the host data key of the same name (README, Host data keys;
a bad value is refused before any change, naming the key):

    BEEKEEPER_PROFILE          profile                the profile (default q8-turbo4-64k)
    BEEKEEPER_PORT             port                   the server's port
    BEEKEEPER_BIND_ADDRESS     bind_address           not loopback needs an API key file
    BEEKEEPER_API_KEY_FILE     api_key_file           a file holding the key (mode 600)
    BEEKEEPER_VRAM_BUDGET_GIB  vram_budget_gib        e.g. 10 or 22.5
    BEEKEEPER_MODEL_ALIAS      model_alias            the model name clients send
    BEEKEEPER_PERSISTENT_ROOT  persistent_root        a folder on the pod's volume, or none
                                                      (default: /workspace/beekeeper where
                                                      /workspace is the pod's volume)
"""

import os


def _number(text: str) -> float | str:
    """A number as host data takes it; text that is none stays text, and host data's
    validation refuses it in one line naming the key."""
    try:
        return float(text)
    except ValueError:
        return text


def _whole(text: str) -> int | str:
    return int(text) if text.strip().isdigit() else text


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
    data["port"] = _whole(os.environ["BEEKEEPER_PORT"])
# environment variable -> host data key, taken as text
for var, key in (("BEEKEEPER_BIND_ADDRESS", "bind_address"),
                 ("BEEKEEPER_API_KEY_FILE", "api_key_file"),
                 ("BEEKEEPER_MODEL_ALIAS", "model_alias"),
                 ("BEEKEEPER_PERSISTENT_ROOT", "persistent_root")):
    if os.environ.get(var):
        data[key] = os.environ[var]
if os.environ.get("BEEKEEPER_VRAM_BUDGET_GIB"):
    data["vram_budget_gib"] = _number(os.environ["BEEKEEPER_VRAM_BUDGET_GIB"])

gpu_containers = [(os.environ.get("BEEKEEPER_HOST", "@local"), data)]
