"""
Facts about the tools already on a host: a CUDA toolkit (nvcc), the build tools, python3
and setpriv (runtime supervisor), and the kit's supervisord and its programs.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from pyinfra.api import FactBase

from beekeeper.core.paths import SUPERVISORCTL

BUILD_TOOLS = ("cmake", "c++", "make", "git")


@dataclass(frozen=True)
class HostToolsInfo:
    """What preflight needs of the host's own tools. `nvcc_version` as `nvcc --version`
    prints it ("13.0.88", from "release 13.0, V13.0.88"); each tool's path, None when
    missing; `python3_version` (3, 12); `apt_lists` the package lists apt has (0: none, as
    in a container image never `apt-get update`d)."""

    nvcc: str | None = None
    nvcc_version: str | None = None
    tools: tuple[tuple[str, str], ...] = ()
    python3: str | None = None
    python3_version: tuple[int, int] | None = None
    setpriv: str | None = None
    apt_lists: int = 0

    def path(self, tool: str) -> str | None:
        return dict(self.tools).get(tool)

    def missing(self, wanted: tuple[str, ...] = BUILD_TOOLS) -> list[str]:
        return [t for t in wanted if not self.path(t)]


def parse_host_tools(output: list[str]) -> HostToolsInfo:
    values: dict[str, str] = {}
    tools: list[tuple[str, str]] = []
    for line in output:
        key, _, value = line.strip().partition("=")
        value = value.strip()
        if key.startswith("tool:") and value:
            tools.append((key[5:], value))
        elif key and value:
            values.setdefault(key, value)
    release = values.get("nvcc_release", "")
    m = (re.search(r"release \d+\.\d+, V(\d+\.\d+\.\d+)", release)
         or re.search(r"release (\d+\.\d+)", release))
    nvcc_version = m.group(1) if m else None
    py = re.match(r"^(\d+)\.(\d+)$", values.get("python3_version", ""))
    lists = values.get("apt_lists", "0")
    return HostToolsInfo(
        nvcc=values.get("nvcc") if nvcc_version else None, nvcc_version=nvcc_version,
        tools=tuple(tools), python3=values.get("python3") if py else None,
        python3_version=(int(py.group(1)), int(py.group(2))) if py else None,
        setpriv=values.get("setpriv"), apt_lists=int(lists) if lists.isdigit() else 0)


class HostTools(FactBase[HostToolsInfo]):
    default = staticmethod(HostToolsInfo)

    def command(self) -> str:
        tools = "; ".join(f'echo "tool:{t}=$(command -v {t} || true)"' for t in BUILD_TOOLS)
        return (
            # nvcc off PATH: where NVIDIA's packages and the CUDA images put it
            "nvcc=$(command -v nvcc || { [ -x /usr/local/cuda/bin/nvcc ] && "
            "echo /usr/local/cuda/bin/nvcc; } || true); "
            'if [ -n "$nvcc" ]; then echo "nvcc=$nvcc"; '
            'echo "nvcc_release=$("$nvcc" --version 2>/dev/null | grep -o \'release .*\' '
            '| head -n1)"; fi; '
            f"{tools}; "
            # the system's python3 first: a venv's may go with the venv
            "py=$( [ -x /usr/bin/python3 ] && echo /usr/bin/python3 || command -v python3 "
            '|| true); if [ -n "$py" ]; then echo "python3=$py"; echo "python3_version=$('
            '"$py" -c \'import sys; print("%d.%d" % sys.version_info[:2])\' 2>/dev/null)"; '
            'fi; echo "setpriv=$(command -v setpriv || true)"; '
            'echo "apt_lists=$(ls /var/lib/apt/lists 2>/dev/null | grep -c _Packages || true)"'
        )

    process = staticmethod(parse_host_tools)


class SupervisorPrograms(FactBase[dict[str, str] | None]):
    """The kit's supervisord and its programs: None when it does not answer (not installed
    or not running), else each program's state (`supervisorctl status`)."""

    def command(self) -> str:
        ctl = shlex.quote(SUPERVISORCTL)
        # status exits 3 when a program is not running: its lines still say which
        return (f"if [ -x {ctl} ] && {ctl} pid >/dev/null 2>&1 && [ \"$({ctl} pid)\" -gt 0 ] "
                f"2>/dev/null; then echo supervisord=up; {ctl} status 2>/dev/null; fi; true")

    def process(self, output: list[str]) -> dict[str, str] | None:
        if not output or output[0].strip() != "supervisord=up":
            return None
        rows = (line.split() for line in output[1:])  # program state ("RUNNING", "FATAL")
        return {p[0]: p[1] for p in rows if len(p) >= 2 and re.match(r"^[A-Z]+$", p[1])}


class OthersCannotRead(FactBase[str]):
    """Why a user other than the owner cannot read `path` ("" when one can): the file lacks
    o+r, or a folder above it lacks o+x. The server runs as user beekeeper."""

    default = staticmethod(str)

    def command(self, path: str) -> str:
        return (f"f={shlex.quote(path)}; m=$(stat -Lc %a \"$f\") || exit 0; "
                '[ $(( 0$m & 4 )) -ne 0 ] || { echo "$f is mode $m, not readable by others"; '
                'exit 0; }; d=$(dirname "$f"); while [ "$d" != / ] && [ "$d" != . ]; do '
                'm=$(stat -Lc %a "$d"); [ $(( 0$m & 1 )) -ne 0 ] || { echo "folder $d is mode '
                '$m, others cannot pass through it"; exit 0; }; d=$(dirname "$d"); done; true')

    def process(self, output: list[str]) -> str:
        return " ".join(line.strip() for line in output).strip()
