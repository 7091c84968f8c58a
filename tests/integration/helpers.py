"""Run the kit's real commands against the sandbox host and read their output."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from beekeeper import sandbox
from beekeeper.sandbox import CONTAINER

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
# the second sandbox host (Debian 13), beside the first: conftest's trixie_sandbox
SECOND = f"{CONTAINER}-b"
SECOND_INVENTORY = "tests/integration/inventory_trixie.py"
SERVER_REPO = "beekeeper/llama-server"
# scripts/test.sh runs the tier as two lanes side by side, each with its own set of sandbox
# hosts (BEEKEEPER_SANDBOX_NAME/_PORT/_DIR): "main" builds the server image from nothing;
# "side" waits for that build, makes its hosts, then takes the image (same inputs, same tag)
# and runs its modules. Unset: one process runs every module (a developer's pytest).
LANE = os.environ.get("BEEKEEPER_TEST_LANE", "")
# the main lane's first host, and the file where it says which image it built
MAIN_HOST = os.environ.get("BEEKEEPER_TEST_MAIN_HOST", CONTAINER)
BUILT = ROOT / ".cache" / "integration-main.built"
MAIN_DONE = ROOT / ".cache" / "integration-main.done"  # scripts/test.sh: the main lane ended
# the lanes' lock: a test that measures speed holds it alone (conftest's _lanes_share_the_machine)
QUIET_LOCK = ROOT / ".cache" / "integration-lanes.lock"


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


def deploy(*extra: str, dry: bool = False, inventory: str = "inventories/sandbox.py") -> Run:
    if STANDINS is not None:
        STANDINS.ensure_tunnel()  # a host may have restarted since the last deploy
    args = ["--dry"] if dry else ["-y"]
    run = pyinfra(*args, inventory, "deploy.py", *extra)
    # Once in a CI run (2026-12-02) a just-started Debian 13 sandbox host dropped pyinfra's
    # SSH connection while its facts were read ("Command socket/SSH error: OSError('Socket
    # is closed')", then "could not load fact"): the host failed before any of its
    # operations ran, and the same deploy passed when run again. That is the sandbox's SSH,
    # not what the kit does: a deploy that lost a host's SSH connection runs once more (a
    # second deploy converges: test_faults' interrupted deploy proves it), and says so.
    if run.rc != 0 and "Command socket/SSH error" in run.out:
        print("\n[flake] a sandbox host's SSH connection closed while pyinfra read its facts: "
              "deploying once more")
        if STANDINS is not None:
            STANDINS.ensure_tunnel()
        run = pyinfra(*args, inventory, "deploy.py", *extra)
    return run


def first_deploy(what: str) -> Run:
    """A module's first deploy into a fresh sandbox host, its time printed as a figure. In
    the main lane the first one builds the server image: its tag is written for the side
    lane, which waits for it (wait_for_main_build)."""
    run = deploy()
    print(f"\n[figure] first deploy ({what}): {run.wall_s:.0f} s")
    assert run.rc == 0, why(run.out)
    if LANE == "main" and not BUILT.exists():
        tag = json.loads(sandbox_exec("cat /etc/beekeeper/llm/deployed.json").stdout)["image"]
        BUILT.with_suffix(".part").write_text(tag)
        BUILT.with_suffix(".part").replace(BUILT)
    return run


def wait_for_main_build(timeout_s: float = 2400) -> str:
    """The side lane: the tag of the server image the main lane's first host built (its
    first deploy from nothing), once it is there."""
    deadline = time.monotonic() + timeout_s
    while not BUILT.exists():
        if MAIN_DONE.exists() and not BUILT.exists():
            raise RuntimeError("the main lane ended without building the server image (its "
                               "first deploy failed, or its modules were not selected): see "
                               "its log")
        if time.monotonic() > deadline:
            raise RuntimeError(f"the main lane built no server image in {timeout_s:.0f} s "
                               f"({BUILT} missing): see its log")
        time.sleep(2)
    return BUILT.read_text().strip()


def provision_and_share(inventory: str = SECOND_INVENTORY, name: str = SECOND) -> list[str]:
    """A second host's first steps: its Docker engine from its distro (stage `provision`
    only), then the first host's server images copied in, so that its deploy builds
    nothing. Returns the tags copied."""
    run = deploy("--data", 'stages=["provision"]', inventory=inventory)
    assert run.rc == 0, run.out[-3000:]
    return share_server_image(name)


def share_server_image(dst: str = SECOND) -> list[str]:
    """Copy every server image the first sandbox host has built into `dst`'s Docker: the
    second host's deploy then finds its tag and builds nothing (the same inputs give the same
    tag on both). Returns the tags copied; empty when the first host has built none yet (then
    `dst` builds its own, slower but just as correct)."""
    p = subprocess.run(["docker", "exec", CONTAINER, "docker", "images", "--format",
                        "{{.Repository}}:{{.Tag}}", SERVER_REPO],
                       capture_output=True, text=True)
    tags = [t for t in p.stdout.split() if t.startswith(f"{SERVER_REPO}:")] \
        if p.returncode == 0 else []
    return [t for t in tags if copy_image(t, CONTAINER, dst)]


def why(out: str, tail: int = 3000) -> str:
    """A failed run's lines that name an error (wherever they stand: in a run of several
    hosts, the failing one's can be far above the end), then the run's last lines: the
    assertion message of a deploy that had to pass."""
    said = [line for line in out.splitlines()
            if re.search(r"error|failed|Traceback|\[unreachable\]", line, re.IGNORECASE)]
    return "\n".join(["--- lines naming an error:", *said[-40:], "--- the end:", out[-tail:]])


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


def sandbox_exec(cmd: str, name: str = CONTAINER) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", "exec", name, "bash", "-c", cmd],
                          capture_output=True, text=True)


def healthy(port: int = 8083, name: str = CONTAINER) -> bool:
    """The server on a sandbox host's loopback answers /health 200."""
    return sandbox_exec(f"curl -fsS -m 2 http://127.0.0.1:{port}/health", name).returncode == 0


def wait_until(pred, deadline_s: float, what: str = "", interval_s: float = 0.5) -> float:
    """Seconds until `pred()` holds, asked every `interval_s`; AssertionError past the
    deadline, saying `what` was waited for."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < deadline_s:
        if pred():
            return time.monotonic() - t0
        time.sleep(interval_s)
    raise AssertionError(f"not within {deadline_s} s" + (f": {what}" if what else ""))


def holds_for(pred, window_s: float, what: str, interval_s: float = 0.5) -> int:
    """`pred()` holds at every check over `window_s` (the first now, the last at its end):
    a bounded observation window with a condition, not a bare sleep. AssertionError at the
    first check it fails, saying `what` it watched. Returns the number of checks."""
    t0 = time.monotonic()
    checks = 0
    while True:
        checks += 1
        if not pred():
            raise AssertionError(f"{what}: no longer so {time.monotonic() - t0:.1f} s into a "
                                 f"{window_s} s window (check {checks})")
        if time.monotonic() - t0 >= window_s:
            return checks
        time.sleep(min(interval_s, max(window_s - (time.monotonic() - t0), 0)))


def server_instance(name: str = CONTAINER, container: str = "beekeeper-llm") -> str | None:
    """The server container running on a sandbox host, as "<ID> <StartedAt>"; None when none
    runs. Another value later means the server was restarted or replaced in between (a new
    container has a new ID; one Docker restarted keeps its ID, with a new StartedAt)."""
    p = sandbox_exec("docker inspect -f '{{.State.Running}} {{.Id}} {{.State.StartedAt}}' "
                     + shlex.quote(container), name)
    running, _, instance = p.stdout.strip().partition(" ")
    return instance if p.returncode == 0 and running == "true" and instance else None


def unit_show(unit: str, *props: str, name: str = CONTAINER) -> dict[str, str]:
    """`systemctl show` properties of a unit on a sandbox host: {"InvocationID": "…"}
    (a new InvocationID: the unit started again; NRestarts: its automatic restarts)."""
    p = sandbox_exec(f"systemctl show {shlex.quote(unit)} "
                     + " ".join(f"-p {shlex.quote(x)}" for x in props), name)
    return dict(line.split("=", 1) for line in p.stdout.splitlines() if "=" in line)


def port_listener(port: int, name: str = CONTAINER) -> str:
    """What `ss` shows listening on a TCP port of a sandbox host (the process name in it,
    as the deploy's preflight sees it); empty when nothing listens."""
    return sandbox_exec(f"ss -ltnpH 'sport = :{int(port)}'", name).stdout.strip()


def start_deploy(log: Path, *extra: str,
                 inventory: str = "inventories/sandbox.py") -> subprocess.Popen:
    """`deploy(*extra)` started in the background, its output (unbuffered) in `log`, for a
    test that acts while it runs (read the log for `--> Starting operation: …` lines)."""
    if STANDINS is not None:
        STANDINS.ensure_tunnel()
    with log.open("w") as f:
        return subprocess.Popen([str(BIN / "pyinfra"), "-y", inventory, "deploy.py", *extra],
                                cwd=ROOT, stdout=f, stderr=subprocess.STDOUT,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})


def place_the_build(tag: str, pod: str, dest: str) -> None:
    """The main host's server binaries (of image `tag`) in `dest` on the pod host `pod`, where
    the pod's native build of the same tree puts its own: the pod's deploy then finds them
    built (one llama.cpp build a tier)."""
    share = (f"set -e; id=$(docker create {shlex.quote(tag)}); d=$(mktemp -d); for b in "
             f"llama-server llama-bench; do docker cp $id:/usr/local/bin/$b $d/; done; "
             f"docker rm $id >/dev/null; tar -C $d -c .; rm -rf $d")
    p = subprocess.run(f"docker exec {CONTAINER} sh -c {shlex.quote(share)} | "
                       f"docker exec -i {pod} sh -c 'mkdir -p {dest} && tar -x -C {dest}'",
                       shell=True, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


def copy_image(tag: str, src: str, dst: str) -> bool:
    """Copy an image from one sandbox host's Docker into another's (`docker save | docker
    load`), so a second host shares a build instead of repeating it. False when `src` lacks
    it; True when `dst` has it afterwards."""
    def has(name: str) -> bool:
        return subprocess.call(["docker", "exec", name, "docker", "image", "inspect", tag],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) == 0

    if has(dst):
        return True
    if not has(src):
        return False
    save = subprocess.Popen(["docker", "exec", src, "docker", "save", tag],
                            stdout=subprocess.PIPE)
    load = subprocess.run(["docker", "exec", "-i", dst, "docker", "load"], stdin=save.stdout,
                          capture_output=True, text=True)
    if save.stdout is not None:
        save.stdout.close()
    if save.wait() != 0 or load.returncode != 0:
        raise sandbox.SandboxError(
            f"copying {tag} from {src} to {dst} failed: {load.stderr[-300:]}")
    print(f"[sandbox] copied {tag} from {src} to {dst}", file=sys.stderr, flush=True)
    return True
