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
