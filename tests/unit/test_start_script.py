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
import subprocess
import sys
from pathlib import Path

import pytest

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
    env = {**os.environ, "PATH": f"{tmp_path}/bin:{os.environ['PATH']}"}
    for path, tool in ((ctl, "supervisorctl"), (sd, "supervisord")):
        path.write_text(f'#!/bin/sh\nexec {sys.executable} -m supervisor.{tool} -c {conf} "$@"\n')
        path.chmod(0o755)
    # `status_from`: where supervisorctl's `status` alone asks (a socket nothing listens on:
    # supervisord gone between the script's `pid` and its `status`)
    ctl.write_text('#!/bin/sh\n[ "$1" = status ] && [ -n "$STATUS_FROM" ] && '
                   'set -- -s "$STATUS_FROM" "$@"\n' + ctl.read_text().split("\n", 1)[1])

    def run(command: str, status_from: str = "") -> tuple[int, str]:
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
