"""The deploy gate reaches the server where it listens: a service bound to one address of the
host (host data `bind_address`, e.g. docs/gateway.md's backends on 10.0.0.11) listens there
only, not on 127.0.0.1. The gate's command line is taken from the deploy as queued on canned
facts and run as the host runs it (python3 and the script) against a real listener on
127.0.0.2, a loopback address that is not 127.0.0.1 (Linux answers every 127/8 address)."""

from __future__ import annotations

import http.server
import json
import shlex
import socket
import subprocess
import sys
import threading

import pytest

from beekeeper.hostside import hostcheck

from .harness import CPU_GIT, CPU_HOST, HealthOK, facts, run_deploy

ADDRESS = "127.0.0.2"


def _gate_args(port: int, bind: str) -> list[str]:
    """hostcheck.py's arguments in the deploy's smoke gate of a service on bind:port."""
    ops = run_deploy({**CPU_GIT, "bind_address": bind, "port": port}, facts(**CPU_HOST))
    smoke = dict(ops)[f"Wait for /health on port {port} and smoke-check the API"][0]
    words = shlex.split(smoke.split("; then", 1)[0].removeprefix("if "))
    at = next(i for i, w in enumerate(words) if w.endswith("hostcheck.py"))
    args = words[at + 1:words.index("--out")]
    args[args.index("--timeout") + 1] = "5"
    return args


def test_the_deploy_gate_reaches_a_server_bound_to_its_own_address():
    try:
        probe = socket.socket()
        probe.bind((ADDRESS, 0))
    except OSError:
        pytest.skip(f"{ADDRESS} cannot be bound here")
    port = probe.getsockname()[1]
    probe.close()

    server = http.server.HTTPServer((ADDRESS, port), HealthOK)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    try:
        args = _gate_args(port, ADDRESS)
        p = subprocess.run([sys.executable, hostcheck.__file__, *args, "--health-only"],
                           capture_output=True, text=True, timeout=60)
    finally:
        server.shutdown()
        server.server_close()
    result = json.loads(p.stdout.splitlines()[0])
    # today: "http://127.0.0.1:PORT", connection refused until the deadline, then the
    # deploy rolls the new server back
    assert result["ok"], result


def test_the_rollbacks_check_asks_the_restored_server_where_it_listens(tmp_path):
    """rollback.py checks the previous server at its record's bind address; a wildcard or
    127.0.0.1 bind adds nothing (an older kit's hostcheck.py takes no --host)."""
    from beekeeper.core.deployed import DeployedService
    from beekeeper.hostside import rollback

    def manifest(bind: str) -> str:
        path = tmp_path / f"deployed-{bind}.json"
        path.write_text(DeployedService(
            service="llm", container="beekeeper-llm", unit="beekeeper-llm",
            profile="cpu-tiny", mode="native", image="/x/llama-server", bind_address=bind,
            port=8083, model_path="/m/x.gguf", model_sha256="0" * 64).to_json())
        return str(path)

    assert rollback.reached_at(manifest(ADDRESS)) == ["--host", ADDRESS]
    assert rollback.reached_at(manifest("::1")) == ["--host", "::1"]
    for bind in ("127.0.0.1", "0.0.0.0", "::"):
        assert rollback.reached_at(manifest(bind)) == []
    assert rollback.reached_at(str(tmp_path / "none.json")) == []
