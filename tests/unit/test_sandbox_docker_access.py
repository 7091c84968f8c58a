"""A user who may not use the Docker engine (the README's set-up "with sudo" installs it for
root and its group): the sandbox's one line says so and how, not "start dockerd". The real
Docker client against a real socket its caller may not open: a socket owned by another user,
mode 600, reached as root without the capability that passes over file modes."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SETPRIV = shutil.which("setpriv")


@pytest.mark.skipif(os.geteuid() != 0 or not SETPRIV,
                    reason="needs root and util-linux's setpriv (to drop CAP_DAC_OVERRIDE)")
def test_a_socket_this_user_may_not_open_is_named_with_the_fix(tmp_path):
    path = tmp_path / "docker.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen(1)
    os.chown(path, 65534, 65534)  # nobody's
    path.chmod(0o600)
    tmp_path.chmod(0o755)
    code = "from beekeeper.sandbox import _client\n_client()"
    try:
        p = subprocess.run([SETPRIV, "--bounding-set", "-dac_override,-dac_read_search",
                            sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                           text=True, timeout=60,
                           env={**os.environ, "DOCKER_HOST": f"unix://{path}"})
    finally:
        server.close()
    last = p.stderr.strip().splitlines()[-1]
    assert p.returncode != 0
    assert "this user (root) may not use the Docker engine" in last, last
    assert "`sudo usermod -aG docker root`" in last and "start dockerd" not in last, last
