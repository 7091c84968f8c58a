"""
Example inventory: your GPU boxes. It describes two, a WSL2 box and a native Linux box, and
both are commented out: as shipped it names no host, and running it as it is stops at once
with one line saying how to name yours, before connecting anywhere. Uncomment the example
that is like your box, put in its address, keep what applies, run

    pyinfra inventories/home.py deploy.py --dry     # see every change first
    pyinfra inventories/home.py deploy.py

Or name your hosts without editing the file: BEEKEEPER_HOSTS="gpu-box.lan,other.lan" (comma
separated; each then gets the group defaults only, so the examples' settings do not apply
to them). On the GPU box itself (WSL2; a GPU container: inventories/gpu-container.py), no SSH:

    BEEKEEPER_HOSTS=@local pyinfra inventories/home.py deploy.py --sudo

Host data for such a host goes on the command line: a WSL2 box whose Windows driver reports
CUDA 12.8, 12.9, 13.0 or 13.1 in nvidia-smi (inside WSL) needs an image for that CUDA:

    BEEKEEPER_HOSTS=@local pyinfra inventories/home.py deploy.py --sudo \
        --data cuda_follows_driver=true

Or name "@local" as a host here, with its data (the WSL2 example below says how).

group_data/all.py holds the kit's choices for every host (the rest: the defaults in README,
"Host data keys"); anything here overrides them per host.
"""

import os
import sys

gpu_boxes: list[tuple[str, dict]] = [
    # The reference box: Windows 11 + WSL2 Ubuntu, RTX 4090, Windows driver 596.21.
    # Simplest: run the kit inside WSL itself with pyinfra's @local (no SSH, no edit here:
    # see BEEKEEPER_HOSTS above). Or reach WSL over SSH (enable sshd in the distro):
    # WSL stops an idle distro, and the server with it (docs/hosts-as-you-find-them.md).
    # To give the @local host data here instead, write "@local" in place of
    # "wsl-4090.local", leave out "ssh_user" and "_sudo", and run pyinfra with --sudo.
    # Uncomment:
    # (
    #     "wsl-4090.local",
    #     {
    #         "ssh_user": "me",
    #         "_sudo": True,
    #         "profile": "q8-turbo4-64k",
    #         # models on the WSL ext4 disk, never under /mnt/c (9p: 3-5x slower loads)
    #         "model_dir": "/srv/beekeeper/models",
    #         # a Windows driver whose nvidia-smi (inside WSL) reports CUDA 12.8, 12.9,
    #         # 13.0 or 13.1 rather than 13.2: build the image for the CUDA it reports
    #         # "cuda_follows_driver": True,
    #     },
    # ),
    # A native Linux box with an RTX 3090: the kit installs the driver where there is none
    # (Linux only; with Secure Boot on, only once DKMS's key is enrolled). A driver older
    # than cuda_version needs (a GeForce card in container mode: one reporting CUDA 13.2,
    # branch 595+) is refused unless "upgrade_driver": True (replace it with the pinned
    # branch) or "cuda_follows_driver": True (an image for the CUDA it runs: drivers that
    # report 12.8, 12.9, 13.0 or 13.1; Ubuntu's 550 reports 12.4, for which the kit has none, so
    # there only upgrade_driver). verify reads this box's port 8084 from what was deployed.
    # Uncomment:
    # (
    #     "linux-3090.lan",
    #     {
    #         "ssh_user": "root",
    #         "profile": "q4km-f16-32k",
    #         "port": 8084,
    #         # build for the 3090 (compute capability 8.6) instead of the default sm_89
    #         "cuda_arch": "86",
    #     },
    # ),
]

if os.environ.get("BEEKEEPER_HOSTS"):
    gpu_boxes = [(name.strip(), {}) for name in os.environ["BEEKEEPER_HOSTS"].split(",")
                 if name.strip()]

if not gpu_boxes:
    # pyinfra would otherwise run an empty inventory and report success
    sys.exit("beekeeper: inventories/home.py names no host: uncomment the example like your "
             "box (WSL2 or native Linux) and put in its address, or set "
             "BEEKEEPER_HOSTS=\"gpu-box.lan\"")

# One OpenAI endpoint for both boxes (docs/gateway.md): give one host the gateway role,
#     "gateway": {"port": 4000, "api_key_file": "keys/gateway.key"},
# and let it reach the others' services: each binds a private address with a key
# ("bind_address": "10.0.0.12", "api_key_file": "keys/backend.key"), or stays on loopback
# behind an SSH forward ("gateway_address": "127.0.0.1" and per service "gateway_port").
# A host with "services": [] is a gateway only (no Docker, no build, no model).
