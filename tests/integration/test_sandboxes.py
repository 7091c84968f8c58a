"""
Two sandbox hosts side by side: Debian 12 and Debian 13, on the network the sandboxes made,
each reaching the other by name, SSH published on 127.0.0.1 only.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from beekeeper import sandbox

from .helpers import SECOND, sandbox_exec

pytestmark = pytest.mark.integration


def _os_version(name: str) -> str:
    out = sandbox_exec(". /etc/os-release && echo $VERSION_ID", name).stdout
    return out.strip()


def test_the_two_hosts_are_debian_12_and_13(trixie_sandbox):
    assert _os_version(sandbox.CONTAINER) == "12"
    assert _os_version(SECOND) == "13"
    # the second host answers SSH with its own pinned key, as the kit reaches it
    state = sandbox.load_state(SECOND)
    p = subprocess.run(["ssh", *sandbox.ssh_options(state), "systemctl is-system-running"],
                       capture_output=True, text=True, timeout=60)
    assert p.stdout.strip() in ("running", "degraded"), p.stdout + p.stderr


def test_each_host_reaches_the_other_by_name(trixie_sandbox):
    for src, dst in ((sandbox.CONTAINER, SECOND), (SECOND, sandbox.CONTAINER)):
        p = sandbox_exec(f"exec 3<>/dev/tcp/{dst}/22 && head -c 4 <&3", src)
        assert p.returncode == 0 and p.stdout == "SSH-", (src, dst, p.stderr)


def test_ssh_is_published_on_loopback_only(trixie_sandbox):
    for name in (sandbox.CONTAINER, SECOND):
        ports = json.loads(subprocess.run(
            ["docker", "inspect", "-f", "{{json .NetworkSettings.Ports}}", name],
            capture_output=True, text=True, check=True).stdout)
        bindings = [b for v in ports.values() if v for b in v]
        assert bindings and {b["HostIp"] for b in bindings} == {"127.0.0.1"}, (name, ports)
