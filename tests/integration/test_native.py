"""
Native mode on the sandbox host: llama-server built on the host (CPU), a versioned install
folder with a `current` link, a hardened unit; a second run changes nothing.
"""

import subprocess

import pytest

from beekeeper.sandbox import state_dir

from .helpers import BIN, ROOT, deploy, grand_total, results, sandbox_exec

pytestmark = [pytest.mark.integration, pytest.mark.slow]  # a second llama.cpp build


def test_native_mode_builds_serves_and_is_idempotent(fresh_sandbox, standins):
    run = deploy("--data", "mode=native")
    print(f"\n[figure] native deploy (build on the host): {run.wall_s:.0f} s")
    assert run.rc == 0, run.out[-4000:]
    rows = results(run.out)
    assert any(k.startswith("Build llama-server") and v[0] == "1" for k, v in rows.items())
    link = sandbox_exec("readlink /opt/beekeeper/llama-server/current").stdout.strip()
    # named by the source commit (fetched from the git server), backend, arch, inputs hash
    assert link.startswith(f"/opt/beekeeper/llama-server/{standins.commit[:12]}-cpu-"), link
    unit = sandbox_exec("systemctl show -p ExecStart --value beekeeper-llm.service").stdout
    assert link + "/llama-server" in unit
    # llama-bench, the engine baseline, is installed beside the server from the same build
    bench = sandbox_exec(f"{link}/llama-bench --help")
    assert bench.returncode == 0 and "--n-depth" in bench.stdout + bench.stderr
    user = sandbox_exec("ps -o user= -C llama-server").stdout.split()
    assert user == ["beekeeper"], user
    again = deploy("--data", "mode=native")
    assert again.rc == 0 and grand_total(again.out)[1] == "-", again.out[-2000:]
    score = sandbox_exec("systemd-analyze security beekeeper-llm.service --no-pager "
                         "| tail -n 1").stdout.strip()
    print(f"[figure] systemd-analyze security, native unit: {score}")
    p = subprocess.run([str(BIN / "python"), "-m", "pytest", "verify/test_host.py", "-q",
                        "--hosts=ssh://sandbox", f"--ssh-config={state_dir() / 'ssh_config'}", "-p",
                        "no:cacheprovider"], cwd=ROOT, capture_output=True, text=True)
    assert p.returncode == 0, p.stdout[-3000:]
    back = deploy()
    assert back.rc == 0, back.out[-3000:]
