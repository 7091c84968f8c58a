"""The deploy gate's wait for /health (beekeeper/hostside/hostcheck.py), run as the host runs
it: python3 and the script, against a real listener on loopback; systemctl is a stand-in
script that reads the restart count from a file (a host's systemd is what the sandbox
integration tests use: test_faults.py, test_trixie_compose.py)."""

from __future__ import annotations

import http.server
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from beekeeper.hostside import hostcheck

from .harness import HealthOK

SCRIPT = hostcheck.__file__  # the file the deploy copies to the host


def _systemctl(tmp: Path, counts: list[int]) -> dict[str, str]:
    """A systemctl whose `show -p NRestarts --value U` prints the next of `counts` (the
    last one from then on), as a unit in a crash loop would."""
    bin_ = tmp / "bin"
    bin_.mkdir()
    state = tmp / "calls"
    state.write_text("0")
    (bin_ / "systemctl").write_text(
        "#!/bin/sh\n"
        # the count replaced at once (a rename): a reader never finds the file emptied
        # half-way through a write, which a busy machine made likely
        f"n=$(cat {state}); echo $((n + 1)) > {state}.new && mv {state}.new {state}\n"
        f"set -- {' '.join(map(str, counts))}\n"
        "i=0; for c in \"$@\"; do last=$c; [ $i -eq $n ] && { echo $c; exit 0; }; "
        "i=$((i + 1)); done; echo $last\n")
    (bin_ / "systemctl").chmod(0o755)
    return {**os.environ, "PATH": f"{bin_}:{os.environ['PATH']}"}


def _calls(env: dict[str, str]) -> int:
    """How many times the systemctl stand-in was asked (its state file beside bin/)."""
    return int((Path(env["PATH"].split(":", 1)[0]).parent / "calls").read_text())


def _closed_port() -> socket.socket:
    """A loopback port bound and not listening, held by the test: a connection to it is
    refused (nothing listens, as while the model loads) and no other process can take it."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    return s


def _check(port: int, env: dict[str, str], *extra: str) -> tuple[dict, float]:
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, SCRIPT, "--port", str(port), "--health-only",
                        *extra], capture_output=True, text=True, env=env, timeout=120)
    return json.loads(p.stdout.splitlines()[0]), time.monotonic() - t0


def test_a_server_in_a_crash_loop_fails_at_once_naming_it(tmp_path):
    env = _systemctl(tmp_path, [5, 5, 6, 7, 8])  # no server listens; the unit restarts
    with _closed_port() as closed:
        port = closed.getsockname()[1]
        result, _ = _check(port, env, "--timeout", "100", "--unit", "beekeeper-llm.service")
        assert not result["ok"], result
        assert "beekeeper-llm.service exited and was restarted 3 times" in result["error"]
        # it stopped at the read that saw the third restart (5 -> 8), not at the deadline
        assert _calls(env) == 5
        # without --unit (the old call), the same wait runs to its deadline, asking nothing
        result, took = _check(port, env, "--timeout", "3")
    assert not result["ok"] and took >= 3 and "restarted" not in result["error"]
    assert _calls(env) == 5


def test_a_slow_loader_that_never_restarts_is_waited_for(tmp_path):
    env = _systemctl(tmp_path, [2])  # restarted twice before this deploy, never since

    # the port is bound now and listens only once the check was refused twice (the model
    # loads: nothing listens yet); no sleep, no port another process could take meanwhile
    server = http.server.HTTPServer(("127.0.0.1", 0), HealthOK, bind_and_activate=False)
    server.server_bind()
    server.timeout = 60

    def serve_later():
        while _calls(env) < 3:  # the first read, then one a refused /health
            time.sleep(0.05)
        server.server_activate()
        server.handle_request()

    t = threading.Thread(target=serve_later, daemon=True)
    t.start()
    try:
        result, _ = _check(server.server_address[1], env, "--timeout", "100", "--unit",
                           "beekeeper-llm.service")
    finally:
        t.join(60)
        server.server_close()
    assert result["ok"], result
    assert _calls(env) >= 3  # refused while loading, waited for, never called a crash loop
