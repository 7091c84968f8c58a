"""Run the kit's real commands against the sandbox host and read their output."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from beekeeper.sandbox import CONTAINER

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


@dataclass
class Run:
    rc: int
    out: str
    wall_s: float


def pyinfra(*args: str, timeout: int = 1800) -> Run:
    t0 = time.monotonic()
    p = subprocess.run([str(BIN / "pyinfra"), *args], cwd=ROOT, capture_output=True,
                       text=True, timeout=timeout)
    out = p.stdout + p.stderr
    return Run(p.returncode, out, time.monotonic() - t0)


# the stand-ins of tests/integration/conftest.py, while a session's sandbox is up
STANDINS: Any = None


def deploy(*extra: str, dry: bool = False) -> Run:
    if STANDINS is not None:
        STANDINS.ensure_tunnel()  # the host may have restarted since the last deploy
    args = ["--dry"] if dry else ["-y"]
    return pyinfra(*args, "inventories/sandbox.py", "deploy.py", *extra)


def results(out: str) -> dict[str, tuple[str, str, str]]:
    """The results table: op name -> (success, error, no change)."""
    rows: dict[str, tuple[str, str, str]] = {}
    section = out.split("--> Results:", 1)[-1]
    for line in section.splitlines():
        cols = re.split(r"\s{2,}", line.strip())
        if len(cols) == 5 and cols[0] not in ("Operation", "Grand total"):
            rows[cols[0]] = (cols[2], cols[3], cols[4])
    return rows


def grand_total(out: str) -> tuple[str, str, str, str]:
    m = re.search(r"Grand total\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)", out)
    assert m, out[-2000:]
    return m.group(1), m.group(2), m.group(3), m.group(4)


def detected_changes(out: str) -> set[str]:
    """Op names the dry run says will change (its 'Change' column is not '-')."""
    names = set()
    section = out.split("--> Detected changes:", 1)[-1]
    for line in section.splitlines():
        cols = re.split(r"\s{2,}", line.strip())
        if len(cols) == 3 and cols[0] != "Operation" and cols[1] != "-":
            names.add(cols[0])
    return names


def sandbox_exec(cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", "exec", CONTAINER, "bash", "-c", cmd],
                          capture_output=True, text=True)
