"""
Example inventory: your GPU boxes. Copy it, keep what applies, run

    pyinfra inventories/home.py deploy.py --dry     # see every change first
    pyinfra inventories/home.py deploy.py

Defaults for every key are in group_data/all.py; anything here overrides them per host.
"""

gpu_boxes = [
    # The reference box: Windows 11 + WSL2 Ubuntu, RTX 4090, Windows driver 596.21.
    # From Windows' side, reach WSL over SSH (enable sshd in the distro), or run pyinfra
    # inside WSL itself with "@local" as the host name instead.
    (
        "wsl-4090.local",
        {
            "ssh_user": "me",
            "_sudo": True,
            "profile": "q8-turbo4-64k",
            # models on the WSL ext4 disk, never under /mnt/c (9p: 3-5x slower loads)
            "model_dir": "/srv/beekeeper/models",
        },
    ),
    # A native Linux box with an RTX 3090: the driver is installed by the kit (Linux only).
    (
        "linux-3090.lan",
        {
            "ssh_user": "root",
            "profile": "q4km-f16-32k",
            "port": 8084,
            # build for the 3090 (compute capability 8.6) instead of the default sm_89
            "cuda_arch": "86",
        },
    ),
]

# One OpenAI endpoint for both boxes (README, "the gateway"): give one host the gateway role,
#     "gateway": {"port": 4000, "api_key_file": "keys/gateway.key"},
# and let it reach the others' services: each binds a private address with a key
# ("bind_address": "10.0.0.12", "api_key_file": "keys/backend.key"), or stays on loopback
# behind an SSH forward ("gateway_address": "127.0.0.1" and per service "gateway_port").
# A host with "services": [] is a gateway only (no Docker, no build, no model).
