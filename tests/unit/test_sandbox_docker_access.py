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
    assert f"this user (root) may not use the Docker engine at unix://{path}" in last, last
    # root refused: the socket named is not the engine's own (no sudo or group helps)
    assert f"DOCKER_HOST names a socket root may not open (unix://{path})" in last, last
    assert "usermod" not in last and "start dockerd" not in last, last


def _python_for(uid: int) -> str | None:
    """An interpreter `uid` may run that imports the kit as this one does: this one, else
    the system's of the same version (this one may live in root's home)."""
    want = f"{sys.version_info[0]}.{sys.version_info[1]}"
    for python in (os.path.realpath(sys.executable), "/usr/bin/python3"):
        p = subprocess.run([SETPRIV, f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                            python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                           capture_output=True, text=True, timeout=30)
        if p.returncode == 0 and p.stdout.strip() == want:
            return python
    return None


@pytest.mark.skipif(os.geteuid() != 0 or not SETPRIV,
                    reason="needs root and util-linux's setpriv (to become another user)")
def test_a_user_outside_the_docker_group_is_told_sudo_or_the_group(alone_as_nobody):
    import site
    import tempfile

    nobody = 65534
    python = _python_for(nobody)
    if python is None:
        pytest.skip("no interpreter of this version that another user may run")
    folder = Path(tempfile.mkdtemp(prefix="bk-docker-"))  # pytest's tmp_path is root's only
    try:
        folder.chmod(0o755)
        path = folder / "docker.sock"
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(path))
        server.listen(1)
        path.chmod(0o600)  # root's, as Docker's socket is (with its group)
        env = {"PATH": "/usr/bin:/bin", "DOCKER_HOST": f"unix://{path}",
               "PYTHONPATH": os.pathsep.join([str(ROOT), *site.getsitepackages()])}
        p = subprocess.run([SETPRIV, f"--reuid={nobody}", f"--regid={nobody}", "--clear-groups",
                            python, "-c", "from beekeeper.sandbox import _client\n_client()"],
                           cwd="/", capture_output=True, text=True, timeout=60, env=env)
        server.close()
    finally:
        for f in folder.iterdir():
            f.unlink()
        folder.rmdir()
    last = p.stderr.strip().splitlines()[-1]
    user = last.split("this user (", 1)[-1].split(")", 1)[0]
    assert f"may not use the Docker engine at unix://{path}" in last, last
    assert f"run the command as root (with sudo), or add {user} to the docker group " \
           f"(`sudo usermod -aG docker {user}`" in last and "start dockerd" not in last, last
