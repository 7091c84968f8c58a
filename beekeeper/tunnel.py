"""SSH local forward to a server that listens on a host's loopback only."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager

from .core.errors import BeekeeperError
from .core.paths import bracketed


@contextmanager
def ssh_tunnel(ssh_args: list[str], remote_port: int, deadline_s: float = 20,
               remote_host: str = "127.0.0.1") -> Iterator[str]:
    """Forward 127.0.0.1:<free port> to remote_host:remote_port as the host reaches it (its
    loopback, or the one address a server listens on); yield the URL."""
    with socket.socket() as s:  # a free port
        s.bind(("127.0.0.1", 0))
        local = int(s.getsockname()[1])
    proc = subprocess.Popen(
        ["ssh", "-N", "-o", "ExitOnForwardFailure=yes",
         "-L", f"127.0.0.1:{local}:{bracketed(remote_host)}:{remote_port}", *ssh_args],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    try:
        start = time.monotonic()
        while True:
            if proc.poll() is not None:
                err = proc.stderr.read().decode() if proc.stderr else ""
                raise BeekeeperError(f"ssh tunnel exited: {err.strip()}")
            try:
                with socket.create_connection(("127.0.0.1", local), timeout=1):
                    break
            except OSError:
                if time.monotonic() - start > deadline_s:
                    raise BeekeeperError("ssh tunnel did not open in time") from None
                time.sleep(0.2)
        yield f"http://127.0.0.1:{local}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
