"""
`--sudo` on a host without sudo (issue 43): a GPU pod whose login is root and which has no
sudo installed. The README's `BEEKEEPER_HOSTS=@local ... --sudo` line there printed "a bug in
beekeeper: PyinfraError: No hosts remaining!" (pyinfra failed the host on its first fact,
`sudo: not found`, and, the last host left, raised). It is one line now, before any other
command runs: sudo is not there, the login is root already, drop `--sudo`
(tasks/hostfail.py's root_is_there).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from beekeeper.tasks.hostfail import LOGIN_NAME

from .harness import DEFAULTS, ROOT, facts, run_deploy_hosts

PIN = {"model_revision": "a" * 40, "model_sha256": "b" * 64}  # no Hub request to pin


def _path_without_sudo(tmp: Path) -> str:
    """A PATH holding every program of this one but sudo (links in one folder), so the
    machine's own sudo, where there is one, is left alone."""
    shim = tmp / "bin"
    shim.mkdir()
    for folder in [str(ROOT / ".venv" / "bin"), *os.environ.get("PATH", "").split(os.pathsep)]:
        if not folder or not Path(folder).is_dir():
            continue
        for entry in Path(folder).iterdir():
            link = shim / entry.name
            if entry.name == "sudo" or link.exists() or link.is_symlink():
                continue
            if entry.is_file() and os.access(entry, os.X_OK):
                link.symlink_to(entry)
    assert not (shim / "sudo").exists() and shutil.which("sudo", path=str(shim)) is None
    return str(shim)


@pytest.mark.parametrize("entry", ["deploy.py", "uninstall.py"])
def test_the_readmes_local_sudo_line_on_a_host_without_sudo_is_one_line(tmp_path, entry):
    """The README's line as a pod user runs it, with --dry, where sudo is not on PATH (the
    uninstall's too: both entry points prepare a host through tasks/hostfail.py)."""
    env = {**os.environ, "PATH": _path_without_sudo(tmp_path), "BEEKEEPER_HOSTS": "@local"}
    pins = [a for k, v in PIN.items() for a in ("--data", f"{k}={v}")]
    done = subprocess.run([str(ROOT / ".venv" / "bin" / "pyinfra"), "inventories/home.py",
                           entry, "--sudo", "--dry", *pins], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=240)
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "a bug in beekeeper" not in out and "No hosts remaining" not in out, out
    if os.geteuid() == 0:
        line = ("sudo is not installed on @local, and `--sudo` asks for it: you are root "
                "there already; fix: run pyinfra without --sudo")
    else:
        line = "sudo is not installed on @local, and `--sudo` asks for it to become root ("
    # once, in the run's summary (the one host was the last left: tasks/hostfail.py)
    assert out.count(f"host @local: host facts: {line}") == 1, out
    if os.geteuid() == 0:  # the pod quickstart quotes the line as the kit prints it
        assert f"host @local: host facts: {line}" in \
            (ROOT / "docs" / "quickstart-pod.md").read_text()
    # no fact was asked through sudo: the check came first
    assert "sudo: not found" not in out and "could not load fact" not in out, out


def _no_sudo(uid: str, user: str = "root") -> dict[str, Any]:
    """Facts of a host without sudo, as the kit asks them (`_sudo=False`)."""
    return facts(Which=lambda command, **_: None if command == "sudo" else f"/usr/bin/{command}",
                 Command=lambda command, **_: {"id -u": uid, LOGIN_NAME: user}.get(command, ""))


WITH_SUDO = facts(Which=lambda command, **_: f"/usr/bin/{command}",
                  Command=lambda command, **_: "")


@pytest.mark.parametrize("uid, user, said", [
    ("0", "root", "sudo is not installed on pod, and host data `_sudo` asks for it: you are "
                  "root there already; fix: remove `_sudo` from its host data"),
    ("1000", "me", "sudo is not installed on pod, and host data `_sudo` asks for it to become "
                   "root (me is not root); fix: install sudo there, or log in as root and "
                   "remove `_sudo` from its host data"),
])
def test_host_data_sudo_without_sudo_fails_that_host_alone(capsys, uid, user, said):
    data = {**DEFAULTS, **PIN, "_sudo": True}
    failed, ops = run_deploy_hosts({"pod": (data, _no_sudo(uid, user)),
                                    "good": (data, WITH_SUDO)})
    assert failed == {"pod"}
    assert ops["pod"] == []
    assert any(n.startswith("Build server image") for n in ops["good"])
    err = [x for x in capsys.readouterr().err.splitlines() if x.startswith("host pod:")]
    assert err == [f"host pod: {said}"]


def test_no_sudo_asked_for_no_check():
    """Without `_sudo` the kit never asks whether sudo is there (a root login over SSH)."""
    asked: list[str] = []

    def which(command: str, **_: Any) -> str:
        asked.append(command)
        return f"/usr/bin/{command}"

    failed, _ = run_deploy_hosts({"box": ({**DEFAULTS, **PIN}, facts(Which=which))})
    assert failed == set() and "sudo" not in asked


def test_a_login_that_is_not_root_without_sudo_fails_that_host_alone(capsys):
    """A pod user logged in as another account, no --sudo: the dry run listed every change
    and the run died on `groupadd: Permission denied` (pyinfra's error, no summary line)."""
    data = {**DEFAULTS, **PIN}
    failed, ops = run_deploy_hosts({"pod": (data, _no_sudo("1000", "me")),
                                    "good": (data, _no_sudo("0"))})
    assert failed == {"pod"}
    assert ops["pod"] == []
    assert any(n.startswith("Build server image") for n in ops["good"])
    err = [x for x in capsys.readouterr().err.splitlines() if x.startswith("host pod:")]
    assert err == ["host pod: login me (uid 1000) is not root, and nothing asks for sudo: the "
                   "kit's commands need root; fix: run pyinfra with --sudo, or log in as root"]


def test_a_login_whose_uid_has_no_name_is_refused_by_its_uid(tmp_path):
    """A container run with --user 12345: `id -un` fails there ("cannot find name"), and as
    the fact's command it failed the host with pyinfra's own error before the kit's line.
    The README's @local line, with a stand-in `id` first on PATH."""
    (tmp_path / "id").write_text('#!/bin/sh\n[ "$1" = -u ] && { echo 12345; exit 0; }\n'
                                 'echo "id: cannot find name for user ID 12345" >&2; exit 1\n')
    (tmp_path / "id").chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}",
           "BEEKEEPER_HOSTS": "@local"}
    pins = [a for k, v in PIN.items() for a in ("--data", f"{k}={v}")]
    done = subprocess.run([str(ROOT / ".venv" / "bin" / "pyinfra"), "inventories/home.py",
                           "deploy.py", "--dry", *pins], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=240)
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "host @local: host facts: login uid 12345 is not root, and nothing asks for sudo" \
        in out, out
    assert "could not load fact" not in out, out


def test_a_fact_pyinfra_failed_on_the_last_host_is_no_bug_of_the_kits():
    """Any other fact whose command fails on the last host left (sudo asking for a password,
    say): pyinfra fails the host and raises 'No hosts remaining!'; that is the host's command,
    named by pyinfra's error above, not a bug in beekeeper."""
    from pyinfra import state

    from beekeeper.core.errors import BeekeeperError

    def init_system(**_: Any) -> None:
        from pyinfra.context import ctx_host
        state.fail_hosts({ctx_host.get()})  # what pyinfra does; raises, the last host left

    with pytest.raises(BeekeeperError) as e:
        run_deploy_hosts({"box": ({**DEFAULTS, **PIN}, facts(InitSystem=init_system))})
    said = str(e.value)
    assert said.startswith("host box: a command pyinfra ran on the host failed (pyinfra's "
                           "error above names it"), said
    assert "bug" not in said and "No hosts remaining" not in said
