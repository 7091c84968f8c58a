"""
Facts about the host: OS, init system, WSL2, free disk.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from pyinfra.api import FactBase

from . import ListFact


@dataclass(frozen=True)
class OsReleaseInfo:
    """The host's ``/etc/os-release``, the fields the kit reads."""

    id: str
    version_id: str

    def as_mapping(self) -> dict[str, str]:
        """The os-release keys beekeeper.core.distro reads (it knows no fact records)."""
        return {k: v for k, v in (("id", self.id), ("version_id", self.version_id)) if v}


def parse_os_release(output: list[str]) -> OsReleaseInfo:
    """`/etc/os-release` lines -> OsReleaseInfo(id="ubuntu", version_id="24.04")."""
    out: dict[str, str] = {}
    for line in output:
        line = line.strip()
        if "=" not in line or line.startswith("#"):
            continue
        key, _, value = line.partition("=")
        out[key.strip().lower()] = _os_release_value(value.strip())
    return OsReleaseInfo(id=out.get("id", ""), version_id=out.get("version_id", ""))


def _os_release_value(raw: str) -> str:
    """One os-release(5) value, read shell-style (quotes, backslash escapes); one the shell
    could not read (an unbalanced quote) loses its outer quotes: a fact is read, not judged."""
    try:
        words = shlex.split(raw, posix=True)
    except ValueError:
        return raw.strip("\"'")
    return " ".join(words)


class OsRelease(FactBase[OsReleaseInfo]):
    def command(self) -> str:
        return "cat /etc/os-release"

    process = staticmethod(parse_os_release)


@dataclass(frozen=True)
class InitInfo:
    """What runs as PID 1, and systemd's own state (`systemctl is-system-running`)."""

    pid1: str
    systemd: bool
    state: str


def parse_pid1(output: list[str]) -> InitInfo:
    comm = output[0].strip() if output else ""
    state = output[1].strip() if len(output) > 1 else "unknown"
    return InitInfo(pid1=comm, systemd=comm == "systemd", state=state)


class InitSystem(FactBase[InitInfo]):
    def command(self) -> str:
        return ("cat /proc/1/comm 2>/dev/null || ps -p 1 -o comm=; "
                "systemctl is-system-running 2>/dev/null || true")

    process = staticmethod(parse_pid1)


@dataclass(frozen=True)
class WslInfo:
    """Whether the host is WSL2; `kernel_release` is `uname -r` on any host."""

    kernel_release: str
    is_wsl2: bool
    dxg: bool
    wsl_conf_systemd: bool


def parse_wsl(output: list[str]) -> WslInfo:
    values = dict(line.split("=", 1) for line in output if "=" in line)
    kernel = values.get("kernel", "")
    dxg = values.get("dxg") == "1"
    is_wsl2 = "microsoft" in kernel.lower() and ("wsl2" in kernel.lower() or dxg)
    return WslInfo(
        kernel_release=kernel,
        is_wsl2=is_wsl2,
        dxg=dxg,
        wsl_conf_systemd=values.get("wslconf_systemd", "").lower() == "true",
    )


class Wsl(FactBase[WslInfo]):
    def command(self) -> str:
        return (
            'echo "kernel=$(uname -r)"; '
            'if [ -e /dev/dxg ]; then echo dxg=1; else echo dxg=0; fi; '
            "echo \"wslconf_systemd=$(sed -n 's/^[[:space:]]*systemd[[:space:]]*=[[:space:]]*"
            "\\([a-z]*\\).*/\\1/p' /etc/wsl.conf 2>/dev/null | tail -n1)\""
        )

    process = staticmethod(parse_wsl)


@dataclass(frozen=True)
class PortOwner:
    """One process holding a listening TCP socket, as /proc shows it: ``pid`` None where the
    socket's holder could not be found (another PID namespace, /proc/<pid>/fd unreadable)."""

    pid: int | None
    ppid: int = 0
    user: str = ""  # the owner of /proc/<pid> (its effective user), by name ("" unknown)
    exe: str = ""  # the /proc/<pid>/exe target (" (deleted)" cut off)
    comm: str = ""
    # the parent's parent and so on, up to (not including) PID 1: where a wrapper sits
    # between supervisord and the server, supervisord is still found
    ancestors: tuple[int, ...] = ()
    cgroups: tuple[str, ...] = ()  # /proc/<pid>/cgroup's paths ("/system.slice/x.service")
    inode: str = ""  # the listening socket's inode

    @property
    def program(self) -> str:
        return self.exe or self.comm or "?"


@dataclass(frozen=True)
class PortOwnersInfo:
    """Every listener on one TCP port, the kit's supervisord (from its pidfile, where that
    process is a supervisord), and the native build folder as the host resolves it."""

    owners: tuple[PortOwner, ...] = ()
    supervisord: int | None = None
    native_prefix_real: str = ""


def parse_port_owners(output: list[str]) -> PortOwnersInfo:
    """`socket=INODE` opens a listening socket, each `pid=` after it one process holding it
    (its other lines follow); a socket with no `pid=` line is a listener whose holder /proc
    did not show."""
    owners: list[PortOwner] = []
    supervisord: int | None = None
    prefix = ""
    inode = ""
    current: dict[str, str] | None = None
    pending = False  # a socket= line not followed by a pid= line yet

    def close() -> None:
        nonlocal current
        if current is not None:
            owners.append(_owner(current, inode))
        current = None

    for raw in [*output, "socket="]:  # the last socket's holders closed by a sentinel
        k, eq, v = raw.strip().partition("=")
        if not eq:
            continue
        v = v.strip()
        if k == "supervisord":
            supervisord = int(v) if v.isdigit() else None
        elif k == "native_prefix":
            prefix = v
        elif k == "socket":
            close()
            if pending:
                owners.append(PortOwner(pid=None, inode=inode))
            inode, pending = v, True
        elif k == "pid":
            close()
            if v.isdigit():
                current, pending = {"pid": v}, False
        elif current is not None:
            current[k] = v
    seen: set[int | None] = set()
    unique = []
    for o in owners:  # one process holding both sockets (tcp and tcp6) is one owner
        if o.pid is None or o.pid not in seen:
            unique.append(o)
            seen.add(o.pid)
    return PortOwnersInfo(owners=tuple(unique), supervisord=supervisord,
                          native_prefix_real=prefix)


def _owner(values: dict[str, str], inode: str) -> PortOwner:
    exe = values.get("exe", "").removesuffix(" (deleted)")
    ppid = values.get("ppid", "")
    return PortOwner(
        pid=int(values["pid"]), ppid=int(ppid) if ppid.isdigit() else 0,
        user=values.get("user", "").strip(), exe=exe, comm=values.get("comm", "").strip(),
        ancestors=tuple(int(a) for a in values.get("ancestors", "").split() if a.isdigit()),
        cgroups=tuple(line.split(":", 2)[2] for line in values.get("cgroup", "").split()
                      if line.count(":") >= 2),
        inode=inode)


def exe_sh(pid: str, readlink: str = "readlink") -> str:
    """Shell that sets `exe` to process `pid`'s binary: /proc/PID/exe, else (a container's
    root without CAP_SYS_PTRACE cannot read another user's) its command line's first word,
    as its parent started it."""
    return (f'exe=$({readlink} "/proc/{pid}/exe" 2>/dev/null); [ -n "$exe" ] || '
            f'exe=$(tr \'\\0\' \'\\n\' < "/proc/{pid}/cmdline" 2>/dev/null | head -n 1)')


# The PortOwners command: the listening sockets on a port (state 0A), the processes holding
# each (fd links `socket:[INODE]`) and what parse_port_owners reads of them. @PORT@: in hex.
PORT_OWNERS_SH = r"""sv=$(cat @PIDFILE@ 2>/dev/null | tr -dc 0-9)
if [ -n "$sv" ] && tr '\0' ' ' < "/proc/$sv/cmdline" 2>/dev/null | grep -q supervisord; then
  echo "supervisord=$sv"; fi
echo "native_prefix=$(readlink -f @PREFIX@ 2>/dev/null)"
for rec in $(awk -v p=@PORT@ 'FNR > 1 && $4 == "0A" { n = split($2, a, ":"); \
    if (a[n] == p) print $10 ":" $8 }' /proc/net/tcp /proc/net/tcp6 2>/dev/null | sort -u); do
  i=${rec%%:*}; u=${rec##*:}
  echo "socket=$i"
  holders=$(find /proc/[0-9]*/fd -maxdepth 1 -lname "socket:\[$i\]" 2>/dev/null \
      | cut -d/ -f3 | sort -un)
  if [ -z "$holders" ] && [ "$u" != 0 ]; then
    # no CAP_SYS_PTRACE (a container's root): another user's fds are hidden, so every
    # process of the socket's user stands for its holder
    echo "guess=uid $u"
    holders=$(awk -v u="$u" '/^Uid:/ { if ($2 == u) { split(FILENAME, f, "/"); print f[3] }
      nextfile }' /proc/[0-9]*/status 2>/dev/null | sort -un)
  fi
  for p in $holders; do
    pp=$(awk '/^PPid:/ { print $2 }' "/proc/$p/status" 2>/dev/null)
    echo "pid=$p"; echo "ppid=$pp"; echo "user=$(stat -c %U "/proc/$p" 2>/dev/null)"
    @EXE@
    echo "exe=$exe"
    echo "comm=$(cat "/proc/$p/comm" 2>/dev/null)"
    a=$pp; chain=""; n=0
    while [ -n "$a" ] && [ "$a" -gt 1 ] && [ "$n" -lt 64 ]; do
      chain="$chain $a"; n=$((n + 1))
      a=$(awk '/^PPid:/ { print $2 }' "/proc/$a/status" 2>/dev/null)
    done
    echo "ancestors=$chain"; echo "cgroup=$(tr '\n' ' ' < "/proc/$p/cgroup" 2>/dev/null)"
  done
done
true""".replace("@EXE@", exe_sh("$p"))


class PortOwners(FactBase[PortOwnersInfo]):
    """Returns every process listening on a TCP port, read from /proc (a GPU container's
    image often lacks `ss`)."""

    default = staticmethod(PortOwnersInfo)  # no output: nothing listening

    def command(self, port: int, pidfile: str, native_prefix: str) -> str:
        return (PORT_OWNERS_SH.replace("@PORT@", f"{int(port):04X}")
                .replace("@PIDFILE@", shlex.quote(pidfile))
                .replace("@PREFIX@", shlex.quote(native_prefix)))

    process = staticmethod(parse_port_owners)


class AptHolds(ListFact[str]):
    """Returns the packages apt holds: ``["cuda-drivers-580"]``."""

    def command(self) -> str:
        return "apt-mark showhold 2>/dev/null || true"

    def process(self, output: list[str]) -> list[str]:
        return sorted(line.strip() for line in output if line.strip())


@dataclass(frozen=True)
class AptPolicyInfo:
    """One package as `apt-cache policy` shows it: the installed version and the one apt
    would install (None: not installed / nothing offered, or apt knows no such package)."""

    installed: str | None = None
    candidate: str | None = None


def parse_apt_policy(output: list[str]) -> AptPolicyInfo:
    """`apt-cache policy haproxy` -> AptPolicyInfo(installed=None, candidate="2.6.12-1+deb12u3")."""
    found: dict[str, str | None] = {"Installed": None, "Candidate": None}
    for line in output:
        key, _, value = line.strip().partition(":")
        if key in found and found[key] is None:
            v = value.strip()
            found[key] = None if v in ("", "(none)") else v
    return AptPolicyInfo(installed=found["Installed"], candidate=found["Candidate"])


class AptPolicy(FactBase[AptPolicyInfo]):
    """Returns what apt has and offers of one package (from the lists the host has now)."""

    default = staticmethod(AptPolicyInfo)

    def command(self, package: str) -> str:
        return f"LC_ALL=C apt-cache policy {shlex.quote(package)} 2>/dev/null || true"

    process = staticmethod(parse_apt_policy)


@dataclass(frozen=True)
class AptSource:
    """An apt source file and the keyring it names (None: apt's trusted keys)."""

    path: str
    signed_by: str | None


class AptSourcesFor(ListFact[AptSource]):
    """Returns the apt source files (one-line ``.list`` or deb822 ``.sources``) that name a
    repository URL, with the keyring each names (``signed-by`` / ``Signed-By``)."""

    def command(self, url: str) -> str:
        q = shlex.quote(url.rstrip("/"))
        return (
            f"for f in $(grep -lsF -- {q} /etc/apt/sources.list /etc/apt/sources.list.d/*.list "
            "/etc/apt/sources.list.d/*.sources); do "
            "s=$(grep -ohiE '(signed-by[=:] *)[^] ,]+' \"$f\" | head -n1 "
            "| sed -E 's/^[Ss]igned-[Bb]y[=:] *//'); "
            'printf \'%s\\t%s\\n\' "$f" "$s"; done; true'
        )

    def process(self, output: list[str]) -> list[AptSource]:
        rows = (line.partition("\t") for line in output)
        return [AptSource(path=path.strip(), signed_by=signed.strip() or None)
                for path, _, signed in rows if path.strip()]


@dataclass(frozen=True)
class Resources:
    cpus: int = 1
    mem_total_bytes: int = 0
    machine: str = ""  # `uname -m`
    cpu_flags: frozenset[str] = frozenset()  # /proc/cpuinfo `flags` (x86) or `Features` (Arm)
    cpu_model: str = ""


def parse_resources(output: list[str]) -> Resources:
    """`nproc`, MemTotal in kB, `uname -m`, then `key: value` lines of /proc/cpuinfo."""
    lines = [line.strip() for line in output]
    nums = [int(x) for x in lines[:2] if x.isdigit()]
    cpuinfo = dict(line.split(":", 1) for line in lines[3:] if ":" in line)
    cpuinfo = {k.strip().lower(): v.strip() for k, v in cpuinfo.items()}
    flags = cpuinfo.get("flags") or cpuinfo.get("features") or ""
    return Resources(cpus=nums[0] if nums else 1,
                     mem_total_bytes=nums[1] * 1024 if len(nums) > 1 else 0,
                     machine=lines[2] if len(lines) > 2 else "",
                     cpu_flags=frozenset(flags.split()),
                     cpu_model=cpuinfo.get("model name", ""))


class BuildResources(FactBase[Resources]):
    """Cores and memory for sizing parallel compile jobs, and the processor the server's
    CPU code must run on."""

    def command(self) -> str:
        return ("nproc; awk '/^MemTotal:/ {print $2}' /proc/meminfo; uname -m; "  # kB
                "grep -m1 -E '^model name[[:space:]]*:' /proc/cpuinfo; "
                "grep -m1 -iE '^(flags|Features)[[:space:]]*:' /proc/cpuinfo; true")

    process = staticmethod(parse_resources)


def parse_debian_components(output: list[str]) -> list[str]:
    """`deb URI suite area...` lines and deb822 `Components:` lines of Debian's sources ->
    the archive areas enabled (["main", "non-free-firmware"])."""
    out: list[str] = []
    for line in output:
        words = line.split()
        if words[:1] == ["Components:"]:
            areas = words[1:]
        elif words[:1] in (["deb"], ["deb-src"]):
            rest = [w for w in words[1:] if not w.startswith("[")]
            areas = rest[2:]
        else:
            continue
        out += [a for a in areas if a not in out]
    return out


class DebianComponents(ListFact[str]):
    def command(self) -> str:
        return ("for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list "
                "/etc/apt/sources.list.d/*.sources; do [ -f \"$f\" ] && grep -q debian \"$f\" "
                "&& grep -hE '^(deb|deb-src|Components:) ' \"$f\"; done; true")

    process = staticmethod(parse_debian_components)


@dataclass(frozen=True)
class DiskInfo:
    """The file system that holds a path: its mount point and free bytes (`df -PB1`), and
    what df names it by (its first column: "/dev/sdc", "overlay"; under WSL2 a Windows
    drive's letter, "C:\\", wherever wsl.conf's automount root puts it)."""

    mount: str
    free_bytes: int
    filesystem: str = ""

    @property
    def windows_drive(self) -> bool:
        """A Windows drive (drvfs, over 9p) or share seen from WSL2: "C:\\", "D:", "\\\\srv"."""
        return bool(re.match(r"^([A-Za-z]:|\\\\)", self.filesystem))


def parse_df_disk(output: list[str]) -> DiskInfo | None:
    for line in output[1:]:
        parts = line.split()
        if len(parts) >= 6 and parts[3].isdigit():
            return DiskInfo(mount=parts[5], free_bytes=int(parts[3]), filesystem=parts[0])
    return None


class DiskOf(FactBase[DiskInfo | None]):
    """Returns the file system that holds ``path`` (or its nearest existing parent): its
    mount point and free bytes."""

    def command(self, path: str) -> str:
        q = shlex.quote(path)
        return f'p={q}; while [ ! -e "$p" ]; do p=$(dirname "$p"); done; df -PB1 "$p"'

    process = staticmethod(parse_df_disk)


PROXY_NAMES = ("http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY",
               "NO_PROXY")


class ProxyVars(FactBase[tuple[str, ...]]):
    """Returns the proxy variables /etc/environment sets, by name (the values stay on the
    host: a proxy URL may carry a password)."""

    default = staticmethod(tuple)

    def command(self) -> str:
        return ("[ -r /etc/environment ] && grep -iE '^ *(export +)?(http|https|no)_proxy=' "
                "/etc/environment | sed -E 's/=.+$/=set/'; true")

    def process(self, output: list[str]) -> tuple[str, ...]:
        out: list[str] = []
        for line in output:  # `[export ]NAME=value`
            name, eq, value = line.strip().removeprefix("export ").strip().partition("=")
            if eq and name in PROXY_NAMES and value.strip().strip("'\"") and name not in out:
                out.append(name)
        return tuple(out)
