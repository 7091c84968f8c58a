"""
WSL2 in states the first hour meets that the other tests did not see: a distro without
systemd deploying the way the refusal offers (runtime supervisor, native), a Windows drive
mounted somewhere other than /mnt (WSL's `[automount] root`, or a symlink into /mnt/d), and
the facts read as pyinfra's `--sudo` runs them (sudo's secure_path: no Windows folders on
PATH). Facts are parsed from the commands' own output; the fact commands run under `sh`
against stand-in binaries and files, never against a host.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from beekeeper.core.errors import PreflightError
from beekeeper.facts.boot import WslSettings
from beekeeper.facts.host import DiskInfo, DiskOf, InitInfo

from .harness import (
    DEFAULTS,
    POD_DATA,
    ROOT,
    RTX4090,
    WSL,
    _run_sh as _run,
    _stub,
    _tools,
    facts,
    pod,
    run_deploy,
)

# PID 1 of a WSL2 distro without `[boot] systemd=true`: WSL's own /init
WSL_INIT = InitInfo(pid1="init", systemd=False, state="offline")


def test_wsl2_without_systemd_under_supervisor_is_told_wsl_confs_boot_command(capsys):
    """The WSL2 refusal of a distro without systemd offers runtime = 'supervisor' with mode =
    'native'; taken, nothing starts the kit's supervisord when the distro starts again. The
    warning must name WSL's own way (a `command` under `[boot]` in /etc/wsl.conf, run as root
    each time the distro starts: Microsoft's WSL configuration reference), not a container's
    start command or RunPod's, which a WSL2 distro has none of."""
    with pytest.raises(PreflightError) as refused:
        run_deploy(DEFAULTS, facts(InitSystem=WSL_INIT))
    assert "runtime = 'supervisor' with mode = 'native' in host data" in refused.value.fix
    # and as a user of @local types it on pyinfra's command line
    assert refused.value.fix.endswith("on @local: `--data mode=native --data "
                                      "runtime=supervisor`)"), refused.value.fix
    ops = run_deploy({**POD_DATA, "runtime": "supervisor"},
                     pod(InitSystem=WSL_INIT, Wsl=WSL, GpuInfo=RTX4090))
    assert ops
    err = capsys.readouterr().err
    line = next(x for x in err.splitlines() if "not systemd" in x)
    assert line.endswith(
        "warning: PID 1 is 'init', not systemd: the server runs under the kit's supervisord, "
        "and nothing starts it again when this WSL2 distro starts again (after `wsl "
        "--shutdown`, an idle stop or a Windows restart) until `/usr/local/sbin/beekeeper-start`"
        " runs: add `command = /usr/local/sbin/beekeeper-start` under `[boot]` in /etc/wsl.conf"
        " (WSL runs it as root each time the distro starts), or turn systemd on there "
        "(`systemd=true` under `[boot]`, then `wsl.exe --shutdown`) and remove `runtime`"), line
    assert "container" not in line and "RunPod" not in line, line


def test_the_docs_say_wsl2_without_systemd_has_no_runtime_default_and_the_way_out():
    """README's key table said `runtime` defaults to supervisor where PID 1 is not systemd,
    but WSL2 refuses until both keys are given: the row names WSL2 as the exception, and the
    WSL2 quickstart shows the `--data` form the refusal's fix gives."""
    row = next(line for line in (ROOT / "README.md").read_text().splitlines()
               if line.startswith("| `runtime` |"))
    assert "WSL2 is the exception" in row and "mode = 'native' and runtime = 'supervisor'" in row
    quick = " ".join((ROOT / "docs" / "quickstart-wsl2.md").read_text().split())
    assert "`--data mode=native --data runtime=supervisor`" in quick


@pytest.mark.parametrize("conf_systemd", [False, True])
def test_wsl2_without_systemd_is_told_what_wsl_conf_lacks(conf_systemd):
    """wsl.conf without `systemd=true`: add it (two lines of a file, no literal `\\n`); with
    it already (WSL restarted not since, or too old to read it): restart WSL."""
    with pytest.raises(PreflightError) as refused:
        run_deploy(DEFAULTS, facts(InitSystem=WSL_INIT,
                                   Wsl=replace(WSL, wsl_conf_systemd=conf_systemd)))
    line = str(refused.value)
    assert "\\n" not in line, line
    assert line.endswith(
        "/etc/wsl.conf has `systemd=true` under `[boot]` already: run `wsl.exe --shutdown` on "
        "Windows (`wsl.exe --update` first where WSL is older than 0.67.6), then deploy again "
        "(or runtime = 'supervisor' with mode = 'native' in host data; on @local: `--data "
        "mode=native --data runtime=supervisor`)" if conf_systemd else
        "add `systemd=true` under `[boot]` in /etc/wsl.conf, run `wsl.exe --shutdown` on "
        "Windows, then deploy again (or runtime = 'supervisor' with mode = 'native' in host "
        "data; on @local: `--data mode=native --data runtime=supervisor`)"), line


@pytest.mark.parametrize(("c_free_gib", "warned"), [(8, True), (40, False)])
def test_wsl2_warns_where_windows_c_has_less_room_than_the_deploy_writes(
        capsys, c_free_gib, warned):
    """Inside WSL2, df of the distro's own folders reads its disk file's limit (1 TB), so
    the model_dir check passes with C: nearly full; C: itself (df of /mnt/c: "C:\\") is
    read too, and where it has less room than the download (9.5 GB) and the image build
    (11 GiB) it says so before any change."""
    roomy = DiskInfo(mount="/", free_bytes=900 * 2**30, filesystem="/dev/sdc")
    drive = DiskInfo(mount="/mnt/c", free_bytes=c_free_gib * 2**30, filesystem="C:\\")
    ops = run_deploy(DEFAULTS, facts(DiskOf=lambda path=None, **_: drive if path == "/mnt/c"
                                     else roomy))
    assert ops
    err = capsys.readouterr().err
    line = next((x for x in err.splitlines() if "ext4.vhdx" in x), None)
    if not warned:
        assert line is None, line
        return
    assert line is not None, err
    assert f"C:\\ has {c_free_gib:.1f} GiB free, less than the " in line, line
    assert "free space on Windows first" in line, line


# `df -PB1` of a folder on a Windows drive under WSL2 (drvfs over 9p): the file system is
# the drive ("C:\"), mounted where wsl.conf's `[automount] root` puts it (`root = /`, which
# older Docker Desktop guides set so that paths read /c/...), or reached through a symlink
DF_HEAD = "Filesystem 1024-blocks Used Available Capacity Mounted on"


@pytest.mark.parametrize("model_dir, df_line", [
    ("/c/models", "C:\\ 1022870155264 700000000000 322870155264 69% /c"),
    ("/srv/beekeeper/models", "D:\\ 4000650883072 1000000000000 3000650883072 25% /mnt/d"),
])
def test_a_model_dir_on_a_windows_drive_not_spelled_mnt_is_refused(model_dir, df_line):
    """model_dir on a Windows drive is refused under WSL2 (9p: 3-5x slower loads), as the
    quickstart promises; the drive is known by the file system df names, wherever it is
    mounted or linked from, not by the path starting with /mnt/."""
    disk = DiskOf().process([DF_HEAD, df_line])
    with pytest.raises(PreflightError) as refused:
        run_deploy({**DEFAULTS, "model_dir": model_dir}, facts(DiskOf=disk))
    assert "is on a Windows drive" in str(refused.value)


def test_the_users_own_wslconfig_is_read_under_sudos_secure_path(tmp_path):
    """pyinfra's `--sudo` (the quickstart's deploy) runs the fact as root through `sudo -H`:
    env_reset and Ubuntu's and Debian's secure_path, which hold no Windows folder, so a bare
    `cmd.exe` is not found (as nvidia-smi in /usr/lib/wsl/lib is not: verify/engine.py). The
    user's own %USERPROFILE%\\.wslconfig must still be read, not another Windows account's
    that sorts first under /mnt/c/Users."""
    users = tmp_path / "Users"
    for who in ("alice", "me"):
        (users / who).mkdir(parents=True)
    (users / "alice" / ".wslconfig").write_bytes(b"[wsl2]\r\nmemory=4GB\r\n")
    (users / "me" / ".wslconfig").write_bytes(
        b"[wsl2]\r\nmemory=24GB\r\n\r\n[general]\r\ninstanceIdleTimeout=-1\r\n")
    system32 = tmp_path / "Windows" / "System32"  # /mnt/c/Windows/System32: not on PATH
    system32.mkdir(parents=True)
    _stub(system32, "cmd.exe", r"printf 'C:\\Users\\me\r\n'")
    bin_ = tmp_path / "bin"  # the secure_path's programs: wslinfo and wslpath are in /usr/bin
    bin_.mkdir()
    _tools(bin_, "sed", "head", "od", "tr", "cat", "timeout")
    _stub(bin_, "wslinfo", "printf 2.5.7")
    _stub(bin_, "wslpath", f'[ "$1 $2" = "-u C:\\Users\\me" ] && echo {users}/me')
    cmd = WslSettings().command().replace("/mnt/c/Users", str(users)).replace(
        "/mnt/c/Windows", str(tmp_path / "Windows"))
    got = WslSettings().process(_run(cmd, bin_))
    assert got.wslconfig == f"{users}/me/.wslconfig", got
    assert got.kept_alive and got.memory == "24GB"


def test_the_quickstarts_systemd_line_turns_systemd_on_after_a_file_without_a_last_newline(
        tmp_path):
    """docs/quickstart-wsl2.md's line that turns systemd on, run as written (but on a copy
    of /etc/wsl.conf): after a wsl.conf whose last line has no newline (`[user]
    default=me`, as an editor may leave it) WSL's ini reader must still find `[boot]`
    `systemd=true`, not `default=me[boot]`."""
    import configparser
    import re
    import subprocess

    from .harness import ROOT

    doc = (ROOT / "docs" / "quickstart-wsl2.md").read_text()
    line = re.search(r"^sudo sh -c '(printf [^']*>> /etc/wsl\.conf)'", doc, re.M)
    assert line, "the quickstart shows no line that turns systemd on"
    conf = tmp_path / "wsl.conf"
    conf.write_text("[user]\ndefault=me")
    subprocess.run(["sh", "-c", line.group(1).replace("/etc/wsl.conf", str(conf))], check=True)
    ini = configparser.ConfigParser()
    ini.read(conf)
    assert ini.get("boot", "systemd", fallback=None) == "true", conf.read_text()
    assert ini.get("user", "default") == "me"
