"""
The local sandbox host (see `beekeeper sandbox up`), reached over SSH on 127.0.0.1 exactly
like a remote box. Deploys the CPU profile: no GPU needed.
"""

from beekeeper.cache import CPU_SOURCE_REF, cpu_source_tarball
from beekeeper.sandbox import load_host_data, load_state

_state = load_state()

sandbox = [
    (
        "sandbox",
        {
            "ssh_hostname": "127.0.0.1",
            "ssh_port": _state.ssh_port,
            "ssh_user": "root",
            "ssh_key": _state.ssh_key,
            "ssh_known_hosts_file": _state.known_hosts,
            "ssh_strict_host_key_checking": "yes",  # pinned by `beekeeper sandbox up`
            "profile": "cpu-tiny",
            # the llama.cpp tree vendored in the pinned llama-cpp-python sdist
            "source": {"path": str(cpu_source_tarball()), "ref": CPU_SOURCE_REF},
            # no registry here: base images come from the controller
            "base_images": _state.base_images,
            "preload_images": _state.preload_images,
            "health_timeout_s": 120,
            # what `beekeeper sandbox` was told to add (the tests: a git source at a full
            # commit and a Hub endpoint)
            **load_host_data(),
        },
    ),
]
