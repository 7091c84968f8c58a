"""The deploy gate's wait for /health (beekeeper/hostside/hostcheck.py), run as the host runs
it: python3 and the script, against a real listener on loopback; systemctl is a stand-in
script that reads the restart count from a file (a host's systemd is what the sandbox
integration tests use: test_faults.py, test_trixie_compose.py)."""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from beekeeper.hostside import hostcheck

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
        f"n=$(cat {state}); echo $((n + 1)) > {state}\n"
        f"set -- {' '.join(map(str, counts))}\n"
        "i=0; for c in \"$@\"; do last=$c; [ $i -eq $n ] && { echo $c; exit 0; }; "
        "i=$((i + 1)); done; echo $last\n")
    (bin_ / "systemctl").chmod(0o755)
    return {**os.environ, "PATH": f"{bin_}:{os.environ['PATH']}"}


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _check(port: int, env: dict[str, str], *extra: str) -> tuple[dict, float]:
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, SCRIPT, "--port", str(port), "--health-only",
                        *extra], capture_output=True, text=True, env=env, timeout=60)
    return json.loads(p.stdout.splitlines()[0]), time.monotonic() - t0


def test_a_server_in_a_crash_loop_fails_at_once_naming_it(tmp_path):
    env = _systemctl(tmp_path, [5, 5, 6, 7, 8])  # no server listens; the unit restarts
    result, took = _check(_free_port(), env, "--timeout", "40", "--unit", "beekeeper-llm.service")
    assert not result["ok"] and took < 20, (result, took)
    assert "beekeeper-llm.service exited and was restarted 3 times" in result["error"]
    # without --unit (the old call), the same wait runs to its deadline
    result, took = _check(_free_port(), env, "--timeout", "3")
    assert not result["ok"] and took >= 3 and "restarted" not in result["error"]


def test_a_slow_loader_that_never_restarts_is_waited_for(tmp_path):
    env = _systemctl(tmp_path, [2])  # restarted twice before this deploy, never since
    port = _free_port()

    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    def serve_later():
        time.sleep(4)  # the model loads: nothing listens yet
        server = http.server.HTTPServer(("127.0.0.1", port), Health)
        server.timeout = 10
        server.handle_request()

    t = threading.Thread(target=serve_later, daemon=True)
    t.start()
    result, took = _check(port, env, "--timeout", "30", "--unit", "beekeeper-llm.service")
    t.join(10)
    assert result["ok"] and took >= 4, (result, took)
