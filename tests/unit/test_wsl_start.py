"""
Issue 33, WSL2: `instanceIdleTimeout=-1` keeps a started distro up but starts nothing when
Windows starts (WSL starts a distro only when something runs in it: `wsl.exe -d <distro>
--exec <command>`, wsl.exe's own help). The idle warning gives both, the setting and a
logon task that starts the distro, as what a server needs; before WSL 2.5.7 (no
instanceIdleTimeout) one logon task that keeps a process open does both.
"""

from __future__ import annotations

from beekeeper.facts.boot import WslSettingsInfo

from .harness import DEFAULTS, facts, run_deploy


def _warning(capsys, settings: WslSettingsInfo | None) -> str:
    capsys.readouterr()
    run_deploy(DEFAULTS, facts(WslSettings=settings))
    return next(x for x in capsys.readouterr().err.splitlines() if "WSL2 stops this distro" in x)


def test_the_idle_warning_gives_the_setting_and_the_logon_task_that_starts_the_distro(capsys):
    line = _warning(capsys, WslSettingsInfo(distro="Ubuntu-24.04", wsl_version="2.6.1"))
    assert "does not start it when Windows starts" in line
    assert "on Windows, both: add `instanceIdleTimeout=-1` under `[general]`" in line
    assert "which keeps a started distro up, and a logon task that starts it after each " \
        "reboot: schtasks /create /tn beekeeper-start /sc onlogon /tr " \
        "\"wsl.exe -d Ubuntu-24.04 --exec /bin/true\"" in line
    # older WSL: the keep-alive task is the one way, and it starts the distro too
    assert "before WSL 2.5.7, one logon task starts it and keeps it up: schtasks /create /tn " \
        "beekeeper-keepalive /sc onlogon /tr \"wsl.exe -d Ubuntu-24.04 --exec sleep " \
        "infinity\"" in line
    assert "(WSL 2.5.7 or newer (this WSL: 2.6.1); `wsl --update`)" in line
    assert "; or keep it up with a logon task" not in line  # the old either-or


def test_without_the_distros_name_the_tasks_say_where_to_find_it(capsys):
    line = _warning(capsys, None)
    assert line.count("wsl.exe -d <the distro `wsl.exe -l -v` lists> --exec") == 2
