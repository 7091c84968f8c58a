"""
Facts about the server the kit built: what its own `--help` lists.
"""

from __future__ import annotations

import shlex

from pyinfra.api import FactBase

# a server (or the container runtime starting it) that does not print its help in this long
# is read as printing nothing: the check then warns, and the deploy is not held up
HELP_TIMEOUT_S = 120


class ServerHelp(FactBase[str | None]):
    """The built llama-server's `--help` (its stdout), or ``None`` where it is not built
    yet (no image of that tag, no binary at that path) or printed nothing."""

    def command(self, binary: str, image: str | None = None, gpu: bool = False) -> str:
        """`binary`: the server on the host (native), or in `image` (container mode; `gpu`:
        a CUDA build, which loads the driver's libcuda only in a container given the GPU)."""
        b, limit = shlex.quote(binary), f"timeout {int(HELP_TIMEOUT_S)}"
        if image is None:
            return f"test -x {b} && {limit} {b} --help 2>/dev/null; true"
        i = shlex.quote(image)
        gpus = " --gpus all" if gpu else ""
        return (f"docker image inspect {i} >/dev/null 2>&1 && {limit} docker run --rm{gpus} "
                f"--entrypoint {b} {i} --help 2>/dev/null; true")

    def process(self, output: list[str]) -> str | None:
        text = "\n".join(output)
        return text if text.strip() else None
