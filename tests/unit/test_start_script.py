"""
The start script a restarted pod runs (templates/beekeeper-start.sh.j2) with a real
supervisord (the package the kit installs on the host, run from this controller's venv) in
a folder of the test's: it must say which program did not start, and fail, where a server
cannot start (after a restart that lost what it needs), and pass where it runs. The
programs stand in for the server (one exits at once, one sleeps) with the kit's own start
settings (startsecs, startretries) read from its program template. The script asks `id -u`
for root (it makes the kit's links and user, none here): a stand-in `id` first on PATH
answers 0, so the test runs as any user.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from beekeeper.core.build import caps_run_on
from beekeeper.core.render import TEMPLATES_DIR, render


def _kit_setting(name: str) -> str:
    m = re.search(rf"^{name}=(\d+)$", (TEMPLATES_DIR / "supervisor-program.conf.j2").read_text(),
                  re.M)
    assert m, name
    return m.group(1)


@pytest.fixture
def start(tmp_path: Path):
    """Returns run(command) -> (exit status, stderr) of the start script with one program
    running `command` under a supervisord of the test's."""
    conf, ctl, sd = tmp_path / "sv.conf", tmp_path / "ctl", tmp_path / "supervisord"
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin/id").write_text("#!/bin/sh\necho 0\n")
    (tmp_path / "bin/id").chmod(0o755)
    # the tools the script and the launchers call, linked: no nvidia-smi of this machine's
    # (a GPU box's) on PATH, only the test's stand-ins
    (tmp_path / "tools").mkdir()
    for tool in ("awk", "head", "sleep", "sh", "cat", "env"):
        (tmp_path / "tools" / tool).symlink_to(shutil.which(tool))
    env = {**os.environ, "PATH": f"{tmp_path}/bin:{tmp_path}/tools"}
    for path, tool in ((ctl, "supervisorctl"), (sd, "supervisord")):
        path.write_text(f'#!/bin/sh\nexec {sys.executable} -m supervisor.{tool} -c {conf} "$@"\n')
        path.chmod(0o755)
    # `status_from`: where supervisorctl's `status` alone asks (a socket nothing listens on:
    # supervisord gone between the script's `pid` and its `status`)
    ctl.write_text('#!/bin/sh\n[ "$1" = status ] && [ -n "$STATUS_FROM" ] && '
                   'set -- -s "$STATUS_FROM" "$@"\n' + ctl.read_text().split("\n", 1)[1])

    def run(command: str, status_from: str = "", arch: str | None = None,
            cards: str | None = None, wsl: bool = False,
            python: str = sys.executable) -> tuple[int, str]:
        """`arch`: a CUDA build's; `cards`: what a stand-in nvidia-smi prints of the
        container's cards' compute capabilities (None: it fails, as with no GPU passed in);
        `wsl`: it is where WSL2 keeps it, off PATH (as for wsl.conf's boot command)."""
        smi = tmp_path / ("wsl-lib/nvidia-smi" if wsl else "bin/nvidia-smi")
        smi.parent.mkdir(exist_ok=True)
        smi.write_text("#!/bin/sh\n" + (f"printf '{cards}'\n" if cards is not None
                                        else "echo 'no devices' >&2; exit 6\n"))
        smi.chmod(0o755)
        conf.write_text(f"""[unix_http_server]
file={tmp_path}/sv.sock
[supervisord]
logfile={tmp_path}/sv.log
pidfile={tmp_path}/sv.pid
[rpcinterface:supervisor]
supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface
[supervisorctl]
serverurl=unix://{tmp_path}/sv.sock
[program:beekeeper-llm]
command={command}
autostart=true
startsecs={_kit_setting("startsecs")}
startretries={_kit_setting("startretries")}
""")
        script = tmp_path / "start"
        script.write_text(render("beekeeper-start.sh.j2", root=None, start=str(script),
                                 python=python,
                                 arch=arch or "", caps=caps_run_on(arch) if arch else (),
                                 wsl_smi=f"{tmp_path}/wsl-lib/nvidia-smi",
                                 links=[], launchers=[], owner="", ctl=str(ctl),
                                 supervisord=str(sd), log=f"{tmp_path}/sv.log",
                                 user="beekeeper"))
        try:
            p = subprocess.run(["sh", str(script)], capture_output=True, text=True, timeout=60,
                               env={**env, "STATUS_FROM": status_from})
        finally:
            subprocess.run([str(ctl), "shutdown"], capture_output=True)
        return p.returncode, p.stderr

    return run


def test_a_python_the_restart_cleared_is_named_before_supervisord(start):
    """A pod image without Python: setup.sh's apt put /usr/bin/python3 on the container's
    disk, the launchers name it, and the restart cleared it; the script said only
    "supervisord did not start (log: ...)", a log supervisord never wrote."""
    rc, err = start("/bin/sleep 600", python="/nonexistent/bin/python3")
    assert rc == 1, err
    assert "/nonexistent/bin/python3, the Python supervisord runs with, is not here" in err
    assert "supervisord did not start" not in err


def test_a_server_that_cannot_start_is_named_and_the_script_fails(start):
    rc, err = start("/bin/sh -c 'exit 1'")
    assert rc == 1, err
    assert "beekeeper-start: beekeeper-llm did not start (FATAL): its log: " in err, err
    assert "the server loads its model now" not in err, err


def test_a_server_that_runs_passes(start):
    rc, err = start("/bin/sleep 600")
    assert rc == 0, err
    assert "beekeeper-start: supervisord started; the server loads its model now" in err, err


def test_a_status_that_reads_no_state_fails_the_script(start, tmp_path):
    """supervisorctl's `status` that reaches no supervisord (exit 4, `no such file`) lists no
    program: that is no proof the server started, so the script fails and says so."""
    rc, err = start("/bin/sleep 600", status_from=f"unix://{tmp_path}/nothing.sock")
    assert rc == 1, err
    assert re.search(r"beekeeper-start: \S+/ctl status read no program's state \(exit 4: "
                     r"unix://\S+/nothing\.sock no such file\); log: ", err), err
    assert "the server loads its model now" not in err, err


@pytest.mark.parametrize(("arch", "cards"), [("90", "9.0\n"), ("86;89", "8.9\n8.6\n"),
                                             ("80", "8.6\n")])
def test_a_cuda_build_starts_on_the_cards_it_runs_on(start, arch, cards):
    rc, err = start("/bin/sleep 600", arch=arch, cards=cards)
    assert rc == 0, err
    assert "the server loads its model now" in err, err


@pytest.mark.parametrize(("arch", "cards", "cap"), [("90", "8.9\n", "8.9"),
                                                    ("89", "8.9\n12.0\n", "12.0"),
                                                    ("90a", "9.1\n", "9.1")])
def test_a_pod_back_on_another_gpu_is_told_to_deploy_and_starts_no_server(start, arch, cards,
                                                                         cap):
    """A pod's volume attached to a pod of another GPU: the build on it has no kernels for
    the card, and its server would fail past supervisord's first second and be restarted
    without end. The script names the card and the build, starts nothing, and fails (the
    pod's own start command still runs after it)."""
    rc, err = start("/bin/sleep 600", arch=arch, cards=cards)
    assert rc == 1, err
    assert (f"beekeeper-start: this GPU has compute capability {cap}, and the server here is "
            f"built for CUDA arch {arch}: deploy again, which builds for this GPU") in err, err
    assert "supervisord" not in err, err


def test_a_cuda_build_in_a_container_started_without_its_gpu_starts_no_server(start):
    rc, err = start("/bin/sleep 600", arch="90", cards=None)
    assert rc == 1, err
    assert re.search(r"nvidia-smi shows no GPU here \(no devices\), and the server is built "
                     r"for CUDA arch 90: start the container with its GPU", err), err


def test_a_cpu_build_asks_no_gpu(start):
    rc, err = start("/bin/sleep 600", arch=None, cards=None)
    assert rc == 0, err


def test_a_wsl2_distro_s_nvidia_smi_off_path_is_found(start):
    # WSL2 keeps nvidia-smi in /usr/lib/wsl/lib, which wsl.conf's boot command has no PATH to
    rc, err = start("/bin/sleep 600", arch="89", cards="8.9\n", wsl=True)
    assert rc == 0, err
    rc, err = start("/bin/sleep 600", arch="89", cards="9.0\n", wsl=True)
    assert rc == 1 and "compute capability 9.0" in err, err
