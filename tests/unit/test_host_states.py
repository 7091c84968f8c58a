"""
Hosts in the states users have them (issue 23, points 2, 6, 7 and 9): Secure Boot and a
driver that does not load, WSL's idle shutdown and memory, Docker Desktop beside a distro's
own engine, the example inventory. Facts are parsed from real command output where it could
be found (tests/unit/data/README-host-states.md, and the sources named below); the fact
commands run here under `sh` against stand-in binaries and files, never against a host.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from beekeeper.core.errors import PreflightError
from beekeeper.facts.boot import (
    SECUREBOOT_EFIVAR,
    SecureBoot,
    SecureBootInfo,
    WslSettings,
    WslSettingsInfo,
    parse_secure_boot,
)
from beekeeper.facts.docker import DockerEngine
from beekeeper.facts.gpu import NvidiaModuleInfo, parse_nvidia_module
from beekeeper.facts.host import Resources

from .harness import (
    DEFAULTS,
    NATIVE,
    NO_DRIVER,
    SB_ENABLED,
    _run_sh as _run,
    _stub,
    _tools,
    facts,
    names,
    run_deploy,
)

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parent / "data"
DKMS_MODULE = "/lib/modules/6.8.0-45-generic/updates/dkms/nvidia.ko.zst"  # typed by hand
INSTALL = "Install the NVIDIA driver"


# --- point 7: Docker Desktop, read from the engine -------------------------------------

def _docker_fact(tmp_path: Path, info: str, packages: str) -> list[str]:
    """What the DockerEngine command prints where `docker info` prints `info` (the file) and
    dpkg has `packages` installed; nothing under /mnt/wsl is consulted."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    _tools(bin_, "sed", "grep", "cat")
    _stub(bin_, "docker", f'[ "$1" = info ] && cat {DATA / info} && exit 0; exit 1')
    _stub(bin_, "dpkg-query", f'case " {packages} " in *" $3 "*) echo "install ok installed";; '
                              '*) exit 1;; esac')
    _stub(bin_, "systemctl", "echo active")
    return _run(DockerEngine().command(), bin_)


def test_docker_desktop_is_read_from_the_engine_not_from_mnt_wsl(tmp_path):
    assert "/mnt/wsl" not in DockerEngine().command()
    out = _docker_fact(tmp_path, "docker-info-desktop-wsl2.txt", "")
    got = DockerEngine().process(out)
    assert got.flavour == "docker-desktop" and got.present
    assert got.server_version == "20.10.22"
    assert not got.nvidia_runtime


def test_a_distro_with_its_own_engine_beside_desktop_is_read_as_its_own(tmp_path):
    # the same distro sees /mnt/wsl/docker-desktop (every distro does): it is not read
    out = _docker_fact(tmp_path, "docker-info-own-engine-wsl2.txt", "docker.io")
    got = DockerEngine().process(out)
    assert got.flavour == "distro" and got.server_version == "24.0.7"
    # preflight takes it as the kit's engine: no Desktop refusal, the deploy goes on
    ops = run_deploy(DEFAULTS, facts(DockerEngine=got))
    assert any(n.startswith("Build server image") for n in names(ops))
    # Desktop's own engine is still refused without use_docker_desktop, with that fix
    (tmp_path / "d").mkdir()
    desktop = DockerEngine().process(_docker_fact(tmp_path / "d", "docker-info-desktop-wsl2.txt",
                                                  "docker.io"))
    with pytest.raises(PreflightError, match="Docker Desktop.*use_docker_desktop = True"):
        run_deploy(DEFAULTS, facts(DockerEngine=desktop))


# --- point 2: Secure Boot, and a driver that does not load -----------------------------

SB_DISABLED = ["efi=1", "SecureBoot disabled"]
SB_SHIM_OFF = ["efi=1", "SecureBoot enabled", "SecureBoot validation is disabled in shim"]
SB_BIOS = ["efi=0", "EFI variables are not supported on this system"]  # stderr, 2>&1


def test_mokutil_sb_state_words_are_read():
    assert parse_secure_boot(SB_ENABLED).state == "enabled"
    assert parse_secure_boot(SB_DISABLED).state == "disabled"
    assert parse_secure_boot(SB_SHIM_OFF).state == "disabled"
    assert parse_secure_boot(SB_BIOS).state == "bios"
    # mokutil --test-key: "<key> is not enrolled" / "is already enrolled" (src/mokutil.c)
    sb = parse_secure_boot([*SB_ENABLED, "/var/lib/dkms/mok.pub is already enrolled"])
    assert sb.enrolled_key == "/var/lib/dkms/mok.pub"
    sb = parse_secure_boot([*SB_ENABLED, "/var/lib/dkms/mok.pub is already in the enrollment "
                                         "request"])
    assert sb.pending_key == "/var/lib/dkms/mok.pub" and not sb.enrolled_key


def _sb_fact(tmp_path: Path, mokutil: str | None, efivar: bytes | None, efi: bool = True):
    bin_ = tmp_path / "bin"
    bin_.mkdir(parents=True)
    _tools(bin_, "od", "head", "sed")
    if mokutil is not None:
        _stub(bin_, "mokutil", mokutil)
    fw = tmp_path / "efi"
    if efi:
        fw.mkdir()
    var = tmp_path / "SecureBoot"
    if efivar is not None:
        var.write_bytes(efivar)
    key = tmp_path / "mok.pub"
    key.write_text("stand-in certificate")
    cmd = (SecureBoot().command().replace(SECUREBOOT_EFIVAR, str(var))
           .replace("/sys/firmware/efi", str(fw))
           .replace("/var/lib/dkms/mok.pub", str(key)))
    return SecureBoot().process(_run(cmd, bin_)), key


def test_the_secure_boot_fact_with_and_without_mokutil(tmp_path):
    mok = ('[ "$1" = --sb-state ] && echo "SecureBoot enabled" && exit 0; '
           '[ "$1" = --test-key ] && echo "$2 is not enrolled" && exit 1')
    sb, key = _sb_fact(tmp_path / "a", mok, None)
    assert sb.state == "enabled" and sb.dkms_keys == ((str(key), "not-enrolled"),)
    # no mokutil: efivarfs's SecureBoot variable, 4 attribute bytes then the value
    # (layout per the kernel's efivarfs documentation; the bytes typed by hand)
    assert _sb_fact(tmp_path / "b", None, bytes([6, 0, 0, 0, 1]))[0].state == "enabled"
    assert _sb_fact(tmp_path / "c", None, bytes([6, 0, 0, 0, 0]))[0].state == "disabled"
    assert _sb_fact(tmp_path / "d", None, None)[0].state == "unknown"
    assert _sb_fact(tmp_path / "e", None, None, efi=False)[0].state == "bios"


def test_nvidia_module_fact_reads_the_module_and_the_boot_time():
    # /proc/stat's btime and stat -c %Y are seconds since the epoch (typed by hand)
    m = parse_nvidia_module([f"module={DKMS_MODULE}", "mtime=1767000000", "btime=1767100000"])
    assert m == NvidiaModuleInfo(path=DKMS_MODULE, loaded=False, since_boot=False)
    m = parse_nvidia_module([f"module={DKMS_MODULE}", "mtime=1767200000", "btime=1767100000",
                             "loaded=1"])
    assert m.since_boot and m.loaded
    assert parse_nvidia_module(["module=", "btime=1767100000"]).path is None


def test_secure_boot_on_and_no_key_is_refused_before_any_change_with_the_mok_path():
    with pytest.raises(PreflightError) as e:
        run_deploy(DEFAULTS, facts(**NO_DRIVER, SecureBoot=parse_secure_boot(SB_ENABLED)))
    msg = str(e.value)
    assert "\n" not in msg and "Secure Boot is on (SecureBoot enabled)" in msg
    assert "update-secureboot-policy --new-key" in msg and "--enroll-key" in msg  # Ubuntu
    assert "Enroll MOK" in msg and "disable Secure Boot" in msg


def test_secure_boot_on_with_the_dkms_key_enrolled_installs_the_driver():
    sb = parse_secure_boot([*SB_ENABLED, "/var/lib/shim-signed/mok/MOK.der is already enrolled"])
    ops = run_deploy(DEFAULTS, facts(**NO_DRIVER, SecureBoot=sb))
    assert any(n.startswith(INSTALL) for n in names(ops))


@pytest.mark.parametrize("sb", [SB_DISABLED, SB_BIOS, SB_SHIM_OFF])
def test_secure_boot_off_or_a_bios_boot_installs_the_driver(sb):
    ops = run_deploy(DEFAULTS, facts(**NO_DRIVER, SecureBoot=parse_secure_boot(sb)))
    assert any(n.startswith(INSTALL) for n in names(ops))


def test_a_driver_that_does_not_load_under_secure_boot_is_not_installed_again():
    module = NvidiaModuleInfo(path=DKMS_MODULE)
    pkgs = ["nvidia-dkms-580-open", "nvidia-driver-580-open"]
    with pytest.raises(PreflightError) as e:
        run_deploy(DEFAULTS, facts(**NO_DRIVER, NvidiaKernelModule=module,
                                   LinuxDriverPackages=pkgs,
                                   SecureBoot=parse_secure_boot(SB_ENABLED)))
    msg = str(e.value)
    assert "installed" in msg and "but not loaded" in msg and "Secure Boot is on" in msg
    assert "likely cause" in msg and "mokutil --import /var/lib/shim-signed/mok/MOK.der" in msg
    assert DKMS_MODULE in msg and "\n" not in msg


def test_a_driver_that_does_not_load_without_secure_boot_is_told_apart_from_no_driver():
    module = NvidiaModuleInfo(path=DKMS_MODULE)
    with pytest.raises(PreflightError, match=r"installed .* but not loaded .*Secure Boot is "
                                             r"disabled.*does not install a second driver"):
        run_deploy(DEFAULTS, facts(**NO_DRIVER, NvidiaKernelModule=module,
                                   SecureBoot=parse_secure_boot(SB_DISABLED)))
    fresh = replace(module, since_boot=True)  # installed by a run that did not reboot
    with pytest.raises(PreflightError, match="after the last boot; reboot the host"):
        run_deploy(DEFAULTS, facts(**NO_DRIVER, NvidiaKernelModule=fresh,
                                   SecureBoot=parse_secure_boot(SB_DISABLED)))
    ops = run_deploy({**DEFAULTS, "allow_reboot": True},
                     facts(**NO_DRIVER, NvidiaKernelModule=fresh,
                           SecureBoot=parse_secure_boot(SB_DISABLED)))
    assert any(n.startswith("Reboot to load the NVIDIA driver") for n in names(ops))


def test_secure_boot_is_never_read_under_wsl2():
    def refuse(**_):
        raise AssertionError("SecureBoot read under WSL2")

    ops = run_deploy(DEFAULTS, facts(SecureBoot=refuse, NvidiaKernelModule=refuse))
    assert ops


# --- point 6: WSL2's idle shutdown and its memory --------------------------------------

# keys as WSL's source spells them (src/windows/common/WslCoreConfig.h: general.
# instanceIdleTimeout, wsl2.vmIdleTimeout, wsl2.memory); the file itself typed by hand,
# with the CRLF line ends Notepad writes
WSLCONFIG = ("[wsl2]\r\nmemory=24GB\r\nvmIdleTimeout=-1\r\n\r\n"
             "[general]\r\ninstanceIdleTimeout=-1\r\n")


def test_the_wslconfig_is_read_from_the_windows_profile(tmp_path):
    users = tmp_path / "Users"
    (users / "me").mkdir(parents=True)
    (users / "me" / ".wslconfig").write_bytes(WSLCONFIG.encode())
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    _tools(bin_, "sed", "head", "od", "tr", "cat")
    _stub(bin_, "wslinfo", 'printf 2.5.7')  # WSL_PACKAGE_VERSION, no newline (wslinfo.cpp)
    cmd = WslSettings().command().replace("/mnt/c/Users", str(users))
    got = WslSettings().process(_run(cmd, bin_))
    assert got.wslconfig == f"{users}/me/.wslconfig" and got.kept_alive
    assert got.memory == "24GB" and got.vm_idle_timeout == -1 and got.wsl_version == "2.5.7"
    none = WslSettings().process(_run(WslSettings().command().replace(
        "/mnt/c/Users", str(tmp_path / "nobody")), bin_))
    assert none.wslconfig is None and not none.kept_alive


def test_the_distros_name_is_found_where_sudo_cleared_it(tmp_path):
    """pyinfra's --sudo runs the fact under `sudo -H -n sh -c`, which clears
    WSL_DISTRO_NAME: the name is read from the nearest ancestor that holds it (sudo, the
    shell wsl.exe started), so the logon task the idle warning prints names the distro; no
    other process's environment is read."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    _tools(bin_, "grep", "tr", "head", "cut", "sed", "env", "sh")
    cmd = WslSettings().command()
    # an unrelated process holding another name: never read
    other = subprocess.Popen(["sleep", "30"], env={"WSL_DISTRO_NAME": "Someone-Else"})
    try:
        # the ancestor (`sh`, as sudo's parent) holds the name; its child's environment is
        # cleared, as sudo clears it (`; true`: the ancestor stays a process of its own)
        under_sudo = ["sh", "-c", 'env -i PATH="$PATH" sh -c "$0"; true', cmd]
        got = WslSettings().process(subprocess.run(
            under_sudo, capture_output=True, text=True, timeout=30,
            env={"PATH": str(bin_), "WSL_DISTRO_NAME": "Ubuntu-24.04"}).stdout.splitlines())
        none = WslSettings().process(_run(cmd, bin_))  # no ancestor of its own holds one
    finally:
        other.kill()
        other.wait()
    assert got.distro == "Ubuntu-24.04"
    assert none.distro == os.environ.get("WSL_DISTRO_NAME", "")  # this test's own ancestors


@pytest.mark.parametrize("encoding", ["utf-16", "utf-8-sig"])
def test_the_windows_users_own_wslconfig_is_read_in_either_encoding_windows_writes(tmp_path,
                                                                                 encoding):
    """Two Windows profiles: the user's own (%USERPROFILE%, through cmd.exe and wslpath) is
    read, not the first one alphabetically; PowerShell's Out-File writes UTF-16 with a
    byte-order mark, Notepad UTF-8 with one (Python's utf-16 and utf-8-sig write the same)."""
    users = tmp_path / "Users"
    for who in ("alice", "me"):
        (users / who).mkdir(parents=True)
    (users / "alice" / ".wslconfig").write_bytes(b"[wsl2]\r\nmemory=4GB\r\n")
    (users / "me" / ".wslconfig").write_bytes(WSLCONFIG.encode(encoding))
    assert (users / "me" / ".wslconfig").read_bytes()[:2] in (b"\xff\xfe", b"\xef\xbb")
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    _tools(bin_, "sed", "head", "od", "tr", "iconv", "cat", "timeout")
    _stub(bin_, "wslinfo", "printf 2.5.7")
    # cmd.exe answers in CRLF; wslpath turns the Windows path into the automount's one
    _stub(bin_, "cmd.exe", r"printf 'C:\\Users\\me\r\n'")
    _stub(bin_, "wslpath", f'[ "$1 $2" = "-u C:\\Users\\me" ] && echo {users}/me')
    cmd = WslSettings().command().replace("/mnt/c/Users", str(users))
    got = WslSettings().process(_run(cmd, bin_))
    assert got.wslconfig == f"{users}/me/.wslconfig", got
    assert got.kept_alive and got.memory == "24GB" and got.vm_idle_timeout == -1
    # without interop (no cmd.exe answers) the profiles under /mnt/c/Users are read
    (bin_ / "cmd.exe").unlink()
    got = WslSettings().process(_run(cmd, bin_))
    assert got.wslconfig == f"{users}/alice/.wslconfig" and got.memory == "4GB"


def test_wsl2_warns_of_the_idle_shutdown_with_the_windows_fix(capsys):
    ops = run_deploy(DEFAULTS, facts())  # a warning, not a refusal: the deploy goes on
    assert ops
    err = capsys.readouterr().err
    line = next(x for x in err.splitlines() if "WSL2 stops this distro" in x)
    assert "microsoft/WSL#9667" in line and "`instanceIdleTimeout=-1` under `[general]`" in line
    assert "%UserProfile%\\.wslconfig" in line and "wsl --shutdown" in line
    assert 'schtasks /create /tn beekeeper-keepalive /sc onlogon /tr "wsl.exe -d' in line
    assert "--exec sleep infinity" in line


def test_no_idle_warning_once_the_wslconfig_keeps_the_distro(capsys):
    kept = WslSettingsInfo(wslconfig="/mnt/c/Users/me/.wslconfig", instance_idle_timeout=-1)
    run_deploy(DEFAULTS, facts(WslSettings=kept))
    assert "WSL2 stops this distro" not in capsys.readouterr().err
    # vmIdleTimeout alone keeps the VM, not the distro (microsoft/WSL#8654): still warned
    vm_only = WslSettingsInfo(wslconfig="/mnt/c/Users/me/.wslconfig", vm_idle_timeout=-1)
    run_deploy(DEFAULTS, facts(WslSettings=vm_only))
    assert "WSL2 stops this distro" in capsys.readouterr().err


def test_native_linux_gets_no_wsl_warning(capsys):
    run_deploy(DEFAULTS, facts(Wsl=NATIVE, GpuInfo=replace(
        facts()["GpuInfo"], path="/usr/bin/nvidia-smi")))
    assert "WSL2" not in capsys.readouterr().err


def test_wsl2_memory_below_the_model_and_the_build_is_warned_with_the_memory_fix(capsys):
    # a 16 GB Windows box: WSL2's default is half of it (WslCoreConfig.cpp, Initialize)
    small = Resources(cpus=16, mem_total_bytes=8 * 2**30 - 300 * 2**20, machine="x86_64",
                      cpu_flags=frozenset("sse4_2 avx avx2 fma f16c bmi2".split()))
    ops = run_deploy(DEFAULTS, facts(BuildResources=small))
    assert ops
    err = capsys.readouterr().err
    line = next(x for x in err.splitlines() if "WSL2 gave this distro" in x)
    assert "7.7 GiB" in line and "8.9 GiB, mmapped" in line  # the 9.5 GB Q8_0 file
    assert "`memory=14GB` under `[wsl2]`" in line and "wsl --shutdown" in line
    run_deploy(DEFAULTS, facts())  # 64 GiB: no memory warning
    assert "WSL2 gave this distro" not in capsys.readouterr().err


def test_secure_boot_unknown_facts_default_to_not_read():
    assert SecureBootInfo(state="unknown").enabled is False


# point 9, the example inventory: test_hosts_audit.py (the one test of it)
