"""
Defaults for every host; host data in inventories/ overrides them.

Every module-level name here becomes host data, and host data is checked whole: a name the
kit (or pyinfra) does not read is refused with the closest known key. Keep helpers out, or
list the exported names in __all__.
"""

# Which profile to serve (`beekeeper profiles` lists them); the seed's production config.
profile = "q8-turbo4-64k"

# container: Docker image built on the host; native: built and run on the host directly
# (under systemd, or the kit's supervisord where PID 1 is not systemd: GPU containers).
mode = "container"

# What runs the server: "systemd" (a unit around `docker run`, the default), "compose"
# (/etc/beekeeper/<service>/compose.yaml, brought up and down by the unit; the default with
# use_docker_desktop = True) or "supervisor" (native mode, the default where PID 1 is not
# systemd). docs/runtimes.md; GPU containers: docs/gpu-containers.md.
# runtime = "compose"

# The server listens here on the host. Any non-loopback address needs api_key_file.
bind_address = "127.0.0.1"
port = 8083

# The model name clients send (`model` in a request; what /v1/models lists). Default: the
# profile's name. One word of letters, digits and . _ - : / + (at most 64).
# model_alias = "qwen3.5-9b"

# Models live here (ext4; under WSL2 never /mnt/c). Deploys never delete models.
model_dir = "/srv/beekeeper/models"

# GPU pods (runtime supervisor): the folder on the pod's volume that keeps all the kit needs
# to start the server again after the pod restarts. Unset: /workspace/beekeeper where
# /workspace is a folder off the container's own layer, else the standard layout; "none":
# the standard layout (a container whose disk is kept, e.g. Vast.ai). docs/gpu-containers.md.
# persistent_root = "/workspace/beekeeper"

# beellama (llama.cpp fork with TurboQuant KV types), pinned to a commit.
source = {
    "git": "https://github.com/Anbeeld/beellama.cpp",
    "ref": "ba1fdce591f5a845cdbf6642767ecc1f8238519d",
}

# CUDA release the server is built for. The driver it needs (README, "From clone to a first
# chat reply"; docs/gpu-hosts.md): container mode on a GeForce card, one that reports CUDA
# 13.2 (Linux 595+, or the Windows driver under WSL2); a datacenter card, 595+ or the 535,
# 570, 580 or 590 branch; native mode, 580+. An older one is refused with the way out
# (upgrade_driver, or cuda_follows_driver where the kit has an image for its CUDA).
cuda_version = "13.2.1"

# Peak VRAM the profile may use, GiB (the seed's goal: room for other models).
vram_budget_gib = 10.0

# Seconds to wait for /health after a (re)start.
health_timeout_s = 300

# Install the distro Docker engine where none is present.
install_docker = True
