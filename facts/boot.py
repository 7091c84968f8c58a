"""
Facts about how the host boots and stays up: Secure Boot on native Linux (whether a
DKMS-built NVIDIA module can load), and under WSL2 the Windows-side settings that decide
whether the distro, and the server in it, keeps running once no terminal is open.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pyinfra.api import FactBase

# Where DKMS keeps the key it signs modules with: Ubuntu's update-secureboot-policy key
# (dkms.in, prepare_mok on ubuntu*), else DKMS's own (dell/dkms README, "Secure Boot").
DKMS_KEYS = ("/var/lib/shim-signed/mok/MOK.der", "/var/lib/dkms/mok.pub")
# the SecureBoot variable in efivarfs: 4 bytes of attributes, then the value (1: on)
SECUREBOOT_EFIVAR = "/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"


@dataclass(frozen=True)
class SecureBootInfo:
    """
    `state`: "enabled", "disabled", "bios" (no EFI variables: a BIOS boot, no Secure Boot),
    or "unknown" (no mokutil and no readable efivar). `line`: what mokutil said.
    `dkms_keys`: each DKMS signing key found, with "enrolled", "pending" (imported, the
    enrolment waits for a reboot into MOK manager) or "not-enrolled".
    """

    state: str
    line: str = ""
    dkms_keys: tuple[tuple[str, str], ...] = field(default_factory=tuple)

    @property
    def enabled(self) -> bool:
        return self.state == "enabled"

    @property
    def enrolled_key(self) -> str | None:
        return next((k for k, s in self.dkms_keys if s == "enrolled"), None)

    @property
    def pending_key(self) -> str | None:
        return next((k for k, s in self.dkms_keys if s == "pending"), None)


def _sb_state(lines: list[str]) -> tuple[str, str]:
    """mokutil --sb-state's words (lcp/mokutil src/mokutil.c) -> (state, the line)."""
    text = [line.strip() for line in lines]
    if "SecureBoot enabled" in text:
        # shim's own validation off (MokSBStateRT): the kernel then treats Secure Boot as off
        if "SecureBoot validation is disabled in shim" in text:
            return "disabled", "SecureBoot validation is disabled in shim"
        return "enabled", "SecureBoot enabled"
    if "SecureBoot disabled" in text:
        return "disabled", "SecureBoot disabled"
    if "EFI variables are not supported on this system" in text:
        return "bios", "EFI variables are not supported on this system"
    return "", ""


def parse_secure_boot(output: list[str]) -> SecureBootInfo:
    state, line = _sb_state(output)
    values = dict(x.split("=", 1) for x in output if re.match(r"^(mokutil|efi|efivar)=", x))
    if state == "bios" and values.get("efi") == "1":
        # mokutil found no EFI variables, but the kernel booted by UEFI (efivarfs not
        # mounted): Secure Boot may be on, so it is not known (preflight warns)
        state = "unknown"
    if not state:
        if values.get("efi") == "0":
            state = "bios"
        else:  # efivarfs: attributes (4 bytes), then the variable's one byte
            octets = values.get("efivar", "").split()
            state = ("unknown" if len(octets) < 5 else
                     "enabled" if octets[4] == "1" else "disabled")
    keys: list[tuple[str, str]] = []
    for x in output:  # mokutil --test-key <key>: "<key> is already enrolled" / "is not enrolled"
        m = re.match(r"^(/\S+) is (already enrolled|not enrolled|already in the enrollment "
                     r"request)", x.strip())
        if m:
            status = {"already enrolled": "enrolled", "not enrolled": "not-enrolled"}.get(
                m.group(2), "pending")
            keys.append((m.group(1), status))
    return SecureBootInfo(state=state, line=line, dkms_keys=tuple(keys))


class SecureBoot(FactBase[SecureBootInfo]):
    """Returns the Secure Boot state (native Linux; never read under WSL2) and whether a
    DKMS signing key is enrolled as a Machine Owner Key."""

    def command(self) -> str:
        keys = " ".join(DKMS_KEYS)
        return (
            "if [ -d /sys/firmware/efi ]; then echo efi=1; else echo efi=0; fi; "
            "if command -v mokutil >/dev/null 2>&1; then mokutil --sb-state 2>&1; "
            f'for k in {keys}; do [ -f "$k" ] && mokutil --test-key "$k" 2>&1; done; '
            "else echo mokutil=absent; "
            f"od -An -t u1 {SECUREBOOT_EFIVAR} 2>/dev/null | head -n1 | sed 's/^/efivar=/'; "
            "fi; true"
        )

    process = staticmethod(parse_secure_boot)


@dataclass(frozen=True)
class WslSettingsInfo:
    """
    What WSL2 is told from the Windows side, as far as the distro can see it: the
    `%UserProfile%\\.wslconfig` files under /mnt/c/Users (the path of the first, or None),
    its `[general] instanceIdleTimeout` and `[wsl2] vmIdleTimeout` (ms; negative: never)
    and `[wsl2] memory`; `wslinfo --wsl-version` ("2.5.7", "" when wslinfo is missing);
    the distro's name (WSL_DISTRO_NAME, here or in the nearest ancestor holding it; "" when
    none does).
    """

    wslconfig: str | None = None
    instance_idle_timeout: int | None = None
    vm_idle_timeout: int | None = None
    memory: str | None = None
    wsl_version: str = ""
    distro: str = ""

    @property
    def kept_alive(self) -> bool:
        """The distro is never idle-terminated (instanceIdleTimeout < 0)."""
        return self.instance_idle_timeout is not None and self.instance_idle_timeout < 0


def _int(value: str) -> int | None:
    return int(value) if re.match(r"^-?\d+$", value) else None


def parse_wsl_settings(output: list[str]) -> WslSettingsInfo:
    """`file=<path>` then that .wslconfig's lines; `wslversion=`, `distro=` -> settings."""
    found: dict[str, str] = {}
    path: str | None = None
    section = ""
    meta = {"wslversion": "", "distro": ""}
    for raw in output:
        line = raw.strip()
        key, _, value = line.partition("=")
        if key in meta and not section and raw == line:
            meta[key] = value.strip()
        elif key == "file":
            if path is not None:
                break  # the first .wslconfig only
            path, section = value, "-"
        elif re.match(r"^\[[A-Za-z0-9]+\]$", line):
            section = line[1:-1].lower()
        elif path and "=" in line and not line.startswith(("#", ";")):
            found[f"{section}.{key.strip().lower()}"] = value.split("#")[0].strip()
    return WslSettingsInfo(
        wslconfig=path,
        instance_idle_timeout=_int(found.get("general.instanceidletimeout", "")),
        vm_idle_timeout=_int(found.get("wsl2.vmidletimeout", "")),
        memory=found.get("wsl2.memory") or None,
        wsl_version=meta["wslversion"], distro=meta["distro"])


class WslSettings(FactBase[WslSettingsInfo]):
    def command(self) -> str:
        # The Windows user's own profile first (cmd.exe through WSL interop, its path made a
        # Linux one by wslpath: any automount root), then every profile under /mnt/c/Users;
        # the parser takes the first file. Notepad may save UTF-8 with a byte-order mark,
        # PowerShell's Out-File UTF-16: both are read as UTF-8, CRLF as LF.
        return (
            'echo "wslversion=$(wslinfo --wsl-version 2>/dev/null)"; '
            # sudo (pyinfra's --sudo) clears WSL_DISTRO_NAME: then the nearest ancestor's
            # (sudo's, the shell wsl.exe started), no other process's; none over SSH: ""
            'd=${WSL_DISTRO_NAME:-}; p=$$; while [ -z "$d" ] && [ "${p:-1}" -gt 1 ]; do '
            'd=$(grep -a -z "^WSL_DISTRO_NAME=" "/proc/$p/environ" 2>/dev/null | '
            "tr '\\0' '\\n' | head -n 1 | cut -d= -f2-); "
            'p=$(sed -n "s/.*) . \\([0-9]*\\) .*/\\1/p" "/proc/$p/stat" 2>/dev/null); done; '
            'echo "distro=$d"; '
            "conf() { case \"$(head -c 2 \"$1\" | od -An -tx1 | tr -d ' \\n')\" in "
            "fffe|feff) iconv -f UTF-16 -t UTF-8 \"$1\" ;; *) cat \"$1\" ;; esac | "
            "LC_ALL=C sed -e '1s/^\\xef\\xbb\\xbf//' -e 's/\\r$//'; }; "
            # cmd.exe by its path where it is off PATH: pyinfra's --sudo runs this under
            # sudo's secure_path, which holds no Windows folder
            'cmd=$(command -v cmd.exe || echo /mnt/c/Windows/System32/cmd.exe); '
            "own=$(cd / && timeout 10 \"$cmd\" /c 'echo %USERPROFILE%' 2>/dev/null | tr -d '\\r'); "
            '[ -z "$own" ] || own=$(wslpath -u "$own" 2>/dev/null); '
            'for f in ${own:+"$own/.wslconfig"} /mnt/c/Users/*/.wslconfig; do [ -f "$f" ] && '
            '{ echo "file=$f"; conf "$f"; echo; }; done; true'
        )

    process = staticmethod(parse_wsl_settings)
