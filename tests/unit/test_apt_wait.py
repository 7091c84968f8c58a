"""
The kit's wait for apt's and dpkg's locks (beekeeper.core.distro.apt_wait), run by `sh` on
this machine against a file locked by another process with fcntl, the kind of lock apt and
dpkg take (read back from the kernel's /proc/locks): it returns once the holder lets go,
names the holder while it waits, fails after its limit naming it and the fix, and does not
wait for a lock on another file.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from beekeeper.core.distro import apt_wait

HOLD = """
import fcntl, sys, time
f = open(sys.argv[1], "w")
(fcntl.flock if sys.argv[3] == "flock" else fcntl.lockf)(f, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(float(sys.argv[2]))
"""


def holder(path: Path, seconds: float, kind: str = "fcntl") -> subprocess.Popen[str]:
    """A process holding `path` locked: by fcntl (POSIX, as apt and dpkg lock), or flock."""
    p = subprocess.Popen([sys.executable, "-c", HOLD, str(path), str(seconds), kind],
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None and p.stdout.readline().strip() == "held"
    return p


def wait(locks: tuple[str, ...], limit_s: int = 60) -> tuple[subprocess.CompletedProcess[str],
                                                              float]:
    t0 = time.monotonic()
    p = subprocess.run(["sh", "-c", apt_wait(locks, limit_s=limit_s, step_s=1)],
                       capture_output=True, text=True, timeout=120)
    return p, time.monotonic() - t0


@pytest.fixture
def lock(tmp_path: Path) -> Path:
    path = tmp_path / "lock-frontend"
    path.touch()
    return path


def test_it_returns_once_the_holder_lets_go_and_names_it_meanwhile(lock):
    h = holder(lock, 4)
    try:
        p, took = wait((str(tmp_missing(lock)), str(lock)))
    finally:
        h.wait()
    assert p.returncode == 0, p.stderr
    assert took >= 2.5, took  # it waited (the holder had about 4 s left)
    assert f"waiting for process {h.pid} (python" in p.stderr and str(lock) in p.stderr


def test_a_holder_past_the_limit_fails_naming_it_and_the_fix(lock):
    h = holder(lock, 60)
    try:
        p, took = wait((str(lock),), limit_s=2)
    finally:
        h.kill()
        h.wait()
    assert p.returncode == 75
    last = p.stderr.strip().splitlines()[-1]
    assert last.startswith(f"process {h.pid} (python") and str(lock) in last, p.stderr
    assert "let it finish (or stop it), then deploy again" in last


@pytest.mark.parametrize("kind", ["another file", "flock"])
def test_a_lock_on_another_file_or_of_another_kind_is_not_waited_for(lock, tmp_path, kind):
    other = tmp_path / "other"
    other.touch()
    h = holder(other, 30) if kind == "another file" else holder(lock, 30, "flock")
    try:
        p, took = wait((str(lock),))
    finally:
        h.kill()
        h.wait()
    assert p.returncode == 0 and p.stderr == "" and took < 2, (p.stderr, took)


def tmp_missing(lock: Path) -> Path:
    """A lock file that does not exist (a host where apt never ran): skipped, not an error."""
    return lock.with_name("never-made")
